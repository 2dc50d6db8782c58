"""Clinfo.ai's pipeline: a clinical question answered from the literature with citations.

question -> N search queries (QUESTIONS_QUERY_ATTEMPTS tries: queries that found nothing
are shown to the model on the next try; results of every try are unioned) -> retrieval
under the regime -> a relevance decision with its reason for each of the best
QUESTIONS_MAX_ARTICLES articles -> a question-focused summary of each relevant article
(design, size, population, result, risk of bias) -> a synthesis with [n] citations and a
TL;DR, checked so that every [n] resolves, re-asked with the problem otherwise -> once
stored, Factored Verification of the answer (QUESTIONS_VERIFY, on by default): each cited
sentence checked against the articles it cites only, the verdicts stored as the answer's
claims with P(supported), and P(answer) and the unsupported count in its metadata.

Where Clinfo.ai's own code went wrong (docs/questions.md): citation numbers come from the
retrieval's ranks, never from which answer arrived first; citation lines are built from
each article's own record; relevance fails closed (an unusable answer keeps the article
out, with the reason recorded) unless QUESTIONS_RELEVANCE_FAIL_OPEN=1; and transient
errors are retried by the gateway (every attempt traced and costed), not swallowed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

from core.env import env_bool, env_float, env_int, env_str
from core.text_validation import MAX_SUMMARY_CHARS
from generation.answer_text import as_text, excerpt, parse_json_object
from generation.conf import DEFAULT_MODEL
from generation.llm import Gateway, LLMError, LLMResult
from generation.meaning import meaning_problem, placeholder_problem
from generation.models import AnswerJob
from generation.prompting import prompt_versions
from literature.answers import AnswerError, Citation, check_citations, number_citations, require_citation
from literature.engines import Engine, bm25_scores
from literature.models import Question, Retrieval, RetrievedArticle
from literature.services import combine_results, record_relevance, record_rerank, save_retrieval, search_question

PROMPTS = ["system", "question_queries", "question_relevance", "question_article", "question_synthesis"]
# A search query longer than this is not a query (PubMed refuses long URLs); an article
# summary longer than this is cut (it goes into the synthesis prompt with all the others).
MAX_QUERY_CHARS = 300
MAX_ARTICLE_SUMMARY_CHARS = 4000
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$")
_YES_NO = re.compile(r"\brelevant\W{0,4}(yes|no|true|false)\b", re.IGNORECASE)
ENGINE_HINTS = {
    "pubmed": "PubMed (field tags such as [tiab] and [mh], Boolean operators)",
    "local": "a plain keyword search engine (a few key terms, no operators)",
}


@dataclass(frozen=True)
class QuestionSettings:
    model: str
    temperature: float
    max_tokens: int
    queries: int
    query_attempts: int
    results_per_query: int
    relevance: str  # "all" (Clinfo.ai: every article judged) or "top" (the best max_articles)
    max_articles: int
    rerank_above: int
    article_chars: int
    relevance_fail_open: bool
    synthesis_attempts: int
    verify: bool
    # "one": one call asks for all the queries; "separate": Clinfo.ai's way, one call per
    # query, each with its own seed (1, 2, 3, ...).
    query_calls: str = "one"

    def config(self) -> dict:
        config = {**self.__dict__, "prompts": prompt_versions(PROMPTS)}
        if self.query_calls == "one":  # runs made before the option keep their version
            config.pop("query_calls")
        return config

    @property
    def version(self) -> str:
        return hashlib.sha256(json.dumps(self.config(), sort_keys=True).encode()).hexdigest()[:12]


def question_settings() -> QuestionSettings:
    """QUESTIONS_* from the environment (docs/questions.md), read when asked for."""
    return QuestionSettings(
        model=env_str("QUESTIONS_MODEL", env_str("GENERATION_MODEL", DEFAULT_MODEL)),
        temperature=env_float("QUESTIONS_TEMPERATURE", 0.0),
        max_tokens=env_int("QUESTIONS_MAX_TOKENS", env_int("GENERATION_MAX_TOKENS", 1024, minimum=1), minimum=1),
        queries=env_int("QUESTIONS_QUERIES", 3, minimum=1),
        query_attempts=env_int("QUESTIONS_QUERY_ATTEMPTS", 3, minimum=1),
        results_per_query=env_int("QUESTIONS_RESULTS_PER_QUERY", 10, minimum=1),
        relevance=relevance_rule(),
        max_articles=env_int("QUESTIONS_MAX_ARTICLES", 10, minimum=1),
        rerank_above=env_int("QUESTIONS_RERANK_ABOVE", 35, minimum=1),
        article_chars=env_int("QUESTIONS_ARTICLE_CHARS", 6000, minimum=200),
        relevance_fail_open=env_bool("QUESTIONS_RELEVANCE_FAIL_OPEN", False),
        synthesis_attempts=env_int("QUESTIONS_SYNTHESIS_ATTEMPTS", 2, minimum=1),
        verify=env_bool("QUESTIONS_VERIFY", True),
        query_calls=query_calls_rule(),
    )


QUERY_CALLS = ("one", "separate")


def query_calls_rule() -> str:
    rule = env_str("QUESTIONS_QUERY_CALLS", "one").strip().lower()
    if rule not in QUERY_CALLS:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"QUESTIONS_QUERY_CALLS must be one of {', '.join(QUERY_CALLS)}, not {rule!r}")
    return rule


RELEVANCE_RULES = ("all", "top")


def relevance_rule() -> str:
    rule = env_str("QUESTIONS_RELEVANCE", "all").strip().lower()
    if rule not in RELEVANCE_RULES:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"QUESTIONS_RELEVANCE must be one of {', '.join(RELEVANCE_RULES)}, not {rule!r}")
    return rule


@dataclass
class AnswerOutcome:
    status: str  # "ok", "skipped"
    retrieval: Retrieval
    synthesis: str = ""
    tldr: str = ""
    citations: list[Citation] = field(default_factory=list)
    skip_reason: str = ""
    trace: dict = field(default_factory=dict)


class QuestionRunner:
    """Answers one question with one engine under one regime, recording every call on `job`."""

    def __init__(self, *, question: Question, engine: Engine, regime: str, settings: QuestionSettings, job, gateway):
        self.question, self.engine, self.regime, self.s = question, engine, regime, settings
        self.job: AnswerJob | None = job
        self.gateway: Gateway = gateway
        self.trace: dict = {"steps": []}

    def call(self, step: str, prompt_id: str, variables: dict, **extra) -> LLMResult:
        params = {"temperature": self.s.temperature, "max_tokens": self.s.max_tokens, **extra}
        return self.gateway.complete(
            step=step, prompt=prompt_id, variables=variables, model=self.s.model, params=params, answer_job=self.job
        )

    def publish(self) -> None:
        """Write the trace so far on the job, for a page that shows the steps as they run
        (the ask page polls it). Only while the job is running: a finished job's trace is
        written by store_answer_outcome."""
        if self.job is not None:
            AnswerJob.objects.filter(pk=self.job.pk, status=AnswerJob.Status.RUNNING).update(result=self.trace)

    def decided(self, article: RetrievedArticle, decision: tuple[bool, str]) -> None:
        title = article.source.title if article.source is not None else ""
        self.trace["relevance"][article.identifier] = {
            "relevant": decision[0],
            "reason": decision[1],
            "title": title,
            "rank": article.rank,  # PostgreSQL's jsonb keeps no key order: the rank gives it back
        }
        self.publish()

    # --- 1. queries and retrieval ----------------------------------------------------------

    def search(self) -> Retrieval:
        tried: list[str] = []
        results: dict[str, list] = {}
        feedback = ""
        self.search_problem = ""
        for attempt in range(1, self.s.query_attempts + 1):
            result = self.write_queries(attempt, feedback)
            written, well_formed = read_queries(result.text)
            fresh = [q for q in dict.fromkeys(written) if q not in results]
            too_long = [q for q in fresh if len(q) > MAX_QUERY_CHARS]
            wordless = [q for q in fresh if len(q) <= MAX_QUERY_CHARS and not self.engine.searchable(q)]
            new = [q for q in fresh if q not in too_long and q not in wordless][: self.s.queries]
            if not new:
                if not written:
                    problem = "the model wrote no usable queries: " + (
                        "its list of queries was empty"
                        if well_formed
                        else f"no list of queries in {excerpt(result.text)}"
                    )
                    feedback = "\nYour last answer held no usable queries. Answer with the JSON shape shown.\n"
                elif wordless and not too_long:
                    problem = "the model's queries had no searchable words (only stop words or punctuation)"
                    feedback = "\nYour last queries had no search terms; use the question's key medical terms.\n"
                elif too_long:
                    problem = f"the model's queries were longer than {MAX_QUERY_CHARS} characters"
                    feedback = "\nYour last queries were far too long; write a few key terms each.\n"
                else:
                    problem = "the model repeated queries it had already written"
                    feedback = "\nYour last answer repeated earlier queries; write new ones.\n"
                self.search_problem = result.record(problem, well_formed=well_formed)
                self.trace["steps"].append({"step": f"queries:{attempt}", "problem": problem})
                continue
            result.record(well_formed=well_formed)
            search = search_question(
                question=self.question,
                engine=self.engine,
                regime=self.regime,
                queries=new,
                limit=self.s.results_per_query,
            )
            for query, hits in zip(search.queries, search.results, strict=True):
                results[query] = hits
            tried += search.queries
            empty = [q for q in search.queries if not results[q]]
            step = {"step": f"queries:{attempt}", "queries": search.queries, "zero_hits": empty}
            step["hits"] = [len(results[q]) for q in search.queries]
            if wordless or too_long:
                step["left_out"] = [q[:MAX_QUERY_CHARS] for q in wordless + too_long]
            self.trace["steps"].append(step)
            self.publish()
            if any(results[q] for q in tried):
                break
            self.search_problem = "the model's queries found no article"
            feedback = (
                "\nThese queries found nothing; write broader ones with other terms:\n"
                + "\n".join(f"- {q}" for q in empty)
                + "\n"
            )
        # Every try's results, unioned in the order the queries were written.
        final = combine_results(
            question=self.question,
            engine=self.engine,
            regime=self.regime,
            queries=tried,
            results=[results[q] for q in tried],
            limit=self.s.results_per_query * max(len(tried), 1),
        )
        retrieval = save_retrieval(
            question=self.question,
            engine_name=self.engine.name,
            regime=self.regime,
            search=final,
            settings={"pipeline": "clinfo", "results_per_query": self.s.results_per_query},
        )
        self.trace["retrieved"] = len(final.hits)
        self.publish()
        return retrieval

    def write_queries(self, attempt: int, feedback: str):
        """The answer(s) holding this try's queries: one call asking for all of them, or
        (QUESTIONS_QUERY_CALLS=separate, Clinfo.ai's way) one call per query, each with
        its own seed, read together."""
        variables = {
            "n": str(self.s.queries),
            "engine_hint": ENGINE_HINTS.get(self.engine.name, "a search engine"),
            "question": self.question.text,
            "feedback": feedback,
        }
        if self.s.query_calls == "one":
            return self.call(f"queries:{attempt}", "question_queries", variables)
        return _Answers(
            [
                self.call(f"queries:{attempt}:{seed}", "question_queries", {**variables, "n": "1"}, seed=seed)
                for seed in range(1, self.s.queries + 1)
            ]
        )

    # --- 2. relevance ------------------------------------------------------------------------

    def article_text(self, article: RetrievedArticle) -> str:
        source = article.source
        text = source.text if source is not None else ""
        return f"{source.title if source else article.identifier}\n{text[: self.s.article_chars]}"

    def judge(self, retrieval: Retrieval) -> list[RetrievedArticle]:
        """The relevant articles. Clinfo.ai's rule (QUESTIONS_RELEVANCE=all, the default):
        every retrieved article is judged; QUESTIONS_RELEVANCE=top judges only the best
        QUESTIONS_MAX_ARTICLES by retrieval rank (the others stay unjudged)."""
        articles = list(retrieval.articles.select_related("source").order_by("rank"))
        if self.s.relevance == "top":
            articles = articles[: self.s.max_articles]
        decisions: dict[str, tuple[bool, str]] = {}
        self.trace["relevance"] = {}
        self.trace["to_judge"] = len(articles)
        for article in articles:
            step = f"relevance:{article.rank}"
            try:
                result = self.call(
                    step,
                    "question_relevance",
                    {"question": self.question.text, "article": self.article_text(article)},
                )
            except LLMError as exc:
                problem = exc.message
            else:
                relevant, reason, problem = read_relevance(result.text)
                result.record(problem)
                if not problem:
                    decisions[article.identifier] = (relevant, reason[:2000])
                    self.decided(article, decisions[article.identifier])
                    continue
            open_ = self.s.relevance_fail_open
            decisions[article.identifier] = (open_, f"no usable answer ({'kept' if open_ else 'left out'}): {problem}")
            self.decided(article, decisions[article.identifier])
        record_relevance(retrieval=retrieval, decisions=decisions)
        return self.rerank([a for a in articles if decisions[a.identifier][0]])

    def rerank(self, relevant: list[RetrievedArticle]) -> list[RetrievedArticle]:
        """Clinfo.ai §3.2.3: when more than QUESTIONS_RERANK_ABOVE articles are relevant,
        re-rank them with BM25 against the question and keep that many. The paper gives
        the threshold but not how many to keep; keeping the threshold's number bounds the
        summaries and the synthesis prompt. (Clinfo.ai's code instead keeps 20 above 21, in
        its synthesis step.) The relevance decisions stay as the model made them; the
        articles left out are recorded in the trace and on the retrieval."""
        if self.s.relevance != "all" or len(relevant) <= self.s.rerank_above:
            return relevant
        scores = bm25_scores(self.question.text, [self.article_text(a) for a in relevant])
        order = sorted(range(len(relevant)), key=lambda i: (-round(scores[i], 9), relevant[i].rank))
        kept = [relevant[i] for i in order[: self.s.rerank_above]]
        dropped = [relevant[i] for i in order[self.s.rerank_above :]]
        rerank = {
            "relevant": len(relevant),
            "kept": len(kept),
            "dropped": [a.identifier for a in dropped],
            "scores": {a.identifier: round(scores[i], 6) for i, a in enumerate(relevant)},
        }
        record_rerank(retrieval=relevant[0].retrieval, rerank=rerank)
        self.trace["rerank"] = rerank
        self.trace["steps"].append({"step": "rerank", "relevant": len(relevant), "kept": len(kept)})
        return kept

    # --- 3. article summaries and 4. synthesis -----------------------------------------------

    def summarise(self, citations: list[Citation], articles: dict[str, RetrievedArticle]) -> dict[int, str]:
        summaries = {}
        for c in citations:
            result = self.call(
                f"article:{c.number}",
                "question_article",
                {"question": self.question.text, "article": self.article_text(articles[c.identifier])},
            )
            text = result.text.strip()
            empty = meaning_problem(text, prompt_id="question_article", what="model's summary of the article")
            if empty:
                result.record(empty)
                text = f"(no summary: {empty})"
            elif len(text) > MAX_ARTICLE_SUMMARY_CHARS:
                result.record(well_formed=False)
                text = text[:MAX_ARTICLE_SUMMARY_CHARS].rstrip() + " …"
            else:
                result.record()
            summaries[c.number] = text
            self.trace["article_summaries"] = {str(n): t for n, t in summaries.items()}
            self.publish()
        self.trace["article_summaries"] = {str(n): text for n, text in summaries.items()}
        return summaries

    def synthesise(self, citations: list[Citation], summaries: dict[int, str]) -> tuple[str, str]:
        articles = "\n\n".join(f"[{c.number}] {c.reference}\n{summaries[c.number]}" for c in citations)
        feedback = ""
        problem = "no answer"
        for attempt in range(1, self.s.synthesis_attempts + 1):
            result = self.call(
                f"synthesis:{attempt}",
                "question_synthesis",
                {"question": self.question.text, "articles": articles, "feedback": feedback},
            )
            parsed = parse_json_object(result.text)
            synthesis = as_text(parsed.get("synthesis")) if parsed else ""
            tldr = as_text(parsed.get("tldr")) if parsed else ""
            well_formed = bool(parsed) and all(isinstance(parsed.get(k), str) for k in ("synthesis", "tldr"))
            try:
                if not synthesis or not tldr:
                    raise AnswerError(
                        "the answer needs a synthesis and a TL;DR in the JSON shape shown"
                        + ("" if parsed else f" (it was {excerpt(result.text)})")
                    )
                # The placeholder sent back ({"synthesis": "...", "tldr": "..."}) has the shape and no meaning.
                empty = meaning_problem(synthesis, prompt_id="question_synthesis", what="synthesis")
                empty = empty or placeholder_problem(tldr, prompt_id="question_synthesis", what="TL;DR")
                if empty:
                    raise AnswerError(empty)
                length = len(synthesis) + len(tldr)
                if length > MAX_SUMMARY_CHARS - 1000:
                    raise AnswerError(f"the synthesis is {length:,} characters long; at most 250 words were asked for")
                check_citations(f"{synthesis}\n{tldr}", len(citations))
                require_citation(synthesis, len(citations))
                result.record(well_formed=well_formed)
                return synthesis, tldr
            except AnswerError as exc:
                problem = result.record(exc.message, well_formed=well_formed)
                self.trace["steps"].append({"step": f"synthesis:{attempt}", "problem": problem})
                feedback = f"\nYour last answer was not usable: {problem}. Use only the numbers shown.\n"
        raise AnswerError(f"no usable synthesis after {self.s.synthesis_attempts} attempt(s): {problem}")

    def run(self) -> AnswerOutcome:
        retrieval = self.search()
        if not retrieval.articles.exists():
            reason = self.search_problem or "the searches found no article"
            return AnswerOutcome("skipped", retrieval, skip_reason=reason, trace=self.trace)
        relevant = self.judge(retrieval)
        if not relevant:
            return AnswerOutcome(
                "skipped", retrieval, skip_reason="no retrieved article was relevant", trace=self.trace
            )
        citations = number_citations(relevant)
        self.trace["citations"] = [asdict(c) for c in citations]
        self.publish()
        summaries = self.summarise(citations, {a.identifier: a for a in relevant})
        synthesis, tldr = self.synthesise(citations, summaries)
        self.trace["answer"] = {"synthesis": synthesis, "tldr": tldr}
        return AnswerOutcome("ok", retrieval, synthesis, tldr, citations, trace=self.trace)


class _Answers:
    """Several query-writing answers read as one: their queries together, the verdict
    recorded on each call."""

    def __init__(self, results: list[LLMResult]):
        self.results = results
        found = [q for r in results for q in read_queries(r.text)[0]]
        self.text = json.dumps({"queries": found}) if found else "\n".join(r.text for r in results)
        self.well_formed = all(read_queries(r.text)[1] for r in results)

    def record(self, problem: str = "", *, well_formed: bool | None = None) -> str:
        for result in self.results:
            result.record(problem, well_formed=self.well_formed if well_formed is None else well_formed)
        return problem.strip()


def read_queries(text: str) -> tuple[list[str], bool]:
    """(the queries in a query-writing answer, whether it had the JSON shape asked for).
    Tolerant: a single string is one query, a list inside the list is one query of its
    words, numbers and nulls are left out; an answer in prose gives the lines it wrote as
    a list ("1. aspirin stroke", "- warfarin")."""
    parsed = parse_json_object(text)
    raw = parsed.get("queries") if parsed else None
    well_formed = isinstance(raw, list) and all(isinstance(q, str) for q in raw)
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list):
        queries = [" ".join(as_text(q).split()) for q in raw]
    elif parsed is None:
        queries = [m.group(1) for m in map(_LIST_ITEM.match, text.splitlines()) if m]
    else:
        queries = []
    return [q for q in queries if q], well_formed


def read_relevance(text: str) -> tuple[bool, str, str]:
    """(relevant, reason, problem) from a relevance answer; `problem` is "" when the
    answer held a yes/no verdict."""
    parsed = parse_json_object(text)
    if parsed is not None:
        raw = parsed.get("relevant")
        verdict = ("yes" if raw else "no") if isinstance(raw, bool) else as_text(raw).lower().strip(" .!")
        reason = as_text(parsed.get("reason"))
    else:
        match = list(_YES_NO.finditer(text))
        verdict = match[-1].group(1).lower() if match else ""
        reason = text.strip()
    verdict = {"true": "yes", "false": "no"}.get(verdict, verdict)
    if verdict not in ("yes", "no"):
        return False, "", f"the answer had no yes/no relevance verdict ({excerpt(text)})"
    return verdict == "yes", reason, ""


class _OnJob:
    """The gateway, with every call recorded on an answer job (the summary pipelines'
    Runner records on a GenerationJob; this lets it verify an answer)."""

    def __init__(self, gateway: Gateway, job: AnswerJob | None):
        self.gateway, self.job = gateway, job

    def complete(self, **request):
        request.pop("job", None)
        return self.gateway.complete(answer_job=self.job, **request)


def verify_answer(*, summary, job: AnswerJob | None, gateway: Gateway) -> dict:
    """Factored Verification of a stored answer against its evidence (generation.pipelines:
    the same claim split, prompt and P(supported) as for summaries). Returns the claims."""
    from generation.conf import pipeline_settings
    from generation.pipelines import Runner, pipeline_spec

    runner = Runner(spec=pipeline_spec("factored"), source=summary.source, job=None, gateway=_OnJob(gateway, job))
    return runner.verify_claims("verify_claim", summary.text, pipeline_settings("factored"))
