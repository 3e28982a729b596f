"""Benchmark: where a round's time goes on Flower, and what the kernelscale SuperNode saves.

    python benchmarks/flower_rounds.py               # 3 nodes, 10 trivial rounds per setting
    python benchmarks/flower_rounds.py --rounds 5    # quicker

One ``LocalFederation`` (a SuperLink and three SuperNodes on 127.0.0.1) per
setting, all in one run so that their times compare on the same machine load:

* ``stock``: Flower 1.42's own ``flower-supernode``: a fresh ``flwr-clientapp``
  process per message (launched by the node's SuperExec, which polls every 1 s),
  3 s of sleep after an empty poll of the SuperLink, 0.5 s steps while waiting
  for the ClientApp's reply;
* ``short waits``: the kernelscale launcher with ``--isolation subprocess``: the
  same process per message, the node's waits shortened (0.02 s);
* ``kernelscale``: the launcher's default: the short waits and one long-lived
  ClientApp process per node (Flower's process isolation mode,
  :mod:`kernelscale.backends.flower.executor`).

For each: the start-up (federation and ``FlowerCluster``), the seconds of a
trivial round (``describe_partition``: milliseconds of work on every node) and a
small FK k-means fit (its rounds and seconds). The same FK fit in-process is the
reference, and the import time of ``flwr-clientapp`` (what every message pays
in the two process-per-message settings) is measured on its own. Writes
``rounds.csv`` and ``summary.md`` under ``benchmarks/results/flower_rounds/``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kernelscale.backends.flower.cluster import FlowerCluster
from kernelscale.backends.flower.local import LocalFederation
from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.federated.fkkmeans import fk_kmeans
from kernelscale.runtime.validation import describe_partition

OUT = Path(__file__).parent / "results" / "flower_rounds"
SETTINGS = {
    "stock": dict(node_idle_seconds=None),
    "short waits": dict(process_per_message=True),
    "kernelscale": dict(),
}
FK = dict(n_random_features=6, max_iter=1, coreset_size=20, n_refine=0, gamma=0.5)


def partitions(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0.0, 0.3, (30, 3)), rng.normal(2.5, 0.3, (30, 3))])
    return [X[i::3] for i in range(3)]


def import_seconds(repeats: int = 3) -> float:
    """Median seconds of ``import flwr.supernode.cli.flwr_clientapp`` in a new Python."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import flwr.supernode.cli.flwr_clientapp"],
                       check=True)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run_setting(name: str, parts, folder: Path, rounds: int) -> dict:
    configs = []
    for i, part in enumerate(parts):
        np.save(folder / f"p{i}.npy", part)
        configs.append({"partition-id": i, "partition-path": str(folder / f"p{i}.npy")})
    start = time.perf_counter()
    with LocalFederation(configs, folder / name.replace(" ", "_"), **SETTINGS[name]) as fed:
        with FlowerCluster(fed.address, len(parts), timeout=300, start_timeout=600) as cluster:
            startup = time.perf_counter() - start
            seconds = []
            for _ in range(rounds):
                t = time.perf_counter()
                cluster.broadcast_map(describe_partition, round="describe",
                                      reply_kind="scalars")
                seconds.append(time.perf_counter() - t)
            t = time.perf_counter()
            fk_kmeans(cluster, 2, random_state=0, **FK)
            fk_seconds = time.perf_counter() - t
            fk_rounds = len(cluster.ledger.times(None)) - rounds
    return {"setting": name, "startup_s": round(startup, 2),
            "round_median_s": round(float(np.median(seconds)), 3),
            "round_mean_s": round(float(np.mean(seconds)), 3),
            "round_min_s": round(float(np.min(seconds)), 3),
            "fk_rounds": fk_rounds, "fk_s": round(fk_seconds, 2),
            "fk_s_per_round": round(fk_seconds / fk_rounds, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS))
    args = parser.parse_args()
    parts = partitions()
    rows = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.settings:
            rows.append(run_setting(name, parts, Path(tmp), args.rounds))
            print(rows[-1], flush=True)
    local = LocalCluster(parts)
    t = time.perf_counter()
    fk_kmeans(local, 2, random_state=0, **FK)
    in_process = time.perf_counter() - t
    clientapp_import = import_seconds()
    OUT.mkdir(parents=True, exist_ok=True)
    write_rows(OUT / "rounds.csv", rows)
    base = {r["setting"]: r for r in rows}
    lines = [
        "# Flower round cost (`python benchmarks/flower_rounds.py "
        f"--rounds {args.rounds}`)", "",
        f"Three SuperNodes and a SuperLink on one machine, {os.cpu_count()} cores, load "
        f"average {load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
        "(other jobs ran: compare the settings as ratios, all from this one run).", "",
        "| setting | start-up s | trivial round s (median / mean / min) | FK fit: rounds, s, "
        "s per round |", "| --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['startup_s']} | {r['round_median_s']} / "
                     f"{r['round_mean_s']} / {r['round_min_s']} | {r['fk_rounds']}, "
                     f"{r['fk_s']}, {r['fk_s_per_round']} |")
    lines += ["", f"The same FK fit in-process: {in_process:.3f} s. Importing "
              f"`flwr-clientapp` in a new Python: {clientapp_import:.2f} s (median of 3), "
              "paid by every message when each starts its own process."]
    def ratio(a, b, key):
        return base[a][key] / base[b][key]

    if "stock" in base and "kernelscale" in base:
        lines.append("Stock / kernelscale: trivial round "
                     f"{ratio('stock', 'kernelscale', 'round_median_s'):.1f}x, FK seconds "
                     f"per round {ratio('stock', 'kernelscale', 'fk_s_per_round'):.1f}x.")
    if "short waits" in base and "kernelscale" in base:
        lines.append("Process per message with short waits / kernelscale: trivial round "
                     f"{ratio('short waits', 'kernelscale', 'round_median_s'):.1f}x, FK "
                     f"seconds per round "
                     f"{ratio('short waits', 'kernelscale', 'fk_s_per_round'):.1f}x.")
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
