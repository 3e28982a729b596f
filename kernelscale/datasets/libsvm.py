"""The papers' public data sets from the LIBSVM repository, cached on disk.

Papers 003 and 004 take their real data from the LIBSVM data repository
(https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/). :func:`fetch_libsvm`
gets one of the sets in :data:`LIBSVM_SETS` through a cache folder: the file is
read from ``<data_home>/libsvm/<file name on the server>`` when it is there (no
network), and downloaded to that path first otherwise, unless
``download_if_missing=False``. ``data_home`` defaults to scikit-learn's
:func:`sklearn.datasets.get_data_home` (``~/scikit_learn_data``, or the
``SCIKIT_LEARN_DATA`` environment variable). Files are parsed by
:func:`kernelscale.datasets.load_svmlight` (scikit-learn's svmlight reader),
``.bz2`` files directly, without unpacking.

To use a machine without network access, copy the file there yourself::

    curl -o ~/scikit_learn_data/libsvm/mushrooms \\
        https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/mushrooms

============  ===================  =====================  ===============================
name          samples x features   target                 used by
============  ===================  =====================  ===============================
mushrooms     8,124 x 112          2 classes (1, 2)       paper 003 (Mushrooms)
a9a           32,561 x 123         2 classes (-1, +1)     paper 004 (Adult)
cpusmall      8,192 x 12           real (regression)      paper 004 (CPU)
covtype       581,012 x 54         7 classes (1 to 7)     papers 003 (Covtype), 004 (Forest)
mnist         60,000 x 780         10 classes (0 to 9)    paper 003 (MNIST)
============  ===================  =====================  ===============================

The values are the repository's (no scaling). Its file for a set can differ
from the original UCI data: a9a, for instance, is Adult with its attributes
one-hot encoded.
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .loaders import load_svmlight

__all__ = ["LIBSVM_SETS", "LIBSVM_URL", "fetch_libsvm", "libsvm_path"]

#: Where the LIBSVM repository keeps its data sets.
LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"
#: Seconds to wait for the server before a download fails.
_TIMEOUT = 60


@dataclass(frozen=True)
class LibsvmSet:
    """One data set of the LIBSVM repository.

    Parameters
    ----------
    path : str
        The file, relative to :data:`LIBSVM_URL` (e.g. ``'binary/mushrooms'``).
    n_samples, n_features : int
        The shape of the set; ``n_features`` fixes the number of columns read.
    target : str
        What the labels are, for the docs.
    """

    path: str
    n_samples: int
    n_features: int
    target: str

    @property
    def filename(self) -> str:
        """The file's name in the cache: the server's own."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        return LIBSVM_URL + self.path


#: The sets :func:`fetch_libsvm` knows, by name.
LIBSVM_SETS = {
    "mushrooms": LibsvmSet("binary/mushrooms", 8_124, 112, "2 classes (1, 2)"),
    "a9a": LibsvmSet("binary/a9a", 32_561, 123, "2 classes (-1, +1)"),
    "cpusmall": LibsvmSet("regression/cpusmall", 8_192, 12, "real (regression)"),
    "covtype": LibsvmSet("multiclass/covtype.bz2", 581_012, 54, "7 classes (1 to 7)"),
    "mnist": LibsvmSet("multiclass/mnist.bz2", 60_000, 780, "10 classes (0 to 9)"),
}


def _lookup(name: str) -> LibsvmSet:
    if name not in LIBSVM_SETS:
        raise ValueError(
            f"Unknown LIBSVM data set {name!r}; choose one of {', '.join(LIBSVM_SETS)}."
        )
    return LIBSVM_SETS[name]


def libsvm_path(name: str, data_home: str | os.PathLike[str] | None = None) -> Path:
    """The path at which :func:`fetch_libsvm` reads (and stores) the set ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`LIBSVM_SETS`.
    data_home : str, path-like or None, default=None
        The cache folder; None is :func:`sklearn.datasets.get_data_home`
        (which creates that folder if needed; nothing else is created).

    Returns
    -------
    path : pathlib.Path
        ``<data_home>/libsvm/<file name on the server>``.
    """
    spec = _lookup(name)
    if data_home is None:
        from sklearn.datasets import get_data_home

        data_home = get_data_home()
    return Path(data_home).expanduser() / "libsvm" / spec.filename


def _download(url: str, path: Path) -> None:
    """Copy ``url`` to ``path`` through a temporary file (no partial file is left)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out)
        os.replace(part, path)
    except OSError as exc:  # urllib's URLError and socket timeouts are OSErrors
        part.unlink(missing_ok=True)
        raise OSError(
            f"could not download {url} to {path} ({exc}); download it by hand to that path"
        ) from exc


def fetch_libsvm(
    name: str,
    data_home: str | os.PathLike[str] | None = None,
    download_if_missing: bool = True,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Load a LIBSVM repository data set from the cache, downloading it once if missing.

    Parameters
    ----------
    name : str
        One of :data:`LIBSVM_SETS`: ``'mushrooms'``, ``'a9a'``, ``'cpusmall'``,
        ``'covtype'``, ``'mnist'``.
    data_home : str, path-like or None, default=None
        The cache folder; the file lives at :func:`libsvm_path`. None is
        scikit-learn's :func:`~sklearn.datasets.get_data_home`.
    download_if_missing : bool, default=True
        Download a file that is not in the cache. With False a missing file
        is an error and nothing touches the network.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        The shape is the one :data:`LIBSVM_SETS` lists (whatever the largest
        index in the file).
    y : ndarray of shape (n_samples,), float64
        The labels (class numbers) or regression targets as in the file.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or the cached file is malformed or has a
        column index past the set's ``n_features``.
    FileNotFoundError
        If the file is not cached and ``download_if_missing`` is False; the
        message names the path and the URL to fetch it from.
    OSError
        If the download fails.
    """
    spec = _lookup(name)
    path = libsvm_path(name, data_home)
    if not path.is_file():
        if not download_if_missing:
            raise FileNotFoundError(
                f"LIBSVM data set {name!r} is not cached at {path} and "
                f"download_if_missing=False. Download {spec.url} to that path "
                f"(e.g. curl -o {path} {spec.url}), or call fetch_libsvm({name!r}) "
                "on a machine with network access."
            )
        _download(spec.url, path)
    # The repository's files number columns from 1.
    return load_svmlight(path, n_features=spec.n_features, zero_based=False)
