"""The real-data benchmark scripts: their shared helpers and ``--quick`` smoke runs (seconds)."""

from __future__ import annotations

import csv
import importlib
from pathlib import Path

import pytest

from kernelscale.bench import write_rows
from kernelscale.bench.scripts import read_rows, script_arguments

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    """Import a script of benchmarks/ as a module, by its name."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_read_rows_gives_back_numbers(tmp_path):
    written = [dict(dataset="letter", label="SKPCA l=2", n=20000, gamma=0.0029239731364392647,
                    error=1.3e-08, n_refine="", seed=0),
               dict(dataset="spam", label="Nystrom", n=4601, gamma=2.0, error=0.5, n_refine=10,
                    seed=4)]
    write_rows(tmp_path / "x.csv", written)
    back = read_rows(tmp_path / "x.csv")
    assert back == written
    assert isinstance(back[1]["gamma"], float) and isinstance(back[1]["n"], int)


def test_script_arguments(tmp_path):
    args, out = script_arguments("title\nmore", ["a", "b"], tmp_path / "r", [])
    assert (args.datasets, args.seeds, args.quick, args.summary_only) == (
        ["a", "b"], [0, 1, 2, 3, 4], False, False)
    assert out == tmp_path / "r" and out.is_dir()
    args, out = script_arguments("t", ["a", "b"], tmp_path / "r", ["--quick", "--seeds", "3"])
    assert args.seeds == [0] and out == tmp_path / "r" / "quick"
    args, _ = script_arguments("t", ["a"], tmp_path / "r", ["--seeds", "2", "--summary-only"])
    assert args.seeds == [0, 1] and args.summary_only
    with pytest.raises(SystemExit):
        script_arguments("t", ["a"], tmp_path, ["--datasets", "c"])
    with pytest.raises(SystemExit):
        script_arguments("t", ["a"], tmp_path, ["--seeds", "0"])
    args, _ = script_arguments("t", ["a"], tmp_path / "r", ["--redo"], extra=lambda parser:
                               parser.add_argument("--redo", action="store_true"))
    assert args.redo


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
    assert "[]" not in text  # an empty list reads "none" in a verdict
    assert (out / "vertical_real.png").stat().st_size > 0
    # the paper's bandwidths beside ours; its Table I protocol beside the stratified split
    assert {r["bandwidth"] for r in parties} == {"gamma = 1/M", "paper's sigma"}
    assert {(r["bandwidth"], r["protocol"]) for r in svm} == {
        (b, p) for b in ("gamma = 1/M", "paper's sigma")
        for p in ("stratified half", "random 200")}
    paper = [r for r in svm if r["protocol"] == "random 200"]
    assert {int(r["trial"]) for r in paper} == set(range(10))
    module = script("vertical_real")
    train, test = module.splits(400, None, 0, "random 200")[0]
    assert len(train) == 200 and len(test) == 200 and not set(train) & set(test)


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


def test_module_examples():
    import doctest

    import kernelscale.bench.scripts as module

    assert doctest.testmod(module).failed == 0


def test_sampler_report_reads_back_and_judges_at_equal_words(script, tmp_path):
    report = script("sampler_shared.report")
    read_results, summary = report.read_results, report.summary

    # uniform + disLR: excess 0.4 at 1e3 words, 0.004 at 1e5 (log-log: 0.04 at 1e4);
    # the ridge sampler: 0.02 at 1e4 words (half, a win), and one point beyond 1e5 (no verdict)
    curve = {"uniform + disLR": [(50, 1e3, 0.4), (100, 1e5, 0.004)],
             "diskpca (ridge)": [(50, 1e4, 0.02), (100, 1e6, 0.001)]}
    rows = [dict(dataset="digits", kernel="rbf0.2", centred=False, method=method,
                 n_landmarks=size, seed=seed, fit_words=words, leverage_words=0,
                 excess=excess * (1 + 0.01 * seed))
            for method, points in curve.items() for size, words, excess in points
            for seed in (0, 1)]
    write_rows(tmp_path / "results.csv", rows)
    back, diagnostics = read_results(tmp_path)
    assert diagnostics == [] and back[0]["centred"] is False and back == rows
    text = summary(back, diagnostics, [0, 1], None)
    assert "| digits | RBF 0.2 x median | no | 0.50 W, - | - |" in text


def test_flwr_run_timeline_splits_the_wall_time_at_its_marking_lines(script):
    timeline = script("flower_shared").timeline
    lines = [(0.4, "Loading project configuration...\n"),
             (2.5, "Successfully started run 17\n"), (3.5, "Start `flwr-serverapp` process\n"),
             (5.0, "kernelscale: round 1 'describe partitions' (setup) 0.5 s\n"),
             (5.0, "kernelscale: round 12 'x' (fit) 0.5 s\n"),  # not round 1
             (8.5, "kernelscale: FederatedKernelKMeans fitted in 4.0 s, 10 fit words\n")]
    out = timeline(lines, wall=9.75)
    assert out == {"submitted_s": 2.5, "serverapp_s": 1.0, "first_round_s": 1.5,
                   "fitted_s": 3.5, "after_fit_s": 1.25}
    assert sum(out.values()) == pytest.approx(9.75)
    missing = timeline(lines[:2] + lines[3:], wall=9.75)  # no ServerApp line: nan, not 0
    assert missing["serverapp_s"] != missing["serverapp_s"]
    assert missing["first_round_s"] == 2.5


def test_a_rounds_needed_requests_leave_out_empty_polls_and_retries(script):
    needed = script("flower_rounds").needed_requests
    master, node = 1, 2
    http = [(master, "http/v1/runtime/push-messages", 0.01),
            *[(master, "http/v1/runtime/push-object", 0.01)] * 3,
            *[(node, "http/v1/fleet/pull-messages", 0.01)] * 4,  # 3 found nothing
            *[(node, "http/v1/fleet/pull-object", 0.01)] * 5,  # 2 retries
            (node, "http/v1/fleet/confirm-message-received", 0.01),
            (node, "http/v1/fleet/push-messages", 0.01),
            *[(node, "http/v1/fleet/push-object", 0.01)] * 3,
            (master, "http/v1/runtime/pull-messages", 0.01),
            *[(master, "http/v1/runtime/pull-object", 0.01)] * 3,
            (master, "http/v1/runtime/confirm-message-received", 0.01),
            (3, "http/v1/runtime/acquire-task", 0.01)]  # the SuperExec's poll
    # 6 objects pushed and pulled once, 2 message pushes, 2 confirmations, 2 receivers
    assert needed(http) == 12 + 2 + 2 + 2
