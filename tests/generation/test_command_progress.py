"""Long LLM runs say how far they got: the services report each step, `Progress` writes it."""

import io
import json

import pytest

from core.commands import Progress, counted
from generation.detectors import benchmark, read_halueval
from generation.evaluators import run_evaluation
from generation.judging import run_judge
from generation.llm import Gateway
from tests.generation.test_junk_answers import CATALOGUE, add_everything

pytestmark = pytest.mark.django_db


def test_progress_writes_how_far_a_run_got_with_its_noun_in_the_right_number():
    out = io.StringIO()
    progress = Progress(out, "summary", "scored", interval=0)
    progress(1, 3)
    progress(2, 3)
    progress(3, 3)  # the end is the command's own summary line
    assert out.getvalue() == "1 of 3 summaries scored …2 of 3 summaries scored …"
    assert [counted(n, "pair") for n in (0, 1, 2)] == ["0 pairs", "1 pair", "2 pairs"]


def test_evaluations_judgements_and_benchmarks_report_each_step(serve, study):
    add_everything(study)
    serve(CATALOGUE["fenced"])
    seen = []
    run_evaluation(study=study, evaluator_name="factpico_fulltext", progress=lambda *a: seen.append(("eval", *a)))
    run_judge(study=study, progress=lambda *a: seen.append(("judge", *a)))
    lines = [
        json.dumps(
            {"document": f"Doc {i}. A park opens in May.", "right_summary": "May.", "hallucinated_summary": "June."}
        )
        for i in range(3)
    ]
    benchmark(
        records=read_halueval(lines),
        detector_name="judge",
        calibration=1,
        seed=0,
        gateway=Gateway(),
        progress=lambda *a: seen.append(("pairs", *a)),
    )
    assert seen == [("eval", 1, 1), ("judge", 1, 1), *[("pairs", n, 6) for n in range(1, 7)]]
