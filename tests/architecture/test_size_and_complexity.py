"""No module over 600 lines, no function over 80 lines or with a cyclomatic complexity over
20, except the exceptions listed by name, with their reason, in docs/architecture.md
("Size and complexity exceptions"). The table there is the one list: this test reads it,
and fails too when a listed exception no longer exceeds what it is listed for, so the list
stays true.

The complexity is McCabe's, as ruff's C901 rule counts it (ruff is a dev dependency)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.architecture.test_import_graph import APPS

ROOT = Path(__file__).resolve().parents[2]

DOC = ROOT / "docs" / "architecture.md"
SECTION = "## Size and complexity exceptions"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_COMPLEXITY = 20


@dataclass(frozen=True)
class Excess:
    """One thing over a limit: `what` is "lines" or "complexity"."""

    name: str
    what: str
    figure: int
    limit: int
    path: Path
    line: int

    def __str__(self) -> str:
        where = f"{self.path.relative_to(ROOT)}:{self.line}"
        return f"{where}: {self.name} has {self.figure} {self.what} (at most {self.limit})"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_modules(root: Path, apps: tuple[str, ...]) -> list[Path]:
    return sorted(p for app in apps for p in (root / app).rglob("*.py") if "migrations" not in p.parts)


def functions(tree: ast.Module, module: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every def with its dotted name: methods as `module.Class.method`, nested functions as
    `module.outer.inner`."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, name)
            else:
                visit(child, prefix)

    visit(tree, module)
    return found


def complexities(paths: list[Path]) -> dict[tuple[Path, int], int]:
    """McCabe complexity over the limit by (file, line of the def), from ruff's C901."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "C901", "--output-format", "json"]
        + ["--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}"]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    # ruff exits 1 when it finds something; anything else is ruff failing to run.
    assert result.returncode in (0, 1), result.stderr
    found = {}
    for diagnostic in json.loads(result.stdout):
        figure = re.search(r"\((\d+) > \d+\)", diagnostic["message"])
        assert figure, diagnostic["message"]
        found[(Path(diagnostic["filename"]).resolve(), diagnostic["location"]["row"])] = int(figure.group(1))
    return found


def measure(root: Path, apps: tuple[str, ...]) -> list[Excess]:
    """Everything in the apps' modules (not migrations) over a limit."""
    paths = app_modules(root, apps)
    complex_defs = complexities(paths)
    excesses = []
    for path in paths:
        text = path.read_text()
        module = module_name(path, root)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            excesses.append(Excess(module, "lines", lines, MAX_MODULE_LINES, path, 1))
        for name, node in functions(ast.parse(text, str(path)), module):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                excesses.append(Excess(name, "lines", length, MAX_FUNCTION_LINES, path, node.lineno))
            complexity = complex_defs.get((path.resolve(), node.lineno))
            if complexity is not None:
                excesses.append(Excess(name, "complexity", complexity, MAX_COMPLEXITY, path, node.lineno))
    return excesses


def listed_exceptions(doc: Path) -> dict[tuple[str, str], str]:
    """The table's rows, (dotted name, "lines" or "complexity") -> reason. A row's second
    cell names what it exceeds: "lines", "complexity" or both, comma-separated."""
    text = doc.read_text()
    assert SECTION in text, f"{doc.name} has no '{SECTION}' section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    listed = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if not row.startswith("|") or len(cells) < 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        for what in (w.strip() for w in cells[1].split(",")):
            assert what in ("lines", "complexity"), f"{name}: '{what}' is neither lines nor complexity"
            assert (name, what) not in listed, f"{name} ({what}) is listed twice"
            assert cells[2], f"{name} is listed without a reason"
            listed[(name, what)] = cells[2]
    return listed


def test_nothing_exceeds_a_limit_unless_listed() -> None:
    listed = listed_exceptions(DOC)
    unlisted = [str(e) for e in measure(ROOT, APPS) if (e.name, e.what) not in listed]
    assert not unlisted, "over a limit and not in docs/architecture.md's exceptions:\n" + "\n".join(unlisted)


def test_every_listed_exception_still_exceeds() -> None:
    exceeding = {(e.name, e.what) for e in measure(ROOT, APPS)}
    stale = [f"{name} ({what})" for name, what in listed_exceptions(DOC) if (name, what) not in exceeding]
    assert not stale, "listed in docs/architecture.md's exceptions but within the limits now:\n" + "\n".join(stale)


def test_the_check_finds_a_long_module_a_long_method_and_a_complex_nested_function(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    branches = "".join(f"        if x == {i}:\n            return {i}\n" for i in range(MAX_COMPLEXITY))
    (app / "tangled.py").write_text(
        f"def outer(x):\n    def inner(x):\n{branches}        return -1\n\n    return inner(x)\n"
    )

    def method(body_lines: int) -> str:
        body = "".join(f"        y = {i}\n" for i in range(body_lines))
        return f"class Thing:\n    def method(self):\n{body}        return y\n"

    (app / "long.py").write_text(method(MAX_FUNCTION_LINES - 1))
    (app / "short.py").write_text(method(MAX_FUNCTION_LINES - 2))
    (app / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (app / "small.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    found = {(e.name, e.what, e.figure) for e in measure(tmp_path, ("app",))}
    # ruff counts a nested function's branches in the enclosing function's figure too.
    assert found == {
        ("app.tangled.outer", "complexity", MAX_COMPLEXITY + 2),
        ("app.tangled.outer.inner", "complexity", MAX_COMPLEXITY + 1),
        ("app.long.Thing.method", "lines", MAX_FUNCTION_LINES + 1),
        ("app.big", "lines", MAX_MODULE_LINES + 1),
    }
