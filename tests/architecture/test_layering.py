"""The package's shape: few top-level modules, data flowing one way, no private names of other packages.

Read from the source with ``ast``, so every import counts, including those
made inside functions to defer an optional dependency.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "xarray_rumi"

#: What each part may import of the package: data flows bytes -> format -> frames -> reading -> faces.
ALLOWED = {
    "errors": set(),
    "format": {"errors"},
    "io": {"errors"},
    "frames": {"errors", "format", "io"},
    "reading": {"errors", "format", "io", "frames"},
    "dataset": {"errors", "format", "io", "frames", "reading"},
    "virtual": {"errors", "format", "io", "frames", "reading", "dataset"},
    "writing": {"errors", "format", "io", "frames"},
    "stac": {"errors", "format", "io", "reading", "dataset"},
    "accessor": {"writing", "stac"},
    "cli": {"errors", "format", "reading", "dataset", "virtual", "writing", "stac"},
    "__init__": {"accessor", "errors", "format", "io", "reading", "writing", "dataset", "virtual", "stac"},
}
#: The one module allowed to reach into another package's private names, and what it reaches.
PRIVATE_ALLOWED = {"frames/_geozl_into.py": {"geozl._2d", "geozl._ffi"}}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        name = ".".join(relative.with_suffix("").parts)
        yield relative, name.removesuffix(".__init__") if name != "__init__" else "__init__", ast.parse(path.read_text())


def _imports(relative: pathlib.Path, module: str, tree: ast.AST):
    """Every module ``tree`` imports, made absolute (``xarray_rumi.`` stripped for our own)."""
    package = module.split(".") if relative.name == "__init__.py" and module != "__init__" else module.split(".")[:-1]
    if module == "__init__":
        package = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    yield ".".join(["xarray_rumi", *base, node.module])
                else:  # ``from . import name``: the names are modules of that package
                    yield from (".".join(["xarray_rumi", *base, alias.name]) for alias in node.names)
            elif node.module != "__future__":
                yield node.module


def _part(name: str) -> str:
    return name.split(".")[0]


def test_at_most_six_modules_at_the_top_level():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 6, top


@pytest.mark.parametrize(("relative", "module", "tree"), list(_modules()), ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_imports_follow_the_architecture(relative, module, tree):
    own = sorted({name.removeprefix("xarray_rumi.") for name in _imports(relative, module, tree)
                  if name and (name == "xarray_rumi" or name.startswith("xarray_rumi."))})
    part = _part(module)
    allowed = ALLOWED[part] | {part}
    assert [name for name in own if _part(name) not in allowed] == [], f"{module} imports against the flow"


@pytest.mark.parametrize(("relative", "module", "tree"), list(_modules()), ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_no_private_names_of_other_packages(relative, module, tree):
    foreign = {name for name in _imports(relative, module, tree) if name and not name.startswith("xarray_rumi")}
    private = {name for name in foreign if any(part.startswith("_") for part in name.split("."))}
    assert private == PRIVATE_ALLOWED.get(relative.as_posix(), set())


def test_no_import_cycles():
    graph = {}
    for relative, module, tree in _modules():
        graph[module] = {name.removeprefix("xarray_rumi.") for name in _imports(relative, module, tree)
                         if name and name.startswith("xarray_rumi.")} & {m for _, m, _ in _modules()}
    visiting, done, cycles = set(), set(), []

    def visit(node, path):
        if node in done:
            return
        if node in visiting:
            cycles.append(path[path.index(node):] + [node])
            return
        visiting.add(node)
        for target in sorted(graph.get(node, ())):
            if target != node and not module_is_parent(target, node):
                visit(target, [*path, node])
        visiting.discard(node)
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    assert cycles == []


def module_is_parent(package: str, module: str) -> bool:
    """A module importing its own package's ``__init__`` is how Python loads it, not a cycle."""
    return module.startswith(package + ".")
