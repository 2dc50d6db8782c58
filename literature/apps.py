from django.apps import AppConfig


class LiteratureConfig(AppConfig):
    """Reaching the literature: NCBI E-utilities (PubMed, PMC), the local BM25 engine
    over a study's own sources, clinical questions and their reference articles."""

    name = "literature"

    def ready(self):
        # The study report scores answers against their question's gold answer.
        from analysis.selectors import register_reference_texts
        from literature.selectors import gold_answers

        register_reference_texts(gold_answers)
