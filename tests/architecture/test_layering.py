"""The package's shape: few top-level modules, data flowing one way, no private names of other packages.

Read from the source with ``ast``, so every import counts, including those
made inside functions to defer an optional dependency.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "xarray_rumi"

#: What each part may import of the package: data flows bytes -> format -> frames -> reading -> datamodel -> the ways
#: of opening (virtual, stac, dataset); ``runtime`` (the process's threads and allocator) sits beside ``format`` and
#: ``io``, under everything that computes.  Of those, ``dataset`` comes last: it opens STAC Items through ``stac``,
#: and neither ``stac`` nor ``virtual`` imports it.  ``stac`` also migrates GeoTIFF collections: it converts their
#: files (``writing``) on local processes (``runtime``); ``writing`` imports nothing of ``stac``.
UP_TO_READING = {"errors", "format", "io", "runtime", "frames", "reading"}
ALLOWED = {
    "errors": set(),
    "format": {"errors"},
    "io": {"errors", "runtime"},
    "runtime": {"errors"},
    "frames": {"errors", "format", "io", "runtime"},
    "reading": {"errors", "format", "io", "runtime", "frames"},
    "datamodel": UP_TO_READING,
    "virtual": UP_TO_READING | {"datamodel"},
    "stac": {"errors", "format", "io", "runtime", "reading", "datamodel", "writing"},
    "dataset": UP_TO_READING | {"datamodel", "stac"},
    "writing": {"errors", "format", "io", "runtime", "frames"},
    "accessor": {"writing", "stac"},
    # the command line calls every part, and no part calls it back
    "cli": {"errors", "format", "io", "runtime", "frames", "reading", "datamodel", "virtual", "stac", "dataset",
            "writing", "accessor"},
    "__init__": {"accessor", "errors", "format", "io", "runtime", "reading", "datamodel", "writing", "dataset", "virtual",
                 "stac"},
}
#: The one module allowed to reach into another package's private names, and what it reaches.
#: geozl's checked releases (frames/_geozl_into.py); dask's task-spec graph nodes, what dask and distributed
#: build every graph from since 2024.12, with no public name yet (writing/cluster.py; CI's newest leg runs it).
PRIVATE_ALLOWED = {"frames/_geozl_into.py": {"geozl._2d", "geozl._ffi"}, "writing/cluster.py": {"dask._task_spec"}}
#: What starts a thread or a process, or makes an executor or a queue (a name and what is under it) ...
THREAD_MAKERS = ("threading.Thread", "threading.Timer", "_thread", "queue", "multiprocessing",
                 "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.ProcessPoolExecutor",
                 "concurrent.futures.thread", "concurrent.futures.process", "asyncio.to_thread")
#: ... and the methods that hand an executor work, whatever the object.
THREAD_FEEDERS = ("submit", "run_in_executor")
#: The one module that owns threads, and the one other use: zarr's async codec interface runs a synchronous
#: codec on asyncio's own executor (``asyncio.to_thread``), as zarr's codecs do; the package starts no thread there.
THREADS_ALLOWED = {"runtime/threads.py": {*THREAD_MAKERS, *THREAD_FEEDERS}, "virtual/codec.py": {"asyncio.to_thread"}}


def _parse_package():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        name = ".".join(relative.with_suffix("").parts)
        yield relative, name.removesuffix(".__init__") if name != "__init__" else "__init__", ast.parse(path.read_text())


#: ``(relative path, module name, tree)`` of every module, each parsed once for all the tests below.
MODULES = tuple(_parse_package())


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


@pytest.mark.parametrize(("relative", "module", "tree"), MODULES, ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_imports_follow_the_architecture(relative, module, tree):
    own = sorted({name.removeprefix("xarray_rumi.") for name in _imports(relative, module, tree)
                  if name and (name == "xarray_rumi" or name.startswith("xarray_rumi."))})
    part = _part(module)
    allowed = ALLOWED[part] | {part}
    assert [name for name in own if _part(name) not in allowed] == [], f"{module} imports against the flow"


def test_the_command_line_may_import_every_part_and_no_part_imports_it():
    parts = {_part(module) for _, module, _ in MODULES}
    assert ALLOWED["cli"] == parts - {"cli", "__init__"}
    assert [part for part, allowed in ALLOWED.items() if "cli" in allowed] == []


@pytest.mark.parametrize(("relative", "module", "tree"), MODULES, ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_only_the_command_line_parses_arguments(relative, module, tree):
    """argparse, and the ``add_command`` functions that build on it, live in ``cli/`` alone."""
    if _part(module) == "cli":
        return
    assert "argparse" not in set(_imports(relative, module, tree)), f"{module} parses arguments"
    assert "add_command" not in {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize(("relative", "module", "tree"), MODULES, ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_no_private_names_of_other_packages(relative, module, tree):
    foreign = {name for name in _imports(relative, module, tree) if name and not name.startswith("xarray_rumi")}
    private = {name for name in foreign if any(part.startswith("_") for part in name.split("."))}
    assert private == PRIVATE_ALLOWED.get(relative.as_posix(), set())


def _used_names(tree: ast.AST):
    """Every name ``tree`` imports or reaches through an imported module, dotted in full (``threading.Thread``)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:  # ``import concurrent.futures as cf``: cf is concurrent.futures
                    aliases[alias.asname] = alias.name
                else:  # ``import concurrent.futures`` binds concurrent
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                yield f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                yield ".".join([aliases[base.id], *reversed(chain)])


def _thread_work(tree: ast.AST) -> set[str]:
    """What of :data:`THREAD_MAKERS` and :data:`THREAD_FEEDERS` ``tree`` uses."""
    made = {maker for name in _used_names(tree) for maker in THREAD_MAKERS
            if name == maker or name.startswith(maker + ".")}
    fed = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
           and isinstance(node.func, ast.Attribute) and node.func.attr in THREAD_FEEDERS}
    return made | fed


@pytest.mark.parametrize(("relative", "module", "tree"), MODULES, ids=lambda v: str(v) if
                         isinstance(v, pathlib.Path) else "")
def test_only_the_runtime_starts_threads(relative, module, tree):
    """No module but ``runtime/threads.py`` starts a thread or a process, or makes or feeds an executor or a queue."""
    assert _thread_work(tree) <= THREADS_ALLOWED.get(relative.as_posix(), set()), f"{module} runs threads of its own"


def test_the_thread_check_sees_every_way_of_naming_a_thread():
    source = """
import threading, queue as q
import concurrent.futures as cf
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
threading.Thread(target=print).start()
cf.ThreadPoolExecutor(2)
loop.run_in_executor(None, print)
pool().submit(print)
"""
    assert _thread_work(ast.parse(source)) == {
        "threading.Thread", "queue", "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.ProcessPoolExecutor",
        "multiprocessing", "run_in_executor", "submit"}
    harmless = "import threading\nfrom concurrent.futures import Future\nlock = threading.Lock()\nself.queue.submit\n"
    assert _thread_work(ast.parse(harmless)) == set()


def _makes_images(tree: ast.AST) -> bool:
    """Whether ``tree`` calls ``RumiImage(...)`` itself, by any name it imported it as."""
    names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             for alias in node.names if alias.name == "RumiImage"}
    return any(isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Name) and node.func.id in names
        or isinstance(node.func, ast.Attribute) and node.func.attr == "RumiImage") for node in ast.walk(tree))


@pytest.mark.parametrize(("relative", "module", "tree"), [m for m in MODULES if _part(m[1]) != "reading"],
                         ids=lambda v: str(v) if isinstance(v, pathlib.Path) else "")
def test_images_open_through_the_one_opener(relative, module, tree):
    """Outside ``reading/`` an image comes from ``open_image``, with its limits, retries and checks, never built."""
    assert not _makes_images(tree), f"{module} builds a RumiImage instead of calling open_image"


def test_the_opener_check_sees_an_image_built_by_hand():
    built = "from ..reading.image import RumiImage as Image\nimage = Image(source, header)\n"
    assert _makes_images(ast.parse(built))
    assert not _makes_images(ast.parse("from ..reading.image import RumiImage\ndef f(i: RumiImage): ...\n"))


def test_no_import_cycles():
    modules = {module for _, module, _ in MODULES}
    graph = {}
    for relative, module, tree in MODULES:
        graph[module] = {name.removeprefix("xarray_rumi.") for name in _imports(relative, module, tree)
                         if name and name.startswith("xarray_rumi.")} & modules
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


def test_no_assert_in_library_code():
    # python -O drops asserts: a check the package relies on must raise on its own
    found = [f"{relative}:{node.lineno}" for relative, _, tree in MODULES
             for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert found == []
