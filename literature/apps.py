from django.apps import AppConfig


class LiteratureConfig(AppConfig):
    """Reaching the literature: NCBI E-utilities (PubMed, PMC), the local BM25 engine
    over a study's own sources, clinical questions and their reference articles."""

    name = "literature"
