"""Benchmark: how often a SuperNode should poll the SuperLink, at 3 and 10 nodes.

    python benchmarks/flower_polls.py                 # 3 and 10 nodes, 4 settings, 2 repeats
    python benchmarks/flower_polls.py --repeats 1     # quicker

Each SuperNode of :mod:`kernelscale.backends.flower.supernode` polls the
SuperLink for messages every ``node_idle_seconds`` for 5 s after a message (a
fit's next round comes soon). Each poll is an HTTP request the SuperLink serves
on one core, and every request costs it milliseconds of CPU (Flower's HTTP
stack): the polls of many nodes compete with a round's own requests. The
launcher's default also makes a node wait at least ``POLL_LATENCY_FACTOR`` (4)
times as long as its last empty poll took, so that a busy SuperLink, slow to
answer, is polled less often. Per number of nodes and setting (:data:`SETTINGS`:
a fixed 20 ms and 200 ms, and 20 ms with a factor of 8 and of 4), in a process of
its own, alternated so that the settings share the machine's load: a
``LocalFederation`` (plain HTTP on 127.0.0.1) runs trivial rounds
(``describe_partition``: milliseconds of work per node) after a warm-up round;
the round's median seconds and the SuperLink's CPU seconds a round (psutil).

Writes ``polls.csv`` and ``polls.md`` under ``benchmarks/results/flower_rounds/``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "flower_rounds"
#: (poll interval, how many times as long as its last empty poll a node waits at least;
#: 0: a fixed interval). The launcher's default is the last.
SETTINGS = [(0.02, 0.0), (0.2, 0.0), (0.02, 8.0), (0.02, 4.0)]


def trial(nodes: int, poll_seconds: float, factor: float, rounds: int) -> dict:
    """Trivial rounds on ``nodes`` SuperNodes that poll every ``poll_seconds``, or
    ``factor`` times as long as their last empty poll took if longer."""
    import psutil

    from kernelscale.backends.flower.cluster import FlowerCluster
    from kernelscale.backends.flower.local import LocalFederation
    from kernelscale.backends.flower.supernode import LATENCY_ENV
    from kernelscale.runtime.validation import describe_partition

    os.environ[LATENCY_ENV] = str(factor)  # the nodes' environment
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder, configs = Path(tmp), []
        for i in range(nodes):
            np.save(folder / f"p{i}.npy", rng.normal(size=(20, 3)))
            configs.append({"partition-id": i, "partition-path": str(folder / f"p{i}.npy")})
        with LocalFederation(configs, folder / "federation",
                             node_idle_seconds=poll_seconds) as fed:
            with FlowerCluster(fed.address, nodes, timeout=300, start_timeout=600) as cluster:
                cluster.broadcast_map(describe_partition, round="warm-up",
                                      reply_kind="scalars")
                superlink = psutil.Process(fed.superlink.pid)
                cpu, seconds = sum(superlink.cpu_times()[:2]), []
                for _ in range(rounds):
                    start = time.perf_counter()
                    cluster.broadcast_map(describe_partition, round="describe",
                                          reply_kind="scalars")
                    seconds.append(time.perf_counter() - start)
                cpu = (sum(superlink.cpu_times()[:2]) - cpu) / rounds
    return {"nodes": nodes, "poll_s": poll_seconds, "latency_factor": factor,
            "round_median_s": round(float(np.median(seconds)), 3),
            "round_mean_s": round(float(np.mean(seconds)), 3),
            "superlink_cpu_s": round(cpu, 3)}


def run_trial(nodes: int, poll_seconds: float, factor: float, rounds: int) -> dict:
    """:func:`trial` in a new Python."""
    out = subprocess.run([sys.executable, __file__, "--trial", str(nodes), str(poll_seconds),
                          str(factor), "--rounds", str(rounds)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(rows: list[dict], args, load: tuple) -> str:
    lines = [f"# How often a node polls (`python benchmarks/flower_polls.py --rounds "
             f"{args.rounds} --repeats {args.repeats}`)", "",
             f"A LocalFederation per row (plain HTTP on 127.0.0.1), trivial rounds after a "
             f"warm-up; {os.cpu_count()} cores, load average {load[0]:.1f} at the start and "
             f"{os.getloadavg()[0]:.1f} at the end. Medians over the repeats of each "
             "setting's median round.", "",
             "| nodes | node polls every (s) | and waits at least (x its last empty poll) | "
             "trivial round s | SuperLink CPU s a round |", "|---|---|---|---|---|"]
    for nodes in args.nodes:
        for poll, factor in SETTINGS:
            group = [r for r in rows if r["nodes"] == nodes and r["poll_s"] == poll
                     and r["latency_factor"] == factor]
            lines.append(f"| {nodes} | {poll} | {factor or '-'} | "
                         f"{np.median([r['round_median_s'] for r in group]):.3f} | "
                         f"{np.median([r['superlink_cpu_s'] for r in group]):.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--nodes", type=int, nargs="*", default=[3, 10])
    parser.add_argument("--trial", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        nodes, poll, factor = args.trial
        print(json.dumps(trial(int(nodes), float(poll), float(factor), args.rounds)))
        return
    from kernelscale.bench import write_rows

    load, rows = os.getloadavg(), []
    for _ in range(args.repeats):
        for nodes in args.nodes:
            for poll, factor in SETTINGS:
                rows.append(run_trial(nodes, poll, factor, args.rounds))
                print(rows[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    write_rows(OUT / "polls.csv", rows)
    text = summary(rows, args, load)
    (OUT / "polls.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
