"""What the Flower benchmarks share: the digits FK k-means fit through ``flwr run``.

``benchmarks/flower_rounds.py`` and ``benchmarks/flower_warm.py`` both run
``docs/flower.md``'s example fit (:data:`FK`) on three nodes holding ``X[i::3]``
of the standardised digits (:func:`digits_partitions`), each run as the data
scientist's ``flwr run APP CONNECTION --stream`` (:func:`fk_flwr_run`). The
scripts import it by its name (their folder is on the path when they run).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

#: ``FederatedKernelKMeans(n_clusters=10, n_random_features=20, max_iter=1, n_refine=0)``.
FK = {"n-clusters": 10, "n-random-features": 20, "max-iter": 1, "n-refine": 0}


def digits_partitions(folder: Path) -> tuple[list[dict], np.ndarray]:
    """Save ``X[i::3]`` of the standardised digits for three nodes: their node configs,
    and the true labels in the order of the partitions."""
    from kernelscale.datasets import load_digits_standardized

    X, y = load_digits_standardized()
    configs = []
    for i in range(3):
        np.save(folder / f"p{i}.npy", X[i::3])
        configs.append({"partition-id": i, "partition-path": str(folder / f"p{i}.npy")})
    return configs, np.concatenate([y[i::3] for i in range(3)])


def fk_flwr_run(fed, app: Path, protocol: str, seed: int, truth: np.ndarray) -> dict:
    """One ``flwr run`` of :data:`FK` on the LocalFederation ``fed``: its rounds (the run's
    log, every phase, and those of the fit), the fit's own seconds, the command's wall
    time, the NMI of the saved model's labels and where the wall time went
    (:func:`timeline`)."""
    from kernelscale.backends.flower.connection import flwr_command
    from kernelscale.metrics.clustering import nmi
    from kernelscale.model import load_model

    name = f"fk-{protocol}-{seed}.npz"  # a plain name: the operator's model folder
    config = {"estimator": "FederatedKernelKMeans", **FK, "n-workers": 3,
              "protocol": protocol, "random-state": seed, "output": name}
    text = " ".join(f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}"
                    for k, v in config.items())
    lines, start = [], time.perf_counter()
    run = subprocess.Popen([flwr_command(), "run", str(app), fed.connection, "--stream",
                            "--run-config", text], env=fed.flwr_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    watchdog = threading.Timer(1800, run.kill)  # a run that never ends fails, not hangs
    watchdog.start()
    try:
        for line in run.stdout:  # each line with the second it reached the data scientist
            lines.append((time.perf_counter() - start, line))
        run.wait()
    finally:
        watchdog.cancel()
    wall = time.perf_counter() - start
    log = "".join(line for _, line in lines)
    fitted = re.search(r"fitted in ([0-9.]+) s", log)
    if not (fed.models / name).exists() or fitted is None:
        raise RuntimeError(f"flwr run failed:\n{log[-3000:]}")
    rounds = re.findall(r"kernelscale: round \d+ '([^']+)' \((\w+)\)", log)
    return {"protocol": protocol, "seed": seed, "rounds": len(rounds),
            "fit_rounds": sum(p == "fit" for _, p in rounds),
            "fit_s": float(fitted.group(1)), "flwr_run_wall_s": round(wall, 2),
            "nmi": round(nmi(truth, load_model(fed.models / name).labels_), 4),
            **timeline(lines, wall)}


#: The lines of ``flwr run --stream`` that mark a run's stages, in order: (stage, the
#: pattern of the line that ends it).
MILESTONES = [
    ("submitted_s", r"Successfully started run"),  # the CLI's imports, the app built, sent
    ("serverapp_s", r"Start `flwr-serverapp`"),  # the SuperExec found the run, started it
    ("first_round_s", r"kernelscale: round 1 "),  # the app loaded, nodes bound, round 1
    ("fitted_s", r"fitted in"),  # the fit's rounds
]


def timeline(lines: list[tuple[float, str]], wall: float) -> dict:
    """Seconds spent in each stage of one ``flwr run`` (:data:`MILESTONES`, then
    ``after_fit_s``: the model saved, the run closed, the CLI's exit), from the second at
    which each marking line reached the CLI's output. The SuperLink sends the ServerApp's
    log every 0.5 s (Flower's ``LOG_STREAM_INTERVAL``): stages after the first are
    known to about that."""
    out, previous = {}, 0.0
    for stage, pattern in MILESTONES:
        seen = next((t for t, line in lines if re.search(pattern, line)), np.nan)
        out[stage] = round(seen - previous, 2)
        previous = seen if np.isfinite(seen) else previous
    out["after_fit_s"] = round(wall - previous, 2)
    return out
