from decimal import Decimal

from django import forms

from recruit.prolific import REJECTION_CATEGORIES
from recruit.services.onboarding import QUESTION_KINDS


class OnboardingForm(forms.Form):
    consent_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Shown before anything else; raters accept or decline. Editing it makes a new version that "
        "every rater is asked to accept again. Leave empty to ask for no consent.",
    )
    instructions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Raters open and acknowledge them before their first item.",
    )


class QuestionForm(forms.Form):
    prompt = forms.CharField(max_length=500)
    kind = forms.ChoiceField(
        choices=[
            (
                k,
                {
                    "choice": "One of several options",
                    "checkboxes": "Any of several options",
                    "scale": "A scale (options in increasing order)",
                    "text": "Free text",
                }[k],
            )
            for k in QUESTION_KINDS
        ]
    )
    options = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), help_text="One option per line (not for free text)."
    )
    required = forms.BooleanField(required=False)


class LinkForm(forms.Form):
    name = forms.CharField(max_length=150)
    raters_per_item = forms.IntegerField(min_value=1, max_value=50, initial=3, label="Raters per item (k)")
    items_per_participant = forms.IntegerField(min_value=1, max_value=500, initial=5)
    max_participants = forms.IntegerField(min_value=1, max_value=100_000, initial=30)
    time_budget_minutes = forms.IntegerField(min_value=1, max_value=24 * 60, initial=60, label="Time budget (minutes)")
    lease_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        initial=30,
        help_text="An absent participant's unfinished items go back to the pool after this long.",
    )
    completion_url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        initial="https://app.prolific.com/submissions/complete",
        label="Completion URL",
        # Django renders help_text as HTML: no angle brackets here.
        help_text="Participants are sent here with ?cc= and their code when they finish.",
    )
    attention_every = forms.IntegerField(
        min_value=1,
        max_value=500,
        required=False,
        label="Attention check every",
        help_text="Mix one of the study's attention checks in after about every N items (blank: none).",
    )
    completion_code = forms.CharField(max_length=64)
    screenout_code = forms.CharField(
        max_length=64,
        required=False,
        label="Screen-out code",
        help_text="For declined consent, a failed qualification, or a full or closed link (blank: none).",
    )
    left_code = forms.CharField(
        max_length=64, required=False, label="Code for leaving", help_text="Blank: the screen-out code."
    )
    full_message = forms.CharField(
        max_length=500,
        required=False,
        label="“Full” message",
        help_text="Shown to someone turned away when there is no screen-out code.",
    )

    def error_message(self) -> str:
        return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in self.errors.items())


class LinkEditForm(LinkForm):
    """A running link's limits, codes, completion URL and messages (recruit.services.links.update_link)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("name", "raters_per_item", "attention_every"):
            del self.fields[name]


class ParticipantActionForm(forms.Form):
    """Every form of the participants page: `action` says which; the other fields are each
    action's (recruit.views.participants_admin)."""

    ACTIONS = ("search", "sync", "retry", "exclude", "approve", "reject", "bonus", "pay")
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
    participant = forms.UUIDField(required=False)
    participants = forms.TypedMultipleChoiceField(required=False, choices=(), coerce=str)
    bonus = forms.UUIDField(required=False)
    panel_id = forms.CharField(required=False, max_length=64, label="Panel id")
    reason = forms.CharField(required=False, max_length=200)
    amount = forms.DecimalField(required=False, min_value=Decimal("0.01"), max_value=100, decimal_places=2)
    category = forms.ChoiceField(required=False, choices=[("", "Choose…"), *REJECTION_CATEGORIES])
    message = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, participant_uuids=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["participants"].choices = [(u, u) for u in participant_uuids]

    def error_message(self) -> str:
        return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in self.errors.items())
