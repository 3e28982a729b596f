"""The Python examples of the README and of the user guide run as written (on digits).

Every ```python block of README.md and of the hand-written pages under docs/ runs
here; a block that needs a running Dask scheduler is covered by tests/test_dask*.py
instead, and a block fenced as ```py is shown but not run (it needs a deployment, or
minutes of data).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GENERATED = ("_build", "api", "auto_examples", "results")
PAGES = [README] + [p for p in sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [(page, i, block) for page in PAGES
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]
NEEDS_A_SCHEDULER = ("Client(", "client=client")


def _namespace():
    from kernelscale.datasets import load_digits_standardized

    X, y = load_digits_standardized()
    batches = np.array_split(X, 5)
    return {"X": X, "y": y, "X_new": X[:7], "batches": batches,
            "stream_of_arrays": lambda: iter(batches)}


@pytest.mark.parametrize(("page", "index", "block"), BLOCKS,
                         ids=[f"{p.relative_to(ROOT)}-{i}" for p, i, _ in BLOCKS])
def test_example_runs(page, index, block, tmp_path, monkeypatch):
    if any(marker in block for marker in NEEDS_A_SCHEDULER):
        pytest.skip("needs a running Dask scheduler (covered by tests/test_dask*.py)")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"{page.name} example {index}", "exec"), _namespace())


def test_readme_has_an_example():
    assert any(page == README for page, _, _ in BLOCKS)


def test_readme_test_command_is_what_ci_runs():
    """The README's second command is, word for word, the command of .ci/run."""
    commands = re.findall(r"```bash\n(.*?)\n```", README.read_text(), re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert shlex.split(test_command) == shlex.split(ci)


def test_readme_is_a_landing_page():
    """What fits on a screen or two; everything else lives in the site (docs/)."""
    assert len(README.read_text().splitlines()) <= 150
