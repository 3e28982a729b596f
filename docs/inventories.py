"""Small Sphinx inventories of the outside names the docs link to, written at build time.

intersphinx normally downloads each project's ``objects.inv``; this site builds offline, so
``conf.py`` calls :func:`write_inventories`, which writes one inventory per project from the
table below into ``docs/_inventories/`` and returns the ``intersphinx_mapping`` that reads
them. The links still point at the projects' online pages. A name missing here stays plain
text (no warning): add it to the table to make it a link.
"""

from __future__ import annotations

import zlib
from pathlib import Path

#: project -> (base URL, {name: (role, page#anchor relative to the base)})
INVENTORIES = {
    "python": ("https://docs.python.org/3/", {
        "int": ("py:class", "library/functions.html#int"),
        "float": ("py:class", "library/functions.html#float"),
        "bool": ("py:class", "library/functions.html#bool"),
        "str": ("py:class", "library/stdtypes.html#str"),
        "dict": ("py:class", "library/stdtypes.html#dict"),
        "list": ("py:class", "library/stdtypes.html#list"),
        "tuple": ("py:class", "library/stdtypes.html#tuple"),
        "object": ("py:class", "library/functions.html#object"),
        "callable": ("py:function", "library/functions.html#callable"),
        "None": ("py:data", "library/constants.html#None"),
        "Exception": ("py:exception", "library/exceptions.html#Exception"),
        "RuntimeError": ("py:exception", "library/exceptions.html#RuntimeError"),
        "UserWarning": ("py:exception", "library/exceptions.html#UserWarning"),
        "ValueError": ("py:exception", "library/exceptions.html#ValueError"),
        "pathlib.Path": ("py:class", "library/pathlib.html#pathlib.Path"),
        # numpydoc writes "sequence" and "iterable" as :term:`python:...`
        "sequence": ("std:term", "glossary.html#term-sequence"),
        "iterable": ("std:term", "glossary.html#term-iterable"),
    }),
    "numpy": ("https://numpy.org/doc/stable/", {
        "numpy.ndarray": ("py:class", "reference/generated/numpy.ndarray.html"),
        "numpy.dtype": ("py:class", "reference/generated/numpy.dtype.html"),
        "numpy.typing.ArrayLike": ("py:data", "reference/typing.html#numpy.typing.ArrayLike"),
        "numpy.random.Generator": (
            "py:class", "reference/random/generator.html#numpy.random.Generator"),
        "numpy.random.RandomState": (
            "py:class", "reference/random/legacy.html#numpy.random.RandomState"),
    }),
    "scipy": ("https://docs.scipy.org/doc/scipy/", {
        "scipy.sparse.csr_matrix": (
            "py:class", "reference/generated/scipy.sparse.csr_matrix.html"),
        "scipy.sparse.csr_array": (
            "py:class", "reference/generated/scipy.sparse.csr_array.html"),
        "scipy.linalg.eigh": ("py:function", "reference/generated/scipy.linalg.eigh.html"),
    }),
    "sklearn": ("https://scikit-learn.org/stable/", {
        f"sklearn.{name}": ("py:class", f"modules/generated/sklearn.{name}.html")
        for name in ("decomposition.KernelPCA", "decomposition.PCA",
                     "decomposition.IncrementalPCA", "kernel_approximation.Nystroem",
                     "kernel_approximation.RBFSampler", "cluster.KMeans",
                     "cluster.SpectralClustering", "base.BaseEstimator",
                     "base.TransformerMixin", "base.ClusterMixin")
    }),
    "pandas": ("https://pandas.pydata.org/docs/", {
        "pandas.DataFrame": ("py:class", "reference/api/pandas.DataFrame.html"),
    }),
    "distributed": ("https://distributed.dask.org/en/stable/", {
        "distributed.Client": ("py:class", "api.html#distributed.Client"),
        "distributed.LocalCluster": ("py:class", "api.html#distributed.LocalCluster"),
    }),
    "dask": ("https://docs.dask.org/en/stable/", {
        "dask.array.Array": ("py:class", "generated/dask.array.Array.html"),
    }),
}


def inventory_bytes(project: str, entries: dict[str, tuple[str, str]]) -> bytes:
    """An ``objects.inv`` (version 2) holding ``entries``."""
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: \n"
              "# The remainder of this file is compressed using zlib.\n")
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, (role, uri) in sorted(entries.items()))
    return header.encode() + zlib.compress(body.encode())


def write_inventories(docs: Path) -> dict[str, tuple[str, str]]:
    """Write ``docs/_inventories/PROJECT.inv``; return the matching ``intersphinx_mapping``."""
    folder = docs / "_inventories"
    folder.mkdir(exist_ok=True)
    mapping = {}
    for project, (url, entries) in INVENTORIES.items():
        path = folder / f"{project}.inv"
        data = inventory_bytes(project, entries)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        mapping[project] = (url, str(path))
    return mapping
