import factory
from django.contrib.auth import get_user_model

from annotate.models import Assignment, Source, Study, Summary
from annotate.services.rubrics import load_builtin_rubric

PASSWORD = "correct-horse-battery"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)


class StudyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Study

    slug = factory.Sequence(lambda n: f"study-{n}")
    title = factory.Sequence(lambda n: f"Study {n}")
    guidelines = "Judge only against the context."
    licence = "CC-BY-4.0"
    rubric = factory.LazyFunction(lambda: load_builtin_rubric(key="litsumm"))


class SourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Source
        skip_postgeneration_save = True

    study = factory.SubFactory(StudyFactory)
    key = factory.Sequence(lambda n: f"PMC{1000 + n}")
    title = "A randomised trial"
    text = "Drug A lowered blood pressure. It was well tolerated."
    licence = "CC BY 4.0"

    class Params:
        ref = None  # every sentence's ref; the source's key when not given

    # The text's sentences (it is split at ". ").
    sentence_spans = factory.LazyAttribute(lambda o: _spans_of(o.text, o.key if o.ref is None else o.ref))


def _spans_of(text: str, ref: str) -> list[list]:
    spans, start = [], 0
    for sentence in text.split(". "):
        sentence = sentence if sentence.endswith(".") else sentence + "."
        start = text.index(sentence, start)
        spans.append([start, start + len(sentence), ref])
        start += len(sentence)
    return spans


class SummaryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Summary

    source = factory.SubFactory(SourceFactory)
    study = factory.SelfAttribute("source.study")
    key = factory.Sequence(lambda n: f"summary-{n}")
    text = factory.LazyAttribute(lambda o: f"Drug A lowered blood pressure [{o.source.key}].")
    generator = "secret-model-x"
    metadata = {"pipeline": "secret-pipeline"}
    flags = ["secret-flag"]


class AssignmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Assignment

    summary = factory.SubFactory(SummaryFactory)
    study = factory.SelfAttribute("summary.study")
    rater = factory.SubFactory(UserFactory)
    position = factory.Sequence(lambda n: n)


def revision_history(assignment) -> list:
    """Every revision of an assignment, oldest first, with its answers loaded (tests only)."""
    from annotate.selectors.queue import revisions_with_answers

    return list(revisions_with_answers().filter(assignment=assignment).order_by("number"))


def let_time_pass(assignment, seconds: float) -> None:
    """As if `seconds` had passed since the assignment was last written or first opened:
    the services credit no more active time than that (tests only)."""
    from datetime import timedelta

    from django.utils import timezone

    earlier = timezone.now() - timedelta(seconds=seconds)
    Assignment.objects.filter(pk=assignment.pk).update(updated_at=earlier)
    Assignment.objects.filter(pk=assignment.pk, first_opened_at__gt=earlier).update(first_opened_at=earlier)


def sentence_count(**source_filters) -> int:
    """How many sentences the sources matching `source_filters` hold in all."""
    return sum(len(spans) for spans in Source.objects.filter(**source_filters).values_list("sentence_spans", flat=True))
