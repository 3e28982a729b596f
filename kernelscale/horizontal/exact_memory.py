"""Whether an exact kernel PCA fits in this machine's memory, before anything is allocated.

:class:`~kernelscale.KernelPCA` asks :func:`exact_fit_bytes` what scikit-learn's
computation needs (the n x n kernel matrix, LAPACK's copy of it, the
eigenvectors, and with ``fit_inverse_transform`` the n x n kernel of the
scores) and compares it with :func:`available_memory_bytes`, the library's one
reading of the memory available (:func:`kernelscale.memory.available_memory`:
the system's, the control group's and ``KERNELSCALE_MEMORY_LIMIT``).
"""

from __future__ import annotations

from kernelscale.memory import MEMORY_LIMIT_ENV, available_memory

__all__ = ["MEMORY_LIMIT_ENV", "ExactFitMemoryError", "available_memory_bytes",
           "exact_fit_bytes", "gib"]


class ExactFitMemoryError(MemoryError, ValueError):
    """An exact fit needs more memory than this machine has, and has no plan to fall back to.

    Raised before anything is allocated; a ``MemoryError`` and a ``ValueError``
    (the message says which setting to change).
    """


def available_memory_bytes() -> int:
    """The memory a fit may take (:func:`kernelscale.memory.available_memory`)."""
    return available_memory()


def exact_fit_bytes(n_samples: int, n_features: int, n_components: int | None,
                    fit_inverse_transform: bool = False) -> int:
    """Bytes of scikit-learn's exact kernel PCA of ``n_samples`` points (float64).

    The kernel matrix and the copy LAPACK's eigensolver takes (2 n^2 floats),
    the eigenvectors (n k; n^2 with ``n_components=None``), the data (n d), and
    with ``fit_inverse_transform`` the kernel matrix of the scores (n^2).
    """
    n = int(n_samples)
    k = n if n_components is None else min(int(n_components), n)
    squares = 2 + (1 if fit_inverse_transform else 0)
    return 8 * (squares * n * n + n * k + n * int(n_features))


def gib(nbytes: float) -> str:
    """``'37.3 GiB'``."""
    return f"{nbytes / 2**30:.1f} GiB"
