"""Benchmark: `flwr run`'s wall time with the ServerApp started warm or as a new process.

    python benchmarks/flower_warm.py              # 3 seeds, both protocols
    python benchmarks/flower_warm.py --seeds 1    # quicker

Two TLS, node-authenticated ``LocalFederation``s of three nodes run side by side,
each holding ``X[i::3]`` of the standardised digits: one starts every run's
ServerApp as Flower does (a new ``flwr-serverapp`` process, which imports Flower
and kernelscale), the other forks it from a process that has already imported
them (``warm_serverapp=True``, :mod:`kernelscale.backends.flower.warm_serverapp`).
The runs alternate between the two, so that they share the machine's load. Each
run is ``flwr run APP CONNECTION --stream`` of the digits FK k-means fit of
``benchmarks/flower_rounds.py`` (``protocol='paper'`` and the default); per run:
the ``flwr run`` command's wall time, the fit's own seconds (first round to
last, from the run's log), and the NMI of the saved model.

Writes ``warm.csv`` and ``warm.md`` under ``benchmarks/results/flower_rounds/``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from flower_shared import digits_partitions, fk_flwr_run

from kernelscale.bench import write_rows

OUT = Path(__file__).parent / "results" / "flower_rounds"


def _federations(configs: list[dict], folder: Path, stack: ExitStack) -> dict:
    from kernelscale.backends.flower.local import LocalFederation

    return {name: stack.enter_context(LocalFederation(
                configs, folder / name, tls=True, node_auth=True, warm_serverapp=warm))
            for name, warm in (("new process", False), ("warm", True))}


def summary(rows: list[dict], seeds: int, load: tuple) -> str:
    lines = [f"# `flwr run` with the ServerApp warm or new (`python benchmarks/flower_warm.py "
             f"--seeds {seeds}`)", "",
             f"Digits FK k-means through `flwr run --stream` on two TLS, node-authenticated "
             f"LocalFederations of three nodes side by side, runs alternated; {os.cpu_count()} "
             f"cores, load average {load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at "
             "the end.", "",
             "| ServerApp | protocol | runs | `flwr run` wall s (median / min) | fit s (median) "
             "| NMI (mean) |", "|---|---|---|---|---|---|"]
    for setting in ("new process", "warm"):
        for protocol in ("paper", "auto"):
            group = [r for r in rows if r["setting"] == setting and r["protocol"] == protocol]
            walls = [r["flwr_run_wall_s"] for r in group]
            lines.append(f"| {setting} | {protocol} | {len(group)} | {np.median(walls):.1f} / "
                         f"{min(walls):.1f} | {np.median([r['fit_s'] for r in group]):.2f} | "
                         f"{np.mean([r['nmi'] for r in group]):.4f} |")
    for protocol in ("paper", "auto"):
        wall = {s: np.median([r["flwr_run_wall_s"] for r in rows if r["setting"] == s
                              and r["protocol"] == protocol]) for s in ("new process", "warm")}
        lines.append(f"\n{protocol}: new process / warm, `flwr run` wall time: "
                     f"{wall['new process'] / wall['warm']:.2f}x "
                     f"({wall['new process'] - wall['warm']:.1f} s less a run).")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    from kernelscale.backends.flower.cli import write_fit_app

    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        configs, truth = digits_partitions(folder)
        app = write_fit_app(folder / "app").parent
        federations = _federations(configs, folder, stack)
        for seed in range(args.seeds):
            for protocol in ("paper", "auto"):
                order = list(federations.items())
                for setting, fed in order if seed % 2 == 0 else order[::-1]:
                    rows.append({"setting": setting,
                                 **fk_flwr_run(fed, app, protocol, seed, truth)})
                    print(rows[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    write_rows(OUT / "warm.csv", rows)
    (OUT / "warm.md").write_text(summary(rows, args.seeds, load))
    print((OUT / "warm.md").read_text())


if __name__ == "__main__":
    main()
