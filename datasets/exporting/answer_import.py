"""The answer tables of a dataset folder's re-import (ratings and spans, as assignments
and submitted revisions), each revision's answers checked against its rubric."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from annotate.models import (
    Assignment,
    Rating,
    Rationale,
    Revision,
    Span,
    Summary,
)
from annotate.rubrics import NA, AnswerContext, RubricDefinition, per_claim_parts
from annotate.selectors.claims import claim_ids
from annotate.services.ratings import compared_texts
from core.exceptions import ApplicationError
from datasets.exporting.folder import DatasetImportError


def parse_time(value: str | None, where: str) -> datetime | None:
    """An ISO 8601 time column, or the import error naming where it is."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise DatasetImportError(f"{where}: {value!r} is not an ISO 8601 time") from None


class AnswerTables:
    """The ratings and spans part of datasets.exporting.dataset_import's importer, which
    inherits it: these methods use its table(), fail(), summary() and batch() and the
    rubrics, users and writer it holds."""

    def import_answers(self) -> None:
        revisions = self.answers_by_revision()
        assignments = self.make_assignments(revisions)
        self.make_revisions(revisions, assignments)
        self.counts["assignments"] = len(assignments)
        self.counts["revisions"] = len(revisions)

    def answers_by_revision(self) -> dict[tuple, dict[str, Any]]:
        """The ratings' and spans' rows grouped by the revision they belong to, keyed by
        what identifies it in the tables."""
        revisions: dict[tuple, dict[str, Any]] = {}
        for table, rows in (("ratings", self.ratings_rows), ("spans", self.span_rows)):
            for number, row in enumerate(rows, start=1):
                where = f"{table} row {number}"
                key = (row["batch"], row["summary_key"], row["rater"], row["phase"], row["revision_number"])
                rubric_key = (row["rubric_key"], row["rubric_version"])
                if rubric_key not in self.rubrics:
                    self.fail(f"{where}: rubric {rubric_key[0]} v{rubric_key[1]} is not in the rubric table")
                if row["phase"] not in Revision.Phase.values:
                    self.fail(f"{where}: unknown phase {row['phase']!r}")
                info = revisions.setdefault(
                    key,
                    {
                        "rubric": rubric_key,
                        "submitted_at": parse_time(row["submitted_at"], where),
                        "assisted": bool(row["assisted"]),
                        "ratings": [],
                        "spans": [],
                    },
                )
                info[table].append(row)
        return revisions

    def make_assignments(self, revisions: dict[tuple, dict[str, Any]]) -> dict[tuple, Assignment]:
        assignments: dict[tuple, Assignment] = {}
        live_pairs: set[tuple[str, str]] = set()
        positions: dict[str, int] = {}
        for key in sorted(revisions, key=lambda k: (k[2], k[1], k[0] or "", k[3], k[4])):
            batch_name, summary_key, rater, _, _ = key
            akey = (batch_name, summary_key, rater)
            if akey not in assignments:
                summary = self.summary(summary_key, f"answers of {rater}")
                submitted = max(info["submitted_at"] for k, info in revisions.items() if (k[0], k[1], k[2]) == akey)
                # A rater's answers to one summary from several batches (stored before one
                # live assignment per pair was enforced): the first is live, the others are
                # withdrawn, as the upgrade does; the answers that count are the same.
                again = (summary_key, rater) in live_pairs
                live_pairs.add((summary_key, rater))
                assignments[akey] = Assignment(
                    study=self.study,
                    batch=self.batch(batch_name, f"answers of {rater} on {summary_key}"),
                    summary=summary,
                    rater=self.users[rater],
                    position=positions.setdefault(rater, 0),
                    shown_order=self.shown.get(key, []),
                    state=Assignment.State.WITHDRAWN if again else Assignment.State.SUBMITTED,
                    submitted_at=submitted,
                    withdrawn_at=submitted if again else None,
                )
                positions[rater] += 1
        self.writer.create(list(assignments.values()))
        return assignments

    def make_revisions(self, revisions: dict[tuple, dict[str, Any]], assignments: dict[tuple, Assignment]) -> None:
        """The submitted revisions, each checked against its rubric version, then their
        ratings, rationales and spans."""
        made = {}
        for key, info in revisions.items():
            batch_name, summary_key, rater, phase, number = key
            assignment = assignments[(batch_name, summary_key, rater)]
            made[key] = Revision(
                assignment=assignment,
                number=number,
                status=Revision.Status.SUBMITTED,
                phase=phase,
                rubric=self.rubrics[info["rubric"]],
                submitted_at=info["submitted_at"],
                assisted=info["assisted"],
                shown_order=self.shown.get(key, []),
            )
            self.check_revision(key, info, assignment.summary)
        self.writer.create(list(made.values()))
        ratings: list[Rating] = []
        rationales: list[str | None] = []
        spans: list[Span] = []
        for key, info in revisions.items():
            revision = made[key]
            definition = self.definitions[info["rubric"]]
            for row in info["ratings"]:
                if row["value"] == [] and definition.question(row["question"]).several_options:
                    continue  # nothing ticked: the rating page stores no row for it either
                ratings.append(self.rating(definition, revision, row))
                rationales.append(row["rationale"])
            spans.extend(self.span(key, revision, row) for row in info["spans"])
        created = self.writer.create(ratings)
        self.writer.create(Rationale(rating=r, text=t) for r, t in zip(created, rationales, strict=True) if t)
        self.writer.create(spans)

    def rating(self, definition: RubricDefinition, revision: Revision, row: dict) -> Rating:
        q = definition.question(row["question"])
        value = row["value"]
        finding = self.findings[row["finding"]] if row["finding"] is not None else None
        is_score = q.is_scale and value != NA
        low, high = q.scale_bounds if is_score else (None, None)
        return Rating(
            revision=revision,
            question=q.key,
            finding=finding,
            score=value if is_score else None,
            scale_min=low,
            scale_max=high,
            value=None if is_score else value,
        )

    def span(self, key: tuple, revision: Revision, row: dict) -> Span:
        return Span(
            revision=revision,
            question=row["question"],
            index=row["index"],
            target=row["target"],
            start=row["start"],
            end=row["end"],
            text=row["text"] or "",
            link_start=row["link_start"],
            link_end=row["link_end"],
            link_text=row["link_text"] or "",
            answers=row["answers"],
            rationale=row["rationale"] or "",
            summary_uuid=self.span_summaries.get((*key, row["question"], row["index"])),
        )

    def check_revision(self, key: tuple, info: dict, summary: Summary) -> None:
        """The revision's answers, rebuilt as the rubric takes them, must be allowed by
        its rubric version (checked as a draft: values, not completeness)."""
        batch_name, summary_key, rater, phase, number = key
        where = f"answers of {rater} on {summary_key} ({phase}, revision {number})"
        definition = self.definitions[info["rubric"]]
        answers: dict[str, Any] = {}
        rationales: dict[str, Any] = {}
        for row in info["ratings"]:
            try:
                q = definition.question(row["question"])
            except KeyError:
                self.fail(f"{where}: {row['question']!r} is not a question of rubric {definition.key}")
            value = row["value"]
            if row["finding"] is not None:
                if row["finding"] not in self.findings:
                    self.fail(f"{where}: no finding {row['finding']} in the findings table")
                answers.setdefault(q.key, {})[row["finding"]] = value
                if row["rationale"]:
                    rationales.setdefault(q.key, {})[row["finding"]] = row["rationale"]
            elif q.per_claim:
                # One rating holds every claim's answer and rationale (annotate.selectors.claims).
                if not isinstance(value, dict) or not all(isinstance(p, dict) for p in value.values()):
                    self.fail(f"{where}: {q.key} must map claim ids to an answer and a rationale")
                answers[q.key], rationales[q.key] = per_claim_parts(value)
            else:
                answers[q.key] = value
                if row["rationale"]:
                    rationales[q.key] = row["rationale"]
        for row in info["spans"]:
            span = {
                "target": row["target"],
                "start": row["start"],
                "end": row["end"],
                "text": row["text"],
                "answers": row["answers"],
                "rationale": row["rationale"] or "",
            }
            if row["link_start"] is not None:
                span["link"] = {"start": row["link_start"], "end": row["link_end"], "text": row["link_text"]}
            in_summary = self.span_summaries.get((*key, row["question"], row["index"]))
            if in_summary is not None:
                span["summary"] = in_summary
            answers.setdefault(row["question"], []).append(span)
        if summary.source.key in self.withheld:
            return  # no text to check offsets against
        context = AnswerContext(
            summary_text=summary.text,
            source_text=summary.source.text,
            finding_ids=tuple(str(u) for u in summary.source.findings.order_by("index").values_list("uuid", flat=True)),
            claim_ids=claim_ids(summary) if definition.asks_claims else (),
            compared=compared_texts(summary),
        )
        try:
            definition.validate(answers, rationales, final=False, context=context)
        except ApplicationError as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(exc.extra.get("fields", {}).items())) or exc.message
            self.fail(f"{where}: {detail}")
