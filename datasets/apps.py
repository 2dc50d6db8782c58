from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Moving whole studies in and out: imports, the demo, CC-BY dataset exports."""

    name = "datasets"
