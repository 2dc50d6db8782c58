from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"

    def ready(self):
        # The study report reads the stored evaluators' scores as metric columns.
        from analysis.selectors import (
            register_judge_provider,
            register_metric_provider,
            register_stored_reference_metrics,
        )
        from generation.selectors import evaluator_metrics, judge_metrics, judge_scores, stored_reference_metrics

        register_metric_provider(evaluator_metrics)
        register_metric_provider(judge_metrics)
        register_stored_reference_metrics(stored_reference_metrics)
        register_judge_provider(judge_scores)
