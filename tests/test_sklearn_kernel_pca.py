"""scikit-learn's own KernelPCA tests, run against ``kernelscale.KernelPCA`` (issue 44).

The installed module ``sklearn/decomposition/tests/test_kernel_pca.py`` (scikit-learn
ships its tests in the wheel) is loaded afresh at collection time, its name
``KernelPCA`` is rebound to :class:`kernelscale.KernelPCA` (nothing else: no subclass,
no changed defaults), and its test functions are collected here as ours, with their
own parametrisation. Nothing of scikit-learn is copied into this repository: a
scikit-learn whose test module is missing skips this file.

Exceptions (tests of scikit-learn's private internals), each with its reason:
:data:`EXCEPTIONS`.
"""

import importlib.util
import os

import pytest
import sklearn
from threadpoolctl import threadpool_limits

from kernelscale import KernelPCA

#: Tests of scikit-learn's module that test its private internals, and why: none. All 39
#: of scikit-learn 1.9.1 pass against kernelscale.KernelPCA as shipped
#: (test_kernel_conditioning calls the private
#: ``sklearn.utils.validation._check_psd_eigenvalues`` itself, on our eigenvalues: ours
#: are already cleaned with the same thresholds, so it passes too).
EXCEPTIONS: dict[str, str] = {}


def _load_sklearn_tests():
    """scikit-learn's test module as a fresh module object, ``KernelPCA`` rebound."""
    path = os.path.join(os.path.dirname(sklearn.__file__), "decomposition", "tests",
                        "test_kernel_pca.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("_sklearn_test_kernel_pca_on_kernelscale",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.KernelPCA = KernelPCA
    return module


_SKLEARN_TESTS = _load_sklearn_tests()
if _SKLEARN_TESTS is None:
    pytest.skip("this scikit-learn ships without its tests", allow_module_level=True)


@pytest.fixture
def global_random_seed():
    """scikit-learn's fixture at its default seed (42; SKLEARN_TESTS_GLOBAL_RANDOM_SEED)."""
    return int(os.environ.get("SKLEARN_TESTS_GLOBAL_RANDOM_SEED", "42").split("-")[0])


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """One BLAS thread: the eigensolvers on 1,000 x 1,000 matrices ran 10x slower with two
    threads on the shared, loaded 2-core test machine (0.3 s against 4 s per solve)."""
    with threadpool_limits(1):
        yield


def _collected(name, function):
    if name in EXCEPTIONS:
        return pytest.mark.skip(reason=EXCEPTIONS[name])(function)
    return function


globals().update({name: _collected(name, function)
                  for name, function in vars(_SKLEARN_TESTS).items()
                  if name.startswith("test_") and callable(function)})


def test_the_collected_tests_see_our_class_as_shipped():
    """The collected tests see kernelscale.KernelPCA itself, with its own defaults."""
    import kernelscale

    assert _SKLEARN_TESTS.KernelPCA is kernelscale.KernelPCA
    assert KernelPCA.__module__ == "kernelscale.horizontal.kernel_pca"
    assert len([n for n in vars(_SKLEARN_TESTS) if n.startswith("test_")]) >= 20
