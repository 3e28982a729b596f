"""The README's Python examples run as written (on the bundled digits data)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
NEEDS_A_SCHEDULER = "Client("


def _namespace():
    from kernelscale.datasets import load_digits_standardized

    X, y = load_digits_standardized()
    return {"X": X, "y": y, "X_new": X[:7], "batches": np.array_split(X, 5)}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    block = BLOCKS[index]
    if NEEDS_A_SCHEDULER in block or "client=client" in block:
        pytest.skip("needs a running Dask scheduler (covered by tests/test_dask*.py)")
    monkeypatch.chdir(tmp_path)
    namespace = _namespace()
    exec(compile(block, f"README.md example {index}", "exec"), namespace)


def test_readme_has_examples():
    assert len(BLOCKS) >= 5
