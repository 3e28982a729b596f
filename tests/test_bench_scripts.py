"""Smoke runs of the real-data benchmark scripts (``--quick``, a few seconds each)."""

from __future__ import annotations

import csv
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    """Import a script of benchmarks/ as a module (they import their neighbours by name)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_vertical_real_quick(script, tmp_path):
    script("vertical_real").main(["--quick", "--datasets", "letter", "--out", str(tmp_path)])
    out = tmp_path / "quick"
    svm = rows(out / "svm.csv")
    assert {r["method"] for r in svm} == {"one-shot", "KPCA", "PCA"}
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in svm)
    parties = rows(out / "parties.csv")
    # J D (n + 1) words, once per party
    assert all(int(r["upload_words"]) == int(r["J"]) * int(r["D"]) * (int(r["n"]) + 1)
               for r in parties)
    text = (out / "summary.md").read_text()
    assert "Table I" in text and "Paper's claims" in text
    assert (out / "vertical_real.png").stat().st_size > 0


def test_federated_real_quick(script, tmp_path):
    script("federated_real").main(["--quick", "--datasets", "spam", "--out", str(tmp_path)])
    out = tmp_path / "quick"
    runs = rows(out / "runs.csv")
    assert {r["method"] for r in runs} == {"CK", "SK", "FK", "RFK", "CE PCA"}
    assert {r["n_refine"] for r in runs if r["method"] == "FK"} == {"0", "10"}
    assert all(int(r["upload_words"]) > 0 for r in runs if r["method"] not in ("CK", "SK"))
    text = (out / "summary.md").read_text()
    assert "not clusters" in text  # spam's classes: CK's NMI is near 0, flagged
    assert "Best mean NMI with at most W uploaded words" in text


def test_streaming_real_quick(script, tmp_path):
    script("streaming_real").main(["--quick", "--datasets", "spam", "--out", str(tmp_path)])
    out = tmp_path / "quick"
    sweep = rows(out / "error_vs_size.csv")
    assert {r["label"].split()[0] for r in sweep} == {"SKPCA", "RNCA", "Nystrom"}
    assert all(float(r["spectral_error"]) >= 0 for r in sweep)
    assert "Best mean spectral error with at most W words of space" in (
        out / "summary.md").read_text()
