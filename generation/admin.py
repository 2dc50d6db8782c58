"""Admin for generation: runs with their progress, jobs with the whole trace (context,
every LLM call, reference checks, verdicts, the stored claims). Everything here is a
record of what happened, so it is read-only."""

import json

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from annotate.admin import SummaryAdmin
from annotate.models import Summary
from generation.models import (
    AnswerJob,
    EvaluationRun,
    EvaluationScore,
    GenerationJob,
    GenerationRun,
    JudgeAnswer,
    JudgeRun,
    LLMCall,
)
from generation.selectors import with_progress


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def _pre(value) -> str:
    return format_html("<pre style='white-space:pre-wrap;max-width:70em'>{}</pre>", value)


class LLMCallInline(ReadOnlyMixin, admin.TabularInline):
    model = LLMCall
    extra = 0
    can_delete = False
    fields = ["step", "attempt", "prompt_id", "prompt_version", "model", "status_code", "tokens_in", "tokens_out"]
    fields += ["latency", "cost", "error", "well_formed", "usable", "problem", "exchange"]
    readonly_fields = fields
    show_change_link = True

    @admin.display(description="Prompt → response")
    def exchange(self, obj):
        prompt = obj.messages[-1]["content"] if obj.messages else ""
        return format_html(
            "<details><summary>show</summary>{}<hr>{}</details>", _pre(prompt), _pre(obj.response_text or "—")
        )


@admin.register(GenerationJob)
class GenerationJobAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["source", "pipeline", "pipeline_version", "status", "tries", "summary", "finished_at"]
    list_filter = ["status", "pipeline", "source__study"]
    list_select_related = ["source", "summary"]
    search_fields = ["source__key", "summary__key"]
    fields = ["uuid", "source", "pipeline", "pipeline_version", "status", "tries", "claimed_at", "finished_at"]
    fields += ["summary", "summary_text", "flags", "hallucinations", "skip_reason", "error", "reference_checks"]
    fields += ["claims", "steps"]
    fields += ["context", "config_pretty"]
    readonly_fields = fields
    inlines = [LLMCallInline]

    @admin.display(description="Summary text")
    def summary_text(self, obj):
        return _pre(obj.summary.text) if obj.summary_id else "—"

    @admin.display(description="Flags")
    def flags(self, obj):
        return ", ".join(obj.result.get("flags", [])) or "—"

    @admin.display(description="Hallucinations (draft → final)")
    def hallucinations(self, obj):
        """Factored Verification's counts; "not checked" when no claim was judged, which is
        not the same as none found."""
        factored = obj.result.get("factored")
        if not isinstance(factored, dict):
            return "—"

        def shown(count) -> str:
            return "not checked" if count is None else str(count)

        return f"{shown(factored.get('hallucinations_before'))} → {shown(factored.get('hallucinations_after'))}"

    @admin.display(description="Final reference checks")
    def reference_checks(self, obj):
        report = obj.result.get("reference_checks")
        return _pre(json.dumps(report, indent=2)) if report else "—"

    @admin.display(description="Claims")
    def claims(self, obj):
        if not obj.summary_id:
            return "—"
        rows = [
            (c.index + 1, c.verdict, "" if c.probability is None else f"p={c.probability:.2f}", c.text, c.explanation)
            for c in obj.summary.claims.order_by("index")
        ]
        return format_html(
            "<ol style='margin:0'>{}</ol>",
            format_html_join("", "<li value='{}'><b>{}</b> {} — {}<br><i>{}</i></li>", rows),
        )

    @admin.display(description="Steps (texts, checks, verdicts)")
    def steps(self, obj):
        return _pre(json.dumps(obj.result.get("steps", []), indent=2))

    @admin.display(description="Context")
    def context(self, obj):
        return _pre(json.dumps(obj.result.get("context"), indent=2))

    @admin.display(description="Configuration")
    def config_pretty(self, obj):
        return _pre(json.dumps(obj.config, indent=2))


class AnswerLLMCallInline(LLMCallInline):
    fk_name = "answer_job"


@admin.register(AnswerJob)
class AnswerJobAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Clinical questions answered by generation.questions: the trace of each (docs/questions.md)."""

    list_display = ["question", "engine", "regime", "pipeline_version", "status", "tries", "summary", "finished_at"]
    list_filter = ["status", "engine", "regime", "question__study"]
    list_select_related = ["question", "summary"]
    search_fields = ["question__key", "summary__key"]
    fields = ["uuid", "question", "engine", "regime", "pipeline_version", "status", "tries", "claimed_at"]
    fields += ["finished_at", "retrieval", "summary", "skip_reason", "error", "trace", "config_pretty"]
    readonly_fields = fields
    inlines = [AnswerLLMCallInline]

    @admin.display(description="Trace")
    def trace(self, obj):
        return _pre(json.dumps(obj.result, indent=2, ensure_ascii=False))

    @admin.display(description="Configuration")
    def config_pretty(self, obj):
        return _pre(json.dumps(obj.config, indent=2, ensure_ascii=False))


class JudgeAnswerInline(ReadOnlyMixin, admin.TabularInline):
    model = JudgeAnswer
    extra = 0
    can_delete = False
    fields = ["summary", "status", "answers", "rationales", "error"]
    readonly_fields = fields


@admin.register(JudgeRun)
class JudgeRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Rubric judges (generation.judging): each run's answers, valid or not, with why."""

    list_display = ["created_at", "study", "model", "version"]
    list_filter = ["study"]
    fields = ["uuid", "study", "model", "version", "config"]
    readonly_fields = fields
    inlines = [JudgeAnswerInline]


class EvaluationScoreInline(ReadOnlyMixin, admin.TabularInline):
    model = EvaluationScore
    extra = 0
    can_delete = False
    fields = ["summary", "name", "value", "status", "rationale", "error"]
    readonly_fields = fields


@admin.register(EvaluationRun)
class EvaluationRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Automatic evaluators (generation.evaluators): each run's scores with their provenance."""

    list_display = ["created_at", "study", "evaluator", "version"]
    list_filter = ["evaluator", "study"]
    fields = ["uuid", "study", "evaluator", "version", "config"]
    readonly_fields = fields
    inlines = [EvaluationScoreInline]


@admin.register(GenerationRun)
class GenerationRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["created_at", "study", "pipeline", "pipeline_version", "progress"]
    list_filter = ["study", "pipeline"]
    list_select_related = ["study"]
    fields = ["uuid", "study", "pipeline", "pipeline_version", "created_at", "progress", "job_links"]
    readonly_fields = fields

    def get_queryset(self, request):
        return with_progress(super().get_queryset(request))

    @admin.display(description="Progress")
    def progress(self, obj):
        counts = {status: getattr(obj, f"n_{status}") for status in GenerationJob.Status.values}
        return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no jobs"

    @admin.display(description="Jobs")
    def job_links(self, obj):
        rows = [
            (reverse("admin:generation_generationjob_change", args=[job.pk]), job.source.key, job.status)
            for job in obj.jobs.select_related("source").order_by("source__key")
        ]
        return format_html("<ul>{}</ul>", format_html_join("", "<li><a href='{}'>{}</a>: {}</li>", rows))


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["created_at", "job", "step", "attempt", "model", "status_code", "tokens_in", "tokens_out"]
    list_display += ["latency", "cost", "well_formed", "usable"]
    list_filter = ["step", "model", "status_code", "well_formed", "usable"]
    list_select_related = ["job__source"]
    readonly_fields = [f.name for f in LLMCall._meta.fields]


class GenerationJobInline(ReadOnlyMixin, admin.TabularInline):
    """The generation trace on the summary's own admin page (generation extends the
    annotate admin here, so annotate keeps importing nothing from generation)."""

    model = GenerationJob
    fk_name = "summary"
    extra = 0
    can_delete = False
    fields = ["pipeline", "pipeline_version", "status", "tries", "finished_at", "checks", "calls"]
    readonly_fields = fields
    show_change_link = True
    verbose_name = "generation trace"
    verbose_name_plural = "generation trace (open a job for every LLM call, check and verdict)"

    @admin.display(description="Reference checks and flags")
    def checks(self, obj):
        checks = (obj.result.get("reference_checks") or {}).get("checks") or {}
        flags = ", ".join(obj.result.get("flags", [])) or "none"
        return format_html("{}<br>flags: {}", json.dumps(checks, sort_keys=True), flags)

    @admin.display(description="LLM calls")
    def calls(self, obj):
        return obj.llm_calls.count()


admin.site.unregister(Summary)


@admin.register(Summary)
class SummaryWithTraceAdmin(SummaryAdmin):
    inlines = [*SummaryAdmin.inlines, GenerationJobInline]
