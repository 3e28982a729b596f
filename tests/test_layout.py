"""The package's layering (DESIGN.md, "Where things live"), read from the source with ``ast``.

Every ``import`` statement counts, including those inside functions (a lazy
import is still an arrow): the protocol core (``kernelscale.runtime``) imports no
backend (``kernelscale.backends``), and no two modules import each other, directly
or around a loop.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kernelscale

PACKAGE = Path(kernelscale.__file__).parent
BACKEND_NAME = re.compile(r"^kernelscale\.backends(\.\w+)*(:\w+)?$")


def _modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                package = name.split(".")
                package = package if is_package else package[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:  # a submodule if there is one, else the module itself
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {t for t in targets if t in modules and t != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_package():
    graph = _graph()
    assert {"kernelscale.runtime.cluster", "kernelscale.backends.local",
            "kernelscale.backends.dask.cluster", "kernelscale.backends.flower.cluster",
            "kernelscale.cluster_factory"} <= set(graph)
    # a top-level, a lazy (inside a function) and a package-level import are all seen
    assert "kernelscale.runtime.cluster" in graph["kernelscale.backends.local"]
    assert "kernelscale.backends.dask.cluster" in graph["kernelscale.cluster_factory"]
    assert "kernelscale.runtime" in graph["kernelscale.horizontal.diskpca"]


def test_the_core_imports_no_backend():
    graph = _graph()
    arrows = sorted((name, target) for name, targets in graph.items()
                    if name.split(".")[:2] == ["kernelscale", "runtime"]
                    for target in targets if target.split(".")[:2] == ["kernelscale", "backends"])
    assert arrows == []
    # nor by name (importlib.import_module("kernelscale.backends..."), a lazy export table)
    named = []
    for name, path in _modules().items():
        if name.split(".")[:2] == ["kernelscale", "runtime"]:
            named += [(name, node.value) for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and BACKEND_NAME.match(node.value)]
    assert named == []


def test_the_front_door_sits_above_core_and_backends():
    """``make_cluster`` (``kernelscale.cluster_factory``) imports them; they never import it."""
    graph = _graph()
    below = [name for name in graph if name.split(".")[:2] in (["kernelscale", "runtime"],
                                                               ["kernelscale", "backends"])]
    assert [name for name in below if "kernelscale.cluster_factory" in graph[name]] == []


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_a_cycle_would_be_found():
    """The cycle finder itself, on a small graph with one loop of three."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_public_names_and_their_homes():
    from kernelscale import DaskCluster, FlowerCluster, Ledger, LocalCluster, make_cluster
    from kernelscale.backends import DaskCluster as dask_cluster
    from kernelscale.backends import FlowerCluster as flower_cluster
    from kernelscale.backends import LocalCluster as local_cluster
    from kernelscale.runtime import Cluster

    assert (LocalCluster, DaskCluster, FlowerCluster) == (local_cluster, dask_cluster,
                                                         flower_cluster)
    assert all(issubclass(c, Cluster) for c in (LocalCluster, DaskCluster, FlowerCluster))
    assert LocalCluster.__module__ == "kernelscale.backends.local"
    assert DaskCluster.__module__ == "kernelscale.backends.dask.cluster"
    assert FlowerCluster.__module__ == "kernelscale.backends.flower.cluster"
    assert Ledger.__module__ == "kernelscale.runtime.ledger"
    assert make_cluster.__module__ == "kernelscale.cluster_factory"


def test_the_optional_engines_load_only_when_used():
    """The front door, the CLI and the backends' packages import neither Dask nor Flower."""
    import subprocess
    import sys

    modules = ["kernelscale.cluster_factory", "kernelscale.cli", "kernelscale.backends",
               "kernelscale.backends.dask", "kernelscale.backends.dask.cli",
               "kernelscale.backends.flower", "kernelscale.backends.flower.cluster"]
    code = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'distributed', 'flwr'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", out
