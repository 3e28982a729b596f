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

#: The index's sections, by setting: (title, one line, the home modules whose names it lists).
SETTINGS = [
    ("Rows spread over servers (horizontal)", "disKPCA, its baselines, the word forecast and "
     "the budget planner.", ["kernelscale.horizontal"]),
    ("Feature blocks held by parties (vertical)", "One-shot kernel PCA of paper 002 and the "
     "DPCA baseline.", ["kernelscale.vertical"]),
    ("User devices (federated clustering)", "Federated kernel k-means of paper 003, coreset "
     "k-means and spectral clustering.", ["kernelscale.federated"]),
    ("Streams (one pass, bounded memory)", "SKPCA of paper 004, RNCA, streaming Nystrom and "
     "the mergeable sketches.", ["kernelscale.streaming"]),
    ("Models, kernels and files", "Kernels, the bandwidth rule, saving and loading fitted "
     "models.", ["kernelscale"]),
    ("Backends: where the workers run", "The front door (``backend=``) and one cluster per "
     "engine: in-process, Dask, Flower.", ["kernelscale.cluster_factory",
                                           "kernelscale.backends",
                                           "kernelscale.backends.local",
                                           "kernelscale.backends.dask",
                                           "kernelscale.backends.flower"]),
    ("The protocol core and its ledger", "Clusters, rounds, the ledger that counts every word, "
     "validation, errors.", ["kernelscale.runtime"]),
    ("Datasets", "Bundled real data, file and LIBSVM loaders, synthetic generators.",
     ["kernelscale.datasets"]),
    ("Metrics", "Low-rank error and excess, subspace distances, kernel errors, clustering, "
     "timing.", ["kernelscale.metrics"]),
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


def public_objects(modules: list[str]):
    """``(module name, name, object)`` of every public class and function of ``modules``."""
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in public_names(module_name):
            obj = getattr(module, name)
            if kind_of(obj) != "data":
                yield module_name, name, obj


def canonical_homes(modules: list[str]) -> dict[int, str]:
    """id(object) -> the module whose page documents it."""
    homes: dict[int, str] = {}
    for module_name, _, obj in public_objects(modules):
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
    index = index_page(modules, homes)
    for module_name, blurb in modules:
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


def index_page(modules: list[tuple[str, str]], homes: dict[int, str]) -> list[str]:
    """The API index: every public class and function with its one-line summary, by setting.

    Each name is listed once, at its canonical home; the estimators also head the page.
    The module pages (with the constants and the re-exports) follow in a toctree.
    """
    names = [m for m, _ in modules]
    owned: dict[str, list[tuple[str, str]]] = {m: [] for m in names}
    for module_name in names:
        module = importlib.import_module(module_name)
        for name in public_names(module_name):
            obj = getattr(module, name)
            kind = kind_of(obj)
            if kind != "data" and homes.get(id(obj)) == module_name:
                owned[module_name].append((name, kind))
    order = {kind: i for i, (_, kind) in enumerate(GROUPS)}

    def table(entries: list[str]) -> list[str]:
        # Names relative to the package, as scikit-learn's index shows them
        # (``horizontal.DistributedKernelPCA``), under ``currentmodule:: kernelscale``.
        short = [e.removeprefix("kernelscale.") for e in entries]
        return [".. autosummary::", "   :nosignatures:", "", *(f"   {e}" for e in short), ""]

    lines = ["API reference", "=============", "",
             "Every public class and function of kernelscale, with the first line of its "
             "docstring, grouped by the setting it serves. Each name links to its page (the "
             "full numpydoc docstring, inherited methods, and the gallery examples that use "
             "it). A name that several modules export is documented once, in the module "
             "that defines it; the module pages below list the re-exports and constants.",
             "", "Most users need only ``from kernelscale import ...``: the estimators, "
             "``make_kernel``, ``median_heuristic``, ``save_model`` and ``load_model``.", "",
             ".. currentmodule:: kernelscale", "",
             "Estimators", "----------", "",
             "scikit-learn estimators, one per setting; ``fit`` runs the protocol and "
             "``communication_`` holds its ledger.", ""]
    estimators = [f"{m}.{n}" for m in names for n, k in owned[m] if k == "estimator"]
    lines += table(estimators)
    listed = set()
    for title, blurb, members in SETTINGS:
        entries = []
        for module_name in members:
            if module_name not in owned:
                continue
            listed.add(module_name)
            for name, _kind in sorted(owned[module_name], key=lambda e: (order[e[1]], e[0])):
                entries.append(f"{module_name}.{name}")
        if not entries:
            continue
        lines += [title, "-" * len(title), "", blurb, "", *table(entries)]
    missing = [m for m in names if m not in listed and owned[m]]
    if missing:
        raise RuntimeError(f"apigen.SETTINGS has no section for {missing}")
    lines += ["By module", "---------", "", ".. toctree::", "   :maxdepth: 1", "",
              *(f"   {m}" for m in names), ""]
    return lines


def public_aliases() -> dict[str, list[str]]:
    """Canonical name -> every public dotted name of the same class or function.

    Examples import ``from kernelscale import DistributedKernelPCA`` while its page is
    ``kernelscale.horizontal.DistributedKernelPCA``: the mini-gallery must look for both.
    """
    modules = [m for m, _ in public_modules()]
    homes = canonical_homes(modules)
    aliases: dict[int, list[str]] = {}
    canonical: dict[int, str] = {}
    for module_name, name, obj in public_objects(modules):
        aliases.setdefault(id(obj), []).append(f"{module_name}.{name}")
        if homes.get(id(obj)) == module_name:
            canonical[id(obj)] = f"{module_name}.{name}"
    return {canonical[key]: sorted(set(names)) for key, names in aliases.items()
            if key in canonical}


def class_aliases() -> dict[str, str]:
    """Short class name -> its page, for numpydoc's type links (``Ledger`` in a docstring)."""
    found = {}
    for full in public_aliases():
        module_name, name = full.rsplit(".", 1)
        if inspect.isclass(getattr(importlib.import_module(module_name), name)):
            found[name] = full
    return found
