from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"

    def ready(self):
        # The study report reads the stored evaluators' scores as metric columns.
        from analysis.selectors import register_metric_provider
        from generation.selectors import evaluator_metrics

        register_metric_provider(evaluator_metrics)
