"""Write the API reference pages (docs/api/*.rst) from each public module's ``__all__``.

Run by ``conf.py`` before every build, so the reference follows the code: every public
name gets one page, at its canonical home (the listed module whose name is the longest
prefix of the object's ``__module__``); the other modules that re-export it link there.
"""

from __future__ import annotations

import importlib
import inspect
import shutil
from pathlib import Path

# (module, one line on what it is for); the order is the order of the reference.
MODULES = [
    ("kernelscale", "The estimators and the few functions most users need, in one import."),
    ("kernelscale.horizontal", "Rows spread over servers: disKPCA, its baselines, the word "
     "forecast and budget planner."),
    ("kernelscale.vertical", "Feature blocks held by different parties: one-shot kernel PCA "
     "and the DPCA baseline."),
    ("kernelscale.federated", "User devices: federated kernel k-means, distributed (coreset) "
     "k-means and spectral clustering."),
    ("kernelscale.streaming", "Streams too long to keep: SKPCA, RNCA, streaming Nystrom, "
     "mergeable sketches."),
    ("kernelscale.runtime", "The protocol core: clusters, rounds, the ledger that counts every "
     "word, validation."),
    ("kernelscale.cluster_factory", "The front door: what a user holds plus ``backend=`` "
     "becomes a cluster (above the core and the backends)."),
    ("kernelscale.backends", "One engine per place, each a ``Cluster`` subclass that "
     "implements only how a round runs."),
    ("kernelscale.backends.local", "The in-process backend (a thread pool of workers)."),
    ("kernelscale.backends.dask", "The Dask backend (one actor per partition)."),
    ("kernelscale.backends.flower", "The Flower backend (SuperLink, SuperNodes, SecAgg+)."),
    ("kernelscale.datasets", "Bundled real data sets, LIBSVM loaders, file loaders and "
     "synthetic generators."),
    ("kernelscale.metrics", "Low-rank error, subspace distances, kernel errors, clustering "
     "and timing."),
]

GROUPS = [("Estimators", "estimator"), ("Classes", "class"), ("Exceptions", "exception"),
          ("Functions", "function"), ("Constants", "data")]

HERE = Path(__file__).resolve().parent


def public_modules() -> list[tuple[str, str]]:
    """The listed modules that exist in this checkout (the backends move in and out)."""
    found = []
    for name, blurb in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if Path(module.__file__).resolve().is_relative_to(HERE.parent):  # this checkout's
            found.append((name, blurb))
    return found


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        raise RuntimeError(f"{module_name} has no __all__: the API reference needs one")
    return list(names)


def kind_of(obj) -> str:
    from sklearn.base import BaseEstimator

    if inspect.isclass(obj):
        if issubclass(obj, BaseEstimator):
            return "estimator"
        if issubclass(obj, BaseException):
            return "exception"
        return "class"
    if callable(obj):
        return "function"
    return "data"


def canonical_homes(modules: list[str]) -> dict[int, str]:
    """id(object) -> the module whose page documents it."""
    homes: dict[int, str] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in public_names(module_name):
            obj = getattr(module, name)
            if kind_of(obj) == "data":
                continue
            where = getattr(obj, "__module__", "") or ""
            best = max((m for m in modules if where == m or where.startswith(m + ".")),
                       key=len, default=module_name)
            homes.setdefault(id(obj), best)
    return homes


def attribute_doc(module_name: str, name: str) -> list[str]:
    """The ``#:`` comment above ``name`` in ``module_name`` or in any of its submodules."""
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    module = importlib.import_module(module_name)
    candidates = [module_name]
    if hasattr(module, "__path__"):
        candidates += [m.name for m in pkgutil.walk_packages(module.__path__, module_name + ".")]
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # a module that needs an optional extra, or has no source
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line is not None]
    return []


def data_entry(module_name: str, name: str, value) -> list[str]:
    """A constant documented on its module's page, with its ``#:`` comment and value."""
    shown = repr(value)
    if len(shown) > 80 or "\n" in shown:
        shown = f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else ""
    doc = attribute_doc(module_name, name)
    if not doc:
        raise RuntimeError(f"{module_name}.{name}: a public constant needs a '#:' comment")
    lines = [f".. py:data:: {module_name}.{name}"]
    if shown:
        lines.append(f"   :value: {shown}")
    return lines + ["", *(f"   {line}" if line else "" for line in doc), ""]


def write_pages() -> None:
    modules = public_modules()
    names = [m for m, _ in modules]
    homes = canonical_homes(names)
    api = HERE / "api"
    api.mkdir(exist_ok=True)
    shutil.rmtree(api / "generated", ignore_errors=True)  # no page of a name that went away
    index = ["API reference", "=============", "",
             "Every public name of kernelscale, generated from its numpydoc docstring. "
             "A name that several modules export has one page, under the module that "
             "defines it; the others link there.", "",
             ".. toctree::", "   :maxdepth: 1", ""]
    for module_name, blurb in modules:
        index.append(f"   {module_name}")
        module = importlib.import_module(module_name)
        lines = [module_name, "=" * len(module_name), "", blurb, "",
                 f".. automodule:: {module_name}", "   :no-members:", "",
                 f".. currentmodule:: {module_name}", ""]
        for title, kind in GROUPS:
            own, linked = [], []
            for name in public_names(module_name):
                obj = getattr(module, name)
                if kind_of(obj) != kind:
                    continue
                home = homes.get(id(obj), module_name)
                if home == module_name:
                    own.append(name)
                elif home.startswith(module_name + "."):  # autosummary wants it relative
                    linked.append(f"~{home[len(module_name) + 1:]}.{name}")
                else:
                    linked.append(f"~{home}.{name}")
            if not own and not linked:
                continue
            lines += [title, "-" * len(title), ""]
            if own and kind == "data":
                for n in sorted(own):
                    lines += data_entry(module_name, n, getattr(module, n))
            elif own:  # one page each, from _templates/autosummary/{class,function}.rst
                lines += [".. autosummary::", "   :toctree: generated/", "",
                          *(f"   {n}" for n in sorted(own)), ""]
            if linked:
                lines += ["Re-exported here; each is documented in the module that defines it:",
                          "", ".. autosummary::", "",
                          *(f"   {n}" for n in sorted(linked, key=lambda s: s.rsplit('.', 1)[1])),
                          ""]
        text = "\n".join(lines)
        target = api / f"{module_name}.rst"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    text = "\n".join(index) + "\n"
    target = api / "index.rst"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
