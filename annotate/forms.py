"""Turning the rating form's POST data into the answers a rubric validates.

Field names: `<key>` for a question's value, `<key>__rationale` for its rationale,
`<key>__<finding id>` (+ `__rationale`) for per-finding questions, `<key>__<claim id>`
(+ `__rationale`) for per-claim questions, and
`<key>__json` for a span question's highlights (a JSON list, kept up to date by
static/js/rate.js), `<key>__strength` for a preference's strength.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator, ProhibitNullCharactersValidator
from django.forms.fields import InvalidJSONInput
from django.http import QueryDict
from django.utils.translation import gettext, gettext_lazy

from annotate.models import Batch, ExpectedAnswer
from annotate.rubrics import AnswerValidationError, RubricDefinition
from annotate.services.batches import MAX_ATTENTION_EVERY, SEED_RANGE
from core.text_validation import (
    MAX_ADMIN_TEXT_CHARS,
    MAX_SOURCE_CHARS,
    MAX_SUMMARY_CHARS,
    InvalidTextError,
    find_problem,
    loads,
    problem_message,
)

# Counts compared with integer columns (context sentences): as the API's MAX_VERSION.
MAX_COUNT = 2**31 - 1


def rationale_field(question_key: str) -> str:
    return f"{question_key}__rationale"


def finding_field(question_key: str, finding_id: str) -> str:
    return f"{question_key}__{finding_id}"


def spans_field(question_key: str) -> str:
    return f"{question_key}__json"


def strength_field(question_key: str) -> str:
    return f"{question_key}__strength"


def answers_from_post(
    definition: RubricDefinition, data: QueryDict, finding_ids: tuple[str, ...] = (), claim_ids: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    answers: dict[str, Any] = {}
    rationales: dict[str, Any] = {}
    for q in definition.questions:
        if q.per_finding or q.per_claim:
            ids = finding_ids if q.per_finding else claim_ids
            answers[q.key] = {f: data.get(finding_field(q.key, f)) for f in ids if data.get(finding_field(q.key, f))}
            rationales[q.key] = {
                f: data.get(rationale_field(finding_field(q.key, f)))
                for f in ids
                if data.get(rationale_field(finding_field(q.key, f)))
            }
            continue
        if q.highlights:
            raw = data.get(spans_field(q.key)) or "[]"
            try:
                answers[q.key] = loads(raw, field=q.key)
            except json.JSONDecodeError:
                raise AnswerValidationError(
                    {q.key: gettext("the highlights could not be read; reload the page")}
                ) from None
            except InvalidTextError as exc:
                raise AnswerValidationError({q.key: exc.problem}) from None
            continue
        if q.preference:
            preferred, strength = data.get(q.key), data.get(strength_field(q.key))
            answers[q.key] = {"preferred": preferred, "strength": strength} if preferred else None
        elif q.several_options:
            answers[q.key] = data.getlist(q.key)
        else:
            answers[q.key] = data.get(q.key)
        if q.rationale != "none" or q.na:
            rationales[q.key] = data.get(rationale_field(q.key), "")
    # A form posts text; the rubric takes numbers for scale answers.
    return definition.numbers_from_text(answers), rationales


class CheckedJSONField(forms.JSONField):
    """Django's JSON form field, refusing text that cannot be stored
    (core/text_validation.py): its JSON may spell a lone surrogate as `\\ud83d` or a
    NUL as `\\u0000`. A refused value is shown again as typed (escaped), since the page
    could not be encoded with the decoded surrogate in it."""

    def to_python(self, value):
        converted = super().to_python(value)
        message = problem_message(converted)
        if message is not None:
            raise forms.ValidationError(message)
        return converted

    def bound_data(self, data, initial):
        value = super().bound_data(data, initial)
        return InvalidJSONInput(data) if find_problem(value) is not None else value


# Longest text of the admin's edit forms, by (model, field); any other text field without a
# length of its own (a study's description and guidelines, a source's attribution, a
# claim's explanation) takes MAX_ADMIN_TEXT_CHARS (docs/security.md, "Limits").
ADMIN_TEXT_LIMITS = {("source", "text"): MAX_SOURCE_CHARS, ("summary", "text"): MAX_SUMMARY_CHARS}


class CheckedTextAdminForm(forms.ModelForm):
    """The admin's edit forms. Their text fields refuse NUL already (Django's validator)
    and a form post cannot carry a lone surrogate; their JSON fields can carry both. A
    text field with no length of its own gets its stated limit (Django then names the
    field and the limit when it is exceeded)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        model = self._meta.model._meta.model_name
        for name, field in self.fields.items():
            # The admin builds the fields from the model; this one adds only the checks.
            if type(field) is forms.JSONField:
                field.__class__ = CheckedJSONField
            elif isinstance(field, forms.CharField) and field.max_length is None:
                limit = ADMIN_TEXT_LIMITS.get((model, name), MAX_ADMIN_TEXT_CHARS)
                field.max_length = limit
                field.validators.append(MaxLengthValidator(limit))
                field.widget.attrs["maxlength"] = str(limit)


class ActionForm(forms.Form):
    """A page's POST with several buttons (`action`): the pressed one, and the typed values
    the services take. Its errors read as one sentence for the page's error line."""

    def error_message(self) -> str:
        """Every field error in one sentence, for the page's error line."""
        return " ".join(f"{field}: {' '.join(errors)}" for field, errors in self.errors.items())


class PlainTextField(forms.CharField):
    """Free text passed on as typed (not stripped, optional) to the service that takes it,
    which checks it (core.text_validation, naming the field): Django's own NUL check would
    refuse it in other words than the rest of the platform."""

    def __init__(self, **kwargs):
        super().__init__(strip=False, required=False, **kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class RateActionForm(ActionForm):
    """The rating page's POST apart from the answers (answers_from_post reads those):
    which button was pressed, the version the page was built from, the active time
    since the last write and a skip's reason, as typed values for the services."""

    ACTIONS = (("save", "Save draft"), ("submit", "Submit"), ("skip", "Skip"), ("reopen", "Change my answer"))

    action = forms.ChoiceField(choices=ACTIONS, required=False)
    # The rater reads these on the rating page, in its language (docs/languages.md).
    version = forms.IntegerField(
        min_value=0, error_messages={"required": gettext_lazy("is required: reload the page and try again.")}
    )
    active_seconds = forms.IntegerField(
        min_value=0, required=False, error_messages={"invalid": gettext_lazy("must be a whole number of seconds.")}
    )
    skip_reason = forms.CharField(required=False)

    def clean_action(self) -> str:
        return self.cleaned_data.get("action") or "save"

    def clean_active_seconds(self) -> int:
        return self.cleaned_data.get("active_seconds") or 0


class BatchItemActionForm(ActionForm):
    """The adjudication page's POST (templates/annotate/studies/item.html): which of its
    forms was sent, and that form's fields. A consensus's value is read apart (one value or,
    for a question with several options, a list). Expected answers have their own page, the
    gold form (GoldAnswerForm), with the rubric's widgets."""

    ACTIONS = (("consensus", "Record consensus"), ("note", "Add note"))

    action = forms.ChoiceField(choices=ACTIONS, required=False)
    question = PlainTextField()
    rationale = PlainTextField()
    text = PlainTextField()
    shared = forms.BooleanField(required=False)

    def clean_action(self) -> str:
        return self.cleaned_data.get("action") or "consensus"


class UsersField(forms.ModelMultipleChoiceField):
    """Users by primary key. A number no integer column can hold is an invalid choice
    rather than a query: SQLite cannot even bind it (an OverflowError, a 500)."""

    def _check_values(self, value):
        for pk in value if isinstance(value, list | tuple) else ():
            try:
                number = int(pk)
            except (TypeError, ValueError):
                continue  # Django reports it as not a valid value
            if not SEED_RANGE[0] <= number <= SEED_RANGE[1]:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super()._check_values(value)


class BatchForm(forms.Form):
    """The batch builder's options; the same as `manage.py create_batch`."""

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=Batch.Kind.choices, initial=Batch.Kind.MAIN)
    raters = UsersField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="A qualification batch needs none: participants from a recruitment link get its gold items.",
    )
    design = forms.ChoiceField(
        choices=[
            ("k_raters", "Every item rated by k raters"),
            ("partial_overlap", "Partial overlap: a share of items doubly rated, the rest once"),
            ("pairwise_overlap", "Pairwise overlap: every pair of raters shares m items"),
            ("balanced", "Balanced: each rater sees each generator equally often, a source's summaries together"),
            (
                "comparisons",
                "Comparisons: two generators' summaries of a source side by side, k raters each, "
                "left and right counterbalanced",
            ),
            (
                "adaptive_pairs",
                "Adaptive side by side: comparisons handed out as raters continue, each pair chosen from the "
                "judgements so far, until the systems are told apart or the budget (the sample size) is spent",
            ),
        ]
    )
    # The bounds are those of the API (annotate/api/study_batches.py) and of the columns.
    k = forms.IntegerField(min_value=1, max_value=1000, initial=2, label="k (raters per item)")
    share = forms.FloatField(min_value=0, max_value=1, initial=0.2, label="Share doubly rated")
    m = forms.IntegerField(min_value=1, max_value=100_000, initial=1, label="m (items per rater pair)")
    per_source = forms.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        label="Comparisons per source",
        help_text="Pairs of generators compared per source, balanced across sources (blank: every pair).",
    )
    n = forms.IntegerField(min_value=1, max_value=10_000_000, required=False, label="Sample size (blank: all matching)")
    stratify_by = forms.CharField(
        required=False, label="Stratify by", help_text="Comma-separated: generator, context_length, source.FIELD"
    )
    seed = forms.IntegerField(initial=0, min_value=SEED_RANGE[0], max_value=SEED_RANGE[1])
    generator = forms.CharField(required=False, help_text="Only this generator (blank: any)")
    flags = forms.CharField(
        required=False,
        label="With pipeline flags",
        help_text="Comma-separated: only summaries that carry every one of these flags.",
    )
    no_flags = forms.CharField(
        required=False,
        label="Without pipeline flags",
        help_text="Comma-separated: only summaries that carry none of these flags.",
    )
    source_field = forms.CharField(required=False, label="Source metadata", help_text="FIELD=VALUE")
    min_context = forms.IntegerField(min_value=0, max_value=MAX_COUNT, required=False, label="Min. context sentences")
    max_context = forms.IntegerField(min_value=0, max_value=MAX_COUNT, required=False, label="Max. context sentences")
    rated = forms.ChoiceField(choices=[("", "Any"), ("no", "Not yet rated"), ("yes", "Already rated")], required=False)
    assigned = forms.ChoiceField(
        choices=[("", "Any"), ("no", "Not yet given to any rater"), ("yes", "Already given to a rater")],
        required=False,
        help_text="Either way, a rater never gets a summary they already have.",
    )
    blinded = forms.BooleanField(
        required=False, initial=True, help_text="Raters never see the generator, model or pipeline flags."
    )
    training = forms.BooleanField(
        required=False,
        label="Training round",
        help_text="After submitting, raters see the expected answers and the explanation.",
    )
    attention_every = forms.IntegerField(
        min_value=1,
        max_value=MAX_ATTENTION_EVERY,
        required=False,
        label="Attention check every",
        help_text="Mix one of the study's attention checks in after about every N items.",
    )
    gold = forms.CharField(
        required=False,
        label="Gold items",
        help_text="Comma-separated summary keys with gold answers; every rater gets them.",
    )

    # The page's sections, in order (templates/annotate/studies/batch_form.html).
    SECTIONS = (
        ("Batch", ("name", "kind")),
        ("Raters", ("raters",)),
        (
            "Which summaries",
            ("generator", "flags", "no_flags", "source_field", "min_context", "max_context", "rated", "assigned"),
        ),
        ("Sample", ("n", "stratify_by", "seed")),
        ("Design", ("design", "k", "share", "m", "per_source", "blinded")),
        ("Quality control", ("training", "attention_every", "gold")),
    )

    def gold_keys(self) -> list[str]:
        return [k.strip() for k in self.cleaned_data.get("gold", "").split(",") if k.strip()]

    def __init__(self, *args, users, flags_known=(), metadata_example="", **kwargs):
        """`flags_known`: the pipeline flags the study's summaries carry, and
        `metadata_example`: a FIELD=VALUE of its sources, both for the hints."""
        super().__init__(*args, **kwargs)
        self.fields["raters"].queryset = users
        known = ", ".join(flags_known) if flags_known else "none yet"
        for name in ("flags", "no_flags"):
            self.fields[name].help_text += f" Flags in this study: {known}."
        if metadata_example:
            self.fields["source_field"].help_text = f"FIELD=VALUE, e.g. {metadata_example}"
        for name, field in self.fields.items():
            if field.help_text:  # the page shows each hint under its field, with this id
                field.widget.attrs["aria-describedby"] = f"id_{name}_help"

    def sections(self) -> list[tuple[str, list]]:
        """(legend, bound fields) per section of the page."""
        return [(legend, [self[name] for name in names]) for legend, names in self.SECTIONS]

    @staticmethod
    def _flag_list(value: str) -> list[str]:
        return [f.strip() for f in value.split(",") if f.strip()]

    def clean_source_field(self):
        value = self.cleaned_data["source_field"].strip()
        if value and "=" not in value:
            raise forms.ValidationError("Write FIELD=VALUE.")
        return value

    def filters(self) -> dict:
        d = self.cleaned_data
        filters = {
            "generator": [d["generator"]] if d["generator"] else None,
            "flags_any": self._flag_list(d["flags"]) or None,
            "flags_none": self._flag_list(d["no_flags"]) or None,
            "source_metadata": dict([d["source_field"].split("=", 1)]) if d["source_field"] else None,
            "min_context": d["min_context"],
            "max_context": d["max_context"],
            "rated": None if not d["rated"] else d["rated"] == "yes",
            "assigned": None if not d["assigned"] else d["assigned"] == "yes",
        }
        return {k: v for k, v in filters.items() if v is not None}


# --- study setup: new study, rubric upload, members (annotate/study_views.py) ---------------


class StudyCreateForm(forms.Form):
    title = forms.CharField(max_length=300)
    slug = forms.SlugField(
        max_length=100, help_text="The study's short name in addresses and import files: letters, digits, - and _."
    )
    rubric = forms.ChoiceField(help_text="The newest version is pinned to the study.")
    licence = forms.CharField(
        max_length=100, required=False, help_text="Licence of the ratings when exported, e.g. CC-BY-4.0."
    )
    guidelines = forms.CharField(widget=forms.Textarea, required=False, help_text="Shown to raters above the rubric.")
    description = forms.CharField(
        widget=forms.Textarea, required=False, help_text="A note for the study team (never shown to raters)."
    )

    def __init__(self, *args, rubric_keys=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["rubric"].choices = [(key, label) for key, label in rubric_keys]


class StudySettingsForm(forms.Form):
    """The study settings page (annotate.study_settings checks the values again, naming the field)."""

    title = forms.CharField(max_length=300)
    guidelines = PlainTextField(widget=forms.Textarea, help_text="Shown to raters above the rubric.")
    licence = forms.CharField(
        max_length=100, required=False, help_text="Licence of the ratings when exported, e.g. CC-BY-4.0."
    )
    description = PlainTextField(widget=forms.Textarea, help_text="A note for the study team (never shown to raters).")
    min_seconds_per_item = forms.IntegerField(
        label="Too fast under (seconds per item)",
        min_value=0,
        max_value=3600,
        help_text="The quality monitor flags an item submitted in less active time as too fast "
        "(besides the rule relative to the batch's median; 0 seconds is always too fast).",
    )
    # The choices are settings.LANGUAGES, read when the form is made (not at import time).
    language = forms.ChoiceField(
        label="Language of the raters' pages",
        required=False,
        help_text="The rater pages of this study in this language, unless a rater picks another with the "
        "page's language switcher. Empty: each rater's browser language (docs/languages.md).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["language"].choices = [("", "Each rater's own"), *settings.LANGUAGES]


class RubricUploadForm(forms.Form):
    file = forms.FileField(
        label="Rubric YAML file", help_text="docs/rubric-format.md. A changed definition of a key is a new version."
    )


class MemberForm(forms.Form):
    """Every form of the members page: `action` says which, the other fields are each action's."""

    ACTIONS = ("invite", "add", "roles", "remove", "link")
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
    email = forms.CharField(max_length=254, required=False)
    username = forms.CharField(max_length=150, required=False)
    account = forms.CharField(max_length=254, required=False)
    role = forms.ChoiceField(
        choices=[("rater", "Rater"), ("viewer", "Viewer"), ("admin", "Study admin")], required=False
    )
    roles = forms.MultipleChoiceField(
        choices=[("rater", "Rater"), ("viewer", "Viewer"), ("admin", "Study admin")], required=False
    )
    user = forms.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)

    def error_message(self) -> str:
        return "; ".join(f"{name}: {' '.join(errors)}" for name, errors in self.errors.items())


class QualificationRuleForm(forms.Form):
    """The qualification page's pass rule (annotate/services/qualification.py): the share of
    (item, question) pairs that must match gold, the questions scored, a tolerance per
    scale question and the attempts allowed."""

    threshold = forms.DecimalField(
        label="Pass mark (% of answers matching gold)",
        min_value=0,
        max_value=100,
        decimal_places=1,
        initial=80,
    )
    questions = forms.MultipleChoiceField(
        label="Questions scored", widget=forms.CheckboxSelectMultiple, choices=(), required=True
    )
    attempts_allowed = forms.IntegerField(label="Attempts allowed", min_value=1, max_value=20, initial=1)

    def __init__(self, *args, definition: RubricDefinition, **kwargs):
        super().__init__(*args, **kwargs)
        from annotate.services.qualification import scorable

        self.fields["questions"].choices = [(q.key, q.prompt) for q in definition.questions if scorable(q)]
        self.scale_keys = []
        for q in definition.questions:
            if q.is_scale and scorable(q):
                low, high = q.scale_bounds
                self.fields[f"tolerance_{q.key}"] = forms.IntegerField(
                    label=f"Tolerance on “{q.prompt}” ({low}–{high}): answers this far from gold still match",
                    min_value=0,
                    max_value=high - low,
                    initial=0,
                    required=False,
                )
                self.scale_keys.append(q.key)

    def tolerances(self) -> dict[str, int]:
        return {key: self.cleaned_data.get(f"tolerance_{key}") or 0 for key in self.scale_keys}

    def tolerance_fields(self):
        return [self[f"tolerance_{key}"] for key in self.scale_keys]


class GoldAnswerForm(ActionForm):
    """The gold form's fields apart from the answers (answers_from_post reads those, with
    the rubric's own widgets): the purpose and the explanation shown to raters."""

    purpose = forms.ChoiceField(choices=ExpectedAnswer.Purpose.choices, initial=ExpectedAnswer.Purpose.GOLD)
    explanation = PlainTextField()
