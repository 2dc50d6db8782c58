"""Abstract models every app's tables share (core is not an installed app: it has no
tables of its own)."""

from django.db import models


class TimeStamped(models.Model):
    """When a row was made and last changed (every row that changes has both)."""

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def change_states(querysets: dict[str, models.QuerySet]) -> dict[str, tuple[int, str]]:
    """For each named queryset of TimeStamped rows, (number of rows, newest `updated_at` as
    ISO text or "-"), all in one query (UNION ALL of one aggregate per queryset). A cache
    that depends on those rows changes with them: a row added or deleted changes a count,
    a row edited a newest time."""
    parts = [
        queryset.order_by()
        .annotate(state_of=models.Value(name, output_field=models.CharField()))
        .values("state_of")
        .annotate(n=models.Count("pk"), newest=models.Max("updated_at"))
        .values_list("state_of", "n", "newest")
        for name, queryset in querysets.items()
    ]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    found = {kind: (n, newest.isoformat() if newest else "-") for kind, n, newest in rows}
    return {name: found.get(name, (0, "-")) for name in querysets}


class JSONArrayLength(models.Func):
    """The number of elements of a JSON array column (0 for an empty one): SQLite's
    json_array_length, PostgreSQL's jsonb_array_length (a JSONField is jsonb there)."""

    function = "json_array_length"
    output_field = models.IntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="jsonb_array_length", **extra_context)
