"""The apps form a clean stack (docs/architecture.md): no module imports itself back
through others, and each app imports only the apps below it.

Every import statement counts, at module level or inside a function: a function-level
import still ties the two modules together, it only hides the loop from Python."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = (
    "config",
    "core",
    "stats",
    "annotate",
    "recruit",
    "planning",
    "generation",
    "literature",
    "datasets",
    "analysis",
    "sso",
)

# What each app may import of ours (docs/architecture.md). stats, the pure statistics, is
# at the bottom with core, what every app shares; annotate is the rating domain above them;
# generation writes through it, literature reaches outside services and brings questions
# and articles in, datasets moves whole studies in and out; analysis, the study report,
# reads them all from the top; config wires everything together.
ALLOWED = {
    "stats": set(),
    "core": set(),
    "annotate": {"core", "stats"},
    # recruit: outside participants arriving and leaving; it hands out annotate's items.
    "recruit": {"core", "stats", "annotate"},
    # planning: sizing a study and freezing its analysis plan, before anyone rates.
    "planning": {"core", "stats", "annotate"},
    # literature: the study's own sources; its importers use datasets' line-numbered checks.
    "literature": {"core", "stats", "annotate", "datasets"},
    "generation": {"core", "stats", "annotate", "literature"},
    "datasets": {"core", "stats", "annotate", "recruit", "planning"},
    "analysis": {"core", "stats", "annotate", "generation", "literature", "datasets", "recruit", "planning"},
    # sso: sign-in by an institution's provider; it gives accounts through annotate's members.
    "sso": {"core", "annotate"},
    "config": {"core", "annotate", "generation", "literature", "datasets", "analysis", "recruit", "planning", "sso"},
}
# Only these modules may import analysis: the report is at the top, config mounts its pages
# and API, and `make run`'s master queues the demo's reports (config/demo_reports.py).
IMPORTERS_OF_ANALYSIS = {"config.urls", "config.demo_reports"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for app in APPS for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules a file imports, by any import statement anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b` imports a.b when b is a module, else a name of a.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, name, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_planted_loop():
    graph = {"a.x": {"a.y"}, "a.y": {"b.z"}, "b.z": {"a.x"}, "c": {"a.x"}}
    assert cycles(graph) == [["a.x", "a.y", "b.z"]]


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # datasets.tasks imports the export runs inside its task function.
    assert "datasets.export_runs" in graph["datasets.tasks"]


def test_the_import_graph_has_no_loops():
    assert cycles(import_graph()) == []


def forbidden(graph: dict[str, set[str]], app: str) -> list[tuple[str, str]]:
    """The imports of `app`'s modules that reach an app not in ALLOWED[app]."""
    reached = {
        (module, target)
        for module, targets in graph.items()
        if module.split(".")[0] == app
        for target in targets
        if target.split(".")[0] != app
    }
    return sorted((m, t) for m, t in reached if t.split(".")[0] not in ALLOWED[app])


def test_the_checker_catches_an_upward_import():
    graph = {"stats.metrics": {"annotate.models"}, "annotate.views": {"core.exceptions", "analysis.selectors"}}
    assert forbidden(graph, "stats") == [("stats.metrics", "annotate.models")]
    assert forbidden(graph, "annotate") == [("annotate.views", "analysis.selectors")]


@pytest.mark.parametrize("app", APPS)
def test_each_app_imports_only_the_apps_below_it(app):
    assert forbidden(import_graph(), app) == []


def test_no_app_imports_the_report():
    graph = import_graph()
    importers = {
        module
        for module, targets in graph.items()
        if module.split(".")[0] != "analysis" and any(t.split(".")[0] == "analysis" for t in targets)
    }
    assert importers <= IMPORTERS_OF_ANALYSIS


def test_stats_imports_neither_django_nor_the_orm():
    """stats/ is pure: no Django (not even settings), no app of ours, by any import statement."""
    found = []
    for path in sorted((ROOT / "stats").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            outside = {"django", "rest_framework", *APPS} - {"stats"}
            found += [(path.name, n) for n in names if n.split(".")[0] in outside]
    assert found == []


def private_names_imported(source: str, provider: str) -> list[str]:
    """The names a module's source imports from `provider`'s modules that are private to
    them: a name, or a module on the way to it, that starts with an underscore."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == provider:
            parts = node.module.split(".")
            found += [f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
            found += [node.module] if any(p.startswith("_") for p in parts) else []
        elif isinstance(node, ast.Import):
            found += [
                alias.name
                for alias in node.names
                if alias.name.split(".")[0] == provider and any(p.startswith("_") for p in alias.name.split("."))
            ]
    return found


def test_the_private_name_finder_finds_one():
    source = "from datasets.importing import ImportResult, _RecordWriter\nimport datasets._cache\n"
    assert private_names_imported(source, "datasets") == ["datasets.importing._RecordWriter", "datasets._cache"]
    assert private_names_imported("from annotate.x import _y\n", "datasets") == []


def test_literature_imports_only_public_names_of_datasets():
    """literature builds on datasets' import pipeline through its public names only, so
    datasets may change what is private to it without breaking literature's importers."""
    found = {
        path.name: names
        for path in sorted((ROOT / "literature").rglob("*.py"))
        if (names := private_names_imported(path.read_text(), "datasets"))
    }
    assert found == {}
