"""The Examples sections of kernelscale's docstrings, and the getting-started page, run as shown.

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


def test_getting_started_quotes_a_current_run():
    """docs/getting_started.md shows the output of its first fit: it must still be true.

    The page's ``python`` block fits; its ``pycon`` blocks (``>>>``) run as doctests on
    that fit, and its ledger (the ``text`` block that starts with the ledger's title)
    is what ``communication_.summary(times=False)`` prints now.
    """
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "getting_started.md").read_text()
    fit = next(b for b in re.findall(r"```python\n(.*?)```", page, re.S) if ".fit(" in b)
    namespace: dict = {}
    exec(compile(fit, "getting_started.md", "exec"), namespace)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    for i, block in enumerate(re.findall(r"```pycon\n(.*?)```", page, re.S)):
        runner.run(parser.get_doctest(block, namespace, f"pycon block {i}", None, 0))
    assert runner.summarize(verbose=False).failed == 0
    ledger = next(b for b in re.findall(r"```text\n(.*?)```", page, re.S)
                  if b.startswith("communication (fit)"))
    assert ledger.strip() == namespace["kpca"].communication_.summary(times=False).strip()
