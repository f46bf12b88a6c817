"""The architecture's one rule, checked on the source: imports run one way between core's packages (README,
"Layout"), core never imports Streamlit or the pages, and the shared page widgets never import a page."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# a package of core -> the packages of core it may import (besides itself); the model is at the bottom
ALLOWED = {
    "tokenizers": set(),
    "serving": set(),
    "model": {"tokenizers"},
    "data": {"tokenizers", "serving"},
    "lessons": {"model", "tokenizers", "data"},
    "training": {"model", "tokenizers", "data", "lessons"},
    "figures": {"model", "tokenizers", "data", "lessons", "serving"},
}
ENTRY_POINTS = {"__init__", "record", "train"}  # core's top-level modules: the command lines may import any package


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function: `from a.b import c` gives a.b and a.b.c."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def core_package(path: Path) -> str:
    """`core/model/transformer.py` -> "model"; a top-level module of core -> its name."""
    parts = path.relative_to(ROOT / "core").with_suffix("").parts
    return parts[0]


def package_imports(path: Path) -> set[str]:
    """The packages (or top-level modules) of core that `path` imports."""
    return {name.split(".")[1] for name in imported_modules(path) if name.startswith("core.") and "." in name}


def package_graph() -> dict[str, set[str]]:
    """Package -> the other packages of core its modules import (the closing note's graph)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        package = core_package(path)
        graph.setdefault(package, set()).update(package_imports(path) - {package})
    return graph


CORE_FILES = sorted((ROOT / "core").rglob("*.py"))


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_run_one_way(path):
    package = core_package(path)
    if package in ENTRY_POINTS:
        return
    assert package in ALLOWED, f"core/{package} is a new package: say in ALLOWED (and the README) what it may import"
    upward = package_imports(path) - {package} - ALLOWED[package]
    assert not upward, f"{path.relative_to(ROOT)} imports core.{', core.'.join(sorted(upward))}, above core.{package}"


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_streamlit_or_the_pages(path):
    imported = {name.split(".")[0] for name in imported_modules(path)}
    assert not imported & {"streamlit", "pages"}, f"{path.relative_to(ROOT)} imports {imported & {'streamlit', 'pages'}}"


def test_the_shared_widgets_never_import_a_page():
    pages = {path.stem for path in (ROOT / "pages").glob("*.py")}
    for path in (ROOT / "pages" / "ui").glob("*.py"):
        imported = {name for name in imported_modules(path) if name.startswith("pages.")}
        assert not {name.split(".")[1] for name in imported} & pages, f"{path.name} imports a page"


def test_the_rule_catches_an_upward_import(tmp_path):
    """The checker itself: a model module importing a lesson is flagged."""
    fake = tmp_path / "probe.py"
    fake.write_text("def f():\n    from core.lessons.lens import logit_lens\n")
    assert package_imports(fake) - ALLOWED["model"] == {"lessons"}


def test_the_graph_has_no_cycle():
    graph = {package: imports - ENTRY_POINTS for package, imports in package_graph().items()
             if package not in ENTRY_POINTS}
    done: set[str] = set()

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, f"import cycle: {' -> '.join((*path, package))}"
        if package in done:
            return
        for other in graph.get(package, ()):
            visit(other, (*path, package))
        done.add(package)

    for package in graph:
        visit(package, ())
