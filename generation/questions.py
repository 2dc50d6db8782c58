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
from dataclasses import dataclass, field

from core.env import env_bool, env_float, env_int, env_str
from generation.conf import DEFAULT_MODEL
from generation.llm import Gateway, LLMError, parse_json_object
from generation.models import AnswerJob
from generation.prompting import prompt_versions
from literature.answers import AnswerError, Citation, check_citations, number_citations
from literature.engines import Engine
from literature.models import Question, Retrieval, RetrievedArticle
from literature.services import combine_results, record_relevance, save_retrieval, search_question

PROMPTS = ["system", "question_queries", "question_relevance", "question_article", "question_synthesis"]
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
    max_articles: int
    article_chars: int
    relevance_fail_open: bool
    synthesis_attempts: int
    verify: bool

    def config(self) -> dict:
        return {**self.__dict__, "prompts": prompt_versions(PROMPTS)}

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
        max_articles=env_int("QUESTIONS_MAX_ARTICLES", 10, minimum=1),
        article_chars=env_int("QUESTIONS_ARTICLE_CHARS", 6000, minimum=200),
        relevance_fail_open=env_bool("QUESTIONS_RELEVANCE_FAIL_OPEN", False),
        synthesis_attempts=env_int("QUESTIONS_SYNTHESIS_ATTEMPTS", 2, minimum=1),
        verify=env_bool("QUESTIONS_VERIFY", True),
    )


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

    def call(self, step: str, prompt_id: str, variables: dict, *, json_output: bool = False):
        params = {"temperature": self.s.temperature, "max_tokens": self.s.max_tokens}
        return self.gateway.complete(
            step=step,
            prompt=prompt_id,
            variables=variables,
            model=self.s.model,
            params=params,
            answer_job=self.job,
            json_output=json_output,
        )

    # --- 1. queries and retrieval ----------------------------------------------------------

    def search(self) -> Retrieval:
        tried: list[str] = []
        results: dict[str, list] = {}
        feedback = ""
        for attempt in range(1, self.s.query_attempts + 1):
            result = self.call(
                f"queries:{attempt}",
                "question_queries",
                {
                    "n": str(self.s.queries),
                    "engine_hint": ENGINE_HINTS.get(self.engine.name, "a search engine"),
                    "question": self.question.text,
                    "feedback": feedback,
                },
                json_output=True,
            )
            parsed = parse_json_object(result.text) or {}
            raw = parsed.get("queries", [])
            queries = [q.strip() for q in raw if isinstance(q, str) and q.strip()] if isinstance(raw, list) else []
            new = [q for q in dict.fromkeys(queries) if q not in results][: self.s.queries]
            if not new:
                self.trace["steps"].append({"step": f"queries:{attempt}", "problem": "no usable queries"})
                feedback = "\nYour last answer held no usable new queries. Answer with the JSON shape shown.\n"
                continue
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
            self.trace["steps"].append({"step": f"queries:{attempt}", "queries": search.queries, "zero_hits": empty})
            if any(results[q] for q in tried):
                break
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
        return save_retrieval(
            question=self.question,
            engine_name=self.engine.name,
            regime=self.regime,
            search=final,
            settings={"pipeline": "clinfo", "results_per_query": self.s.results_per_query},
        )

    # --- 2. relevance ------------------------------------------------------------------------

    def article_text(self, article: RetrievedArticle) -> str:
        source = article.source
        text = source.text if source is not None else ""
        return f"{source.title if source else article.identifier}\n{text[: self.s.article_chars]}"

    def judge(self, retrieval: Retrieval) -> list[RetrievedArticle]:
        articles = list(retrieval.articles.select_related("source").order_by("rank")[: self.s.max_articles])
        decisions: dict[str, tuple[bool, str]] = {}
        for article in articles:
            step = f"relevance:{article.rank}"
            try:
                result = self.call(
                    step,
                    "question_relevance",
                    {"question": self.question.text, "article": self.article_text(article)},
                    json_output=True,
                )
                parsed = parse_json_object(result.text) or {}
                verdict = str(parsed.get("relevant", "")).strip().lower()
                reason = str(parsed.get("reason", "")).strip()
                if verdict not in ("yes", "no"):
                    raise ValueError(f"no yes/no verdict in {result.text[:200]!r}")
                decisions[article.identifier] = (verdict == "yes", reason[:2000])
            except (LLMError, ValueError) as exc:
                message = exc.message if isinstance(exc, LLMError) else str(exc)
                open_ = self.s.relevance_fail_open
                decisions[article.identifier] = (
                    open_,
                    f"no usable answer ({'kept' if open_ else 'left out'}): {message}",
                )
        record_relevance(retrieval=retrieval, decisions=decisions)
        self.trace["relevance"] = {k: {"relevant": v[0], "reason": v[1]} for k, v in decisions.items()}
        return [a for a in articles if decisions[a.identifier][0]]

    # --- 3. article summaries and 4. synthesis -----------------------------------------------

    def summarise(self, citations: list[Citation], articles: dict[str, RetrievedArticle]) -> dict[int, str]:
        summaries = {}
        for c in citations:
            result = self.call(
                f"article:{c.number}",
                "question_article",
                {"question": self.question.text, "article": self.article_text(articles[c.identifier])},
            )
            summaries[c.number] = result.text.strip()
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
                json_output=True,
            )
            parsed = parse_json_object(result.text) or {}
            synthesis, tldr = str(parsed.get("synthesis", "")).strip(), str(parsed.get("tldr", "")).strip()
            try:
                if not synthesis or not tldr:
                    raise AnswerError("the answer needs a synthesis and a TL;DR in the JSON shape shown")
                check_citations(f"{synthesis}\n{tldr}", len(citations))
                return synthesis, tldr
            except AnswerError as exc:
                problem = exc.message
                self.trace["steps"].append({"step": f"synthesis:{attempt}", "problem": problem})
                feedback = f"\nYour last answer was not usable: {problem}. Use only the numbers shown.\n"
        raise AnswerError(f"no usable synthesis after {self.s.synthesis_attempts} attempt(s): {problem}")

    def run(self) -> AnswerOutcome:
        retrieval = self.search()
        if not retrieval.articles.exists():
            return AnswerOutcome("skipped", retrieval, skip_reason="the searches found no article", trace=self.trace)
        relevant = self.judge(retrieval)
        if not relevant:
            return AnswerOutcome(
                "skipped", retrieval, skip_reason="no retrieved article was relevant", trace=self.trace
            )
        citations = number_citations(relevant)
        summaries = self.summarise(citations, {a.identifier: a for a in relevant})
        synthesis, tldr = self.synthesise(citations, summaries)
        return AnswerOutcome("ok", retrieval, synthesis, tldr, citations, trace=self.trace)


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
