"""Writes of the rating app, one module per topic (docs/architecture.md): callers import
from the topic module, e.g. `from annotate.services.ratings import submit_rating`."""
