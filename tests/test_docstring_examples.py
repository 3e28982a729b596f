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


SETTINGS = ("kernelscale", "kernelscale.horizontal", "kernelscale.vertical",
            "kernelscale.federated", "kernelscale.streaming")


def public_estimators() -> list[str]:
    """Every public class with a ``fit`` or ``partial_fit`` of ``kernelscale`` and its
    settings' packages (``module:name``): what a reader copies from."""
    found = {}
    for module_name in SETTINGS:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and (hasattr(obj, "fit") or hasattr(obj, "partial_fit")):
                found.setdefault(obj, f"{module_name}:{name}")
    # a base class of other public estimators is their interface, not one to fit
    bases = {base for cls in found for base in cls.__mro__[1:]}
    return sorted(name for cls, name in found.items() if cls not in bases)


@pytest.mark.parametrize("name", public_estimators())
def test_an_estimators_examples_run_as_written_in_a_fresh_namespace(name):
    """The Examples of a public estimator, copied as they are written into a new session,
    run: they import what they use (the module's doctests run with its globals, which
    hide a missing import)."""
    module_name, _, name = name.partition(":")
    cls = getattr(importlib.import_module(module_name), name)
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(cls, name, globs={})
             if t.examples]
    assert tests, f"{name} has no Examples section"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, f"{name}'s Examples fail as written"
