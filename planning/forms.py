from __future__ import annotations

from django import forms

from planning.protocol import CORRECTIONS, KINDS, STOPPING_RULES, TESTS

MAX_SIMULATIONS = {"pointwise": 2000, "side_by_side": 300}
MAX_GRID_POINTS = 12
MAX_ITEMS = 5000


class PowerForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, k.replace("_", " ")) for k in KINDS], initial="pointwise")
    effect = forms.FloatField(
        initial=0.5, help_text="Pointwise: A's mean minus the others' on the scale. Side by side: log-odds."
    )
    item_sd = forms.FloatField(initial=0.5, min_value=0, label="Source SD")
    rater_sd = forms.FloatField(initial=0.3, min_value=0, label="Rater SD")
    residual_sd = forms.FloatField(initial=0.8, min_value=0, label="Residual SD")
    raters_per_item = forms.IntegerField(initial=2, min_value=1, max_value=20)
    n_systems = forms.IntegerField(initial=2, min_value=2, max_value=20)
    tie_rate = forms.FloatField(initial=0.0, min_value=0, max_value=0.95, help_text="Side by side only.")
    grid = forms.CharField(initial="10, 20, 40, 80", help_text="Numbers of items, comma-separated.")
    target = forms.FloatField(initial=0.8, min_value=0.05, max_value=0.99)
    alpha = forms.FloatField(initial=0.05, min_value=0.0001, max_value=0.5)
    simulations = forms.IntegerField(initial=300, min_value=20)
    seed = forms.IntegerField(initial=0, min_value=0)

    def clean_grid(self) -> list[int]:
        try:
            sizes = sorted(
                {int(part) for part in self.cleaned_data["grid"].replace(";", ",").split(",") if part.strip()}
            )
        except ValueError:
            raise forms.ValidationError("Whole numbers of items, separated by commas.") from None
        if not sizes or sizes[0] < 2 or sizes[-1] > MAX_ITEMS or len(sizes) > MAX_GRID_POINTS:
            raise forms.ValidationError(
                f"Between 1 and {MAX_GRID_POINTS} numbers of items, each from 2 to {MAX_ITEMS}."
            )
        return sizes

    def clean(self):
        data = super().clean()
        kind, simulations = data.get("kind"), data.get("simulations")
        if kind and simulations and simulations > MAX_SIMULATIONS[kind]:
            self.add_error("simulations", f"At most {MAX_SIMULATIONS[kind]} for a {kind.replace('_', ' ')} plan.")
        return data


class PilotForm(forms.Form):
    pilot = forms.SlugField(label="Pilot study")
    question = forms.CharField(max_length=100)


class FreezeForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, k.replace("_", " ")) for k in KINDS])
    primary_question = forms.ChoiceField(choices=[], required=False)
    test = forms.ChoiceField(choices=[(t, t.replace("_", " ")) for t in TESTS])
    correction = forms.ChoiceField(choices=[(c, c) for c in CORRECTIONS])
    alpha = forms.FloatField(initial=0.05, min_value=0.0001, max_value=0.5)
    planned_n = forms.IntegerField(min_value=2, max_value=1_000_000, label="Planned number of items")
    stopping_rule = forms.ChoiceField(choices=list(STOPPING_RULES.items()))
    exclusion_rules = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="One label per line; an exclusion whose reason starts with a label is planned.",
    )
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="For an amendment.")
    power = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, questions: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["primary_question"].choices = [("", "—")] + [(q, q) for q in questions]

    def plan(self) -> dict:
        data = self.cleaned_data
        plan = {key: data[key] for key in ("kind", "test", "correction", "alpha", "planned_n", "stopping_rule")}
        plan["primary_question"] = data["primary_question"] or None
        plan["exclusion_rules"] = [line.strip() for line in data["exclusion_rules"].splitlines() if line.strip()]
        return plan
