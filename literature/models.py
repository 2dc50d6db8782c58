"""Clinical questions and what was retrieved for them.

A question belongs to a study, like its sources. Retrievals are machine output (which
engine, under which regime, which queries, which articles in which order): they can be
recomputed, so a retrieval's articles go with it; nothing here is human work.
"""

from __future__ import annotations

import uuid

from django.db import models

from annotate.models import Source, Study
from core.models import TimeStamped


class Question(TimeStamped):
    """A clinical question, with what it is judged against: its gold answer and the
    identifiers of its reference articles (PMIDs or source keys)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="questions")
    key = models.CharField(max_length=200, help_text="Import key, unique within the study.")
    text = models.TextField()
    gold_answer = models.TextField(blank=True)
    reference_ids = models.JSONField(default=list, blank=True, help_text="PMIDs or source keys of the references.")
    exclude_ids = models.JSONField(
        default=list, blank=True, help_text="Never retrieved for this question (e.g. the review it came from)."
    )
    published_on = models.DateField(
        null=True, blank=True, help_text="Restricted search keeps articles published before this day."
    )
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="question_unique_study_key")]
        ordering = ["study", "key"]

    def __str__(self) -> str:
        return self.key


class Retrieval(TimeStamped):
    """One search for a question: an engine, a regime, the queries sent and the articles
    kept, in rank order."""

    class Engine(models.TextChoices):
        LOCAL = "local", "Local BM25 over the study's sources"
        PUBMED = "pubmed", "PubMed (NCBI E-utilities)"

    class Regime(models.TextChoices):
        RESTRICTED = "restricted", "Restricted search (published before the question's date)"
        EXCLUDE_SOURCE = "exclude-source", "Source dropped (the excluded identifiers removed)"
        UNRESTRICTED = "unrestricted", "Unrestricted search"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="retrievals")
    engine = models.CharField(max_length=20, choices=Engine.choices)
    regime = models.CharField(max_length=20, choices=Regime.choices)
    queries = models.JSONField(default=list, help_text='[{"query": ..., "hits": n}, ...] in the order sent.')
    excluded_hits = models.JSONField(
        default=list, blank=True, help_text="Identifiers the search returned but the regime removed."
    )
    settings = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["question", "engine", "regime"], name="retrieval_question_idx")]
        ordering = ["question", "-created_at"]

    def __str__(self) -> str:
        return f"{self.question.key} ({self.engine}, {self.regime})"


class RetrievedArticle(models.Model):
    """An article a retrieval kept, at its rank (1 = best), with the relevance decision
    when one was made (None: not judged)."""

    retrieval = models.ForeignKey(Retrieval, on_delete=models.CASCADE, related_name="articles")
    rank = models.PositiveIntegerField()
    identifier = models.CharField(max_length=200, help_text="Source key (local engine) or PMID (PubMed).")
    source = models.ForeignKey(Source, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    score = models.FloatField(null=True, blank=True)
    relevant = models.BooleanField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["retrieval", "rank"], name="retrieved_unique_rank"),
            models.UniqueConstraint(fields=["retrieval", "identifier"], name="retrieved_unique_identifier"),
        ]
        ordering = ["retrieval", "rank"]

    def __str__(self) -> str:
        return f"{self.rank}. {self.identifier}"
