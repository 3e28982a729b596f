"""The Examples sections of kernelscale's docstrings run, and print what they say.

The API reference shows them as they are written, so a stale example would mislead a
reader: each module's doctests run here (one test per module; a module that needs an
optional extra which is not installed is skipped, not failed). They use small data and
fixed seeds: about two seconds in all.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import kernelscale

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_with_examples() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(kernelscale.__path__, "kernelscale."):
        spec = importlib.util.find_spec(info.name)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as source:
            if ">>> " in source.read():
                found.append(info.name)
    return found


@pytest.mark.parametrize("module_name", modules_with_examples())
def test_docstring_examples_run(module_name):
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:  # an optional extra (dask, flwr, pyarrow) is missing
        pytest.skip(f"{module_name} needs what is not installed: {error}")
    tests = doctest.DocTestFinder().find(module)
    assert any(t.examples for t in tests), f"{module_name} has '>>> ' but no doctest"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {module_name} failed"
