"""Benchmark: where a round's time goes on Flower, and FK k-means through `flwr run`.

    python benchmarks/flower_rounds.py                    # everything below
    python benchmarks/flower_rounds.py --before ../main   # and the trivial round of another
                                                          # checkout, alternated with this one
    python benchmarks/flower_rounds.py --rounds 5 --seeds 1   # quicker

1. **A trivial round** (``describe_partition``: milliseconds of work on every node) on
   a ``LocalFederation`` of three SuperNodes and a SuperLink on 127.0.0.1, per
   setting, each in a process of its own, alternated so that they share the
   machine's load:

   * ``stock``: Flower 1.42's own ``flower-supernode`` (a ``flwr-clientapp``
     process per message, launched by a SuperExec that polls every 1 s; 3 s of
     sleep after an empty poll of the SuperLink);
   * ``process per message``: the kernelscale launcher with ``--isolation
     subprocess`` (the same process per message, the node's waits shortened);
   * ``kernelscale``: the launcher's default (:mod:`kernelscale.backends.flower.supernode`:
     the ClientApp run in the node's own process, short waits);
   * with ``--before PATH``: the ``kernelscale`` setting of the checkout at PATH,
     run from its own code (what this one changed, side by side).

2. **Where the trivial round's time goes** (kernelscale setting; with ``--before``
   also PATH's): every process of the federation logs its hops
   (``benchmarks/flower_trace``), and each round is cut into stages at the
   slowest node's events (the round waits for it); the medians over the rounds
   and the HTTP requests a round makes.

3. **The digits FK k-means fit through** ``flwr run`` on a TLS, node-authenticated
   federation (``LocalFederation(tls=True, node_auth=True)``, three nodes holding
   ``X[i::3]`` of the standardised digits, the app of ``kernelscale flower-app``):
   ``FederatedKernelKMeans(n_clusters=10, n_random_features=20, max_iter=1,
   n_refine=0)`` (``docs/flower.md``'s example) with ``protocol='paper'`` and the
   default, per seed: the rounds (the run's log, every phase), the fit's seconds
   (the fitting app's own count, first round to last), the ``flwr run`` command's
   wall time and the NMI of the saved model's labels.

Writes ``rounds.csv``, ``profile.csv``, ``fits.csv`` and ``summary.md`` under
``benchmarks/results/flower_rounds/``.
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
from flower_shared import MILESTONES, digits_partitions, fk_flwr_run

OUT = Path(__file__).parent / "results" / "flower_rounds"
TRACE_DIR = Path(__file__).parent / "flower_trace"
SETTINGS = {
    "stock": dict(node_idle_seconds=None),
    "process per message": dict(process_per_message=True),
    "kernelscale": dict(),
}
#: Stages of a round, in order: (name, the event that ends it).
STAGES = [
    ("master to SuperLink: the ServerApp pushes the messages and their objects", "push"),
    ("SuperLink to the nodes: the node's poll finds the message, pulls its objects",
     "node_pulled"),
    ("node to ClientApp: its poll finds the task, pulls the message and context",
     "step_start"),
    ("the step", "step_end"),
    ("ClientApp to node: the reply and the context pushed", "app_done"),
    ("node to SuperLink: the node sees the reply, pushes it and its objects", "node_sent"),
    ("SuperLink to master: the ServerApp's poll, the replies' objects pulled, the relay",
     "end"),
]


# ----------------------------------------------------------------------------------
# 1 and 2: one setting's trivial rounds, in a process of its own (--trial).


def partitions(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0.0, 0.3, (30, 3)), rng.normal(2.5, 0.3, (30, 3))])
    return [X[i::3] for i in range(3)]


def trial(setting: str, rounds: int) -> dict:
    """The trivial rounds of ``setting`` with this process's kernelscale."""
    import builtins

    from kernelscale.backends.flower.cluster import FlowerCluster
    from kernelscale.backends.flower.local import LocalFederation
    from kernelscale.runtime.validation import describe_partition

    mark = getattr(builtins, "_kernelscale_trace", lambda *args: None)
    with tempfile.TemporaryDirectory() as tmp:
        folder, configs = Path(tmp), []
        for i, part in enumerate(partitions()):
            np.save(folder / f"p{i}.npy", part)
            configs.append({"partition-id": i, "partition-path": str(folder / f"p{i}.npy")})
        start = time.perf_counter()
        with LocalFederation(configs, folder / "federation", **SETTINGS[setting]) as fed:
            with FlowerCluster(fed.address, 3, timeout=300, start_timeout=600) as cluster:
                startup = time.perf_counter() - start
                cluster.broadcast_map(describe_partition, round="warm-up",
                                      reply_kind="scalars")
                import psutil

                superlink = psutil.Process(fed.superlink.pid)
                seconds, cpu, link = [], _cpu_seconds(), sum(superlink.cpu_times()[:2])
                for _ in range(rounds):
                    t = time.time()
                    cluster.broadcast_map(describe_partition, round="describe",
                                          reply_kind="scalars")
                    seconds.append(time.time() - t)
                    mark("master.round", t, seconds[-1])
                cpu = (_cpu_seconds() - cpu) / rounds
                link = (sum(superlink.cpu_times()[:2]) - link) / rounds
    return {"startup_s": round(startup, 2), "round_median_s": round(float(np.median(seconds)), 3),
            "round_mean_s": round(float(np.mean(seconds)), 3),
            "round_min_s": round(float(np.min(seconds)), 3), "round_cpu_s": round(cpu, 3),
            "superlink_cpu_s": round(link, 3)}


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and every process under it so far, the
    ended ones included (through their parents' ``children_*`` times)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def import_seconds(repeats: int = 3) -> float:
    """Median seconds of ``import flwr.supernode.cli.flwr_clientapp`` in a new Python (what
    a process per message pays before it runs anything)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import flwr.supernode.cli.flwr_clientapp"],
                       check=True)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run_trial(tree: Path, setting: str, rounds: int, trace: Path | None = None) -> dict:
    """:func:`trial` in a new Python whose kernelscale is ``tree``'s (traced: ``trace``)."""
    env = dict(os.environ)
    path = [str(tree)] + ([str(TRACE_DIR)] if trace else [])
    env["PYTHONPATH"] = os.pathsep.join(path)
    if trace:
        env["KERNELSCALE_TRACE"] = str(trace)
    else:
        env.pop("KERNELSCALE_TRACE", None)
    out = subprocess.run([sys.executable, __file__, "--trial", setting, "--rounds", str(rounds)],
                         env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def stages(trace: Path) -> tuple[list[dict], list[dict]]:
    """Per round: the seconds of each stage of :data:`STAGES`, and its HTTP requests."""
    events = []
    for line in trace.read_text().splitlines():
        start, pid, event, seconds = line.split()
        events.append((float(start), int(pid), event, float(seconds)))
    rounds, requests = [], []
    for t0, _, event, seconds in events:
        if event != "master.round":
            continue
        t1 = t0 + seconds
        inside = [e for e in events if t0 <= e[0] <= t1]

        def last_end(name, inside=inside):
            ends = [s + d for s, _, e, d in inside if e == name]
            return max(ends) if ends else np.nan

        marks = {"push": last_end("grid.push"), "node_pulled": last_end("node.pull"),
                 "step_start": max((s for s, _, e, _ in inside if e == "app.step"),
                                   default=np.nan),
                 "step_end": last_end("app.step"), "app_done": last_end("app.push_output"),
                 "node_sent": last_end("node.push"), "end": t1}
        row, previous = {}, t0
        for name, mark in STAGES:  # a stage that the slowest node overlapped counts 0
            end = float(np.fmax(marks[mark], previous))
            row[name], previous = end - previous, end
        rounds.append(row)
        http = [(p, e, d) for _, p, e, d in inside if e.startswith("http")]
        requests.append({"requests": len(http), "request_seconds": sum(d for *_, d in http),
                         "needed_requests": needed_requests(http)})
    return rounds, requests


def needed_requests(http: list[tuple]) -> int:
    """The requests of a round that Flower's protocol cannot do without: every object pushed
    once and pulled once, each message push and confirmation, and one pull of messages
    per party that receives (no poll that finds nothing, no retry of an object that was
    not stored yet, no SuperExec poll)."""
    def count(endpoint):
        return sum(e.endswith(endpoint) for _, e, _ in http)

    receivers = {p for p, e, _ in http if e.endswith("/pull-messages")}
    return (2 * count("/push-object") + count("/push-messages")
            + count("/confirm-message-received") + len(receivers))


# ----------------------------------------------------------------------------------
# 3: FK k-means through `flwr run` on a TLS, node-authenticated federation.


def flwr_fits(seeds: int) -> list[dict]:
    from kernelscale.backends.flower.cli import write_fit_app
    from kernelscale.backends.flower.local import LocalFederation

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        configs, truth = digits_partitions(folder)
        app = write_fit_app(folder / "app").parent
        with LocalFederation(configs, folder / "federation", tls=True, node_auth=True) as fed:
            for seed in range(seeds):
                for protocol in ("paper", "auto"):
                    rows.append(fk_flwr_run(fed, app, protocol, seed, truth))
                    print(rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------------
# The summary.


def _stage_table(profiles: dict) -> list[str]:
    names = list(profiles)
    lines = ["| stage | " + " | ".join(f"{n}: median s" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for stage, _ in STAGES:
        lines.append(f"| {stage} | " + " | ".join(
            f"{np.nanmedian([r[stage] for r in profiles[n]['rounds']]):.3f}"
            for n in names) + " |")
    lines.append("| HTTP requests per round (their seconds, added up) | " + " | ".join(
        f"{np.median([r['requests'] for r in profiles[n]['requests']]):.0f} "
        f"({np.median([r['request_seconds'] for r in profiles[n]['requests']]):.2f} s)"
        for n in names) + " |")
    return lines


def _floor(profile: dict) -> list[str]:
    """What the SuperLink's CPU makes the least a round can take."""
    cpu = profile["trial"]["superlink_cpu_s"]
    requests = float(np.median([r["requests"] for r in profile["requests"]]))
    needed = float(np.median([r["needed_requests"] for r in profile["requests"]]))
    each = cpu / requests
    return ["", f"The SuperLink's CPU in the traced run: {cpu:.3f} s a round of "
            f"{profile['trial']['round_median_s']:.3f} s (median), over {requests:.0f} HTTP "
            f"requests: {1000 * each:.1f} ms of its CPU a request. The requests a round "
            f"cannot do without (each object pushed and pulled once, each message pushed and "
            f"confirmed, one pull per receiving party; no empty poll, no retry): "
            f"{needed:.0f}, which at {1000 * each:.1f} ms each is {needed * each:.3f} s of "
            "the SuperLink's CPU a round, however short the waits."]


def _timeline_table(fits: list[dict]) -> list[str]:
    stages = [name for name, _ in MILESTONES] + ["after_fit_s"]
    lines = ["", "Where a `flwr run`'s wall time goes (median s; from the second each "
             "marking line reached the CLI: `Successfully started run`, ``Start "
             "`flwr-serverapp` ``, round 1's line, `fitted in`, the CLI's exit; the "
             "SuperLink streams the log every 0.5 s):", "",
             "| protocol | CLI: imports, app built and sent | SuperExec starts the ServerApp "
             "| app loaded, nodes bound, round 1 | the other rounds | model saved, run "
             "closed, CLI exits | wall |", "|---|---|---|---|---|---|---|"]
    for protocol in ("paper", "auto"):
        group = [f for f in fits if f["protocol"] == protocol]
        lines.append(f"| {protocol} | " + " | ".join(
            f"{np.nanmedian([f[s] for f in group]):.2f}" for s in stages)
            + f" | {np.median([f['flwr_run_wall_s'] for f in group]):.2f} |")
    return lines


def summary(rows, profiles, fits, args, load, clientapp_import: float) -> str:
    lines = [f"# Flower round cost (`python benchmarks/flower_rounds.py --rounds {args.rounds} "
             f"--seeds {args.seeds}{' --before PATH' if args.before else ''}`)", "",
             f"Three SuperNodes and a SuperLink on one machine, {os.cpu_count()} cores, load "
             f"average {load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
             "(other jobs ran beside it: compare the settings as ratios within this run; the "
             "CPU seconds a round costs all the federation's processes together depend "
             "less on the load than its wall time, though its polls run for as long as it "
             "lasts).",
             "", "## A trivial round", "",
             "| setting | start-up s | trivial round s (median / mean / min) | CPU s a round, "
             "all processes | of which the SuperLink's |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['startup_s']} | {r['round_median_s']} / "
                     f"{r['round_mean_s']} / {r['round_min_s']} | {r['round_cpu_s']} | "
                     f"{r['superlink_cpu_s']} |")
    lines.append(f"\nImporting `flwr-clientapp` in a new Python: {clientapp_import:.2f} s "
                 "(median of 3), paid by every message when each starts its own process.")
    by = {r["setting"]: r for r in rows}
    if "stock" in by and "kernelscale" in by:
        ratio = by["stock"]["round_median_s"] / by["kernelscale"]["round_median_s"]
        lines.append(f"\nStock / kernelscale, trivial round: {ratio:.1f}x.")
    if "before" in by and "kernelscale" in by:
        ratio = by["before"]["round_median_s"] / by["kernelscale"]["round_median_s"]
        lines.append(f"Before ({args.before}) / now, trivial round: {ratio:.1f}x.")
    if profiles:
        lines += ["", "## Where a trivial round's time goes", "",
                  "Each stage ends at the slowest node's event (the round waits for it; a "
                  "stage that another node's overlapped counts 0); medians over the rounds "
                  "of a traced run (`benchmarks/flower_trace`).", ""]
        lines += _stage_table(profiles)
        lines += _floor(profiles["kernelscale"])
    if fits:
        lines += ["", "## The digits FK k-means fit through `flwr run` (TLS, node "
                  "authentication)", "",
                  "| protocol | rounds (all phases) | fit rounds | fit s | `flwr run` wall s | "
                  "NMI |", "|---|---|---|---|---|---|"]
        for protocol in ("paper", "auto"):
            group = [f for f in fits if f["protocol"] == protocol]
            lines.append(
                f"| {protocol} | {np.mean([f['rounds'] for f in group]):.0f} | "
                f"{np.mean([f['fit_rounds'] for f in group]):.0f} | "
                f"{np.median([f['fit_s'] for f in group]):.2f} (median) | "
                f"{np.median([f['flwr_run_wall_s'] for f in group]):.1f} (median) | "
                f"{np.mean([f['nmi'] for f in group]):.4f} (mean of {len(group)}) |")
        lines += _timeline_table(fits)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3, help="FK fits per protocol")
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS))
    parser.add_argument("--before", type=Path, help="another checkout, run side by side")
    parser.add_argument("--no-fits", action="store_true", help="skip the flwr run fits")
    parser.add_argument("--trial", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        print(json.dumps(trial(args.trial, args.rounds)))
        return
    here = Path(__file__).resolve().parents[1]
    load = os.getloadavg()
    trees = {"kernelscale": here} | ({"before": args.before.resolve()} if args.before else {})
    rows, profiles = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for setting in args.settings:  # this checkout's settings, then the one before
            rows.append({"setting": setting, **run_trial(here, setting, args.rounds)})
            print(rows[-1], flush=True)
            if setting == "kernelscale" and args.before:
                rows.append({"setting": "before", **run_trial(args.before.resolve(),
                                                               "kernelscale", args.rounds)})
                print(rows[-1], flush=True)
        for name, tree in trees.items():
            trace = Path(tmp) / f"{name}.trace"
            traced = run_trial(tree, "kernelscale", args.rounds, trace)
            rounds, requests = stages(trace)
            profiles[name] = {"rounds": rounds, "requests": requests, "trial": traced}
    fits = [] if args.no_fits else flwr_fits(args.seeds)
    clientapp_import = import_seconds()
    from kernelscale.bench import write_rows

    OUT.mkdir(parents=True, exist_ok=True)
    write_rows(OUT / "rounds.csv", rows)
    write_rows(OUT / "profile.csv", [
        {"tree": name, "round": i, **r, **q} for name, p in profiles.items()
        for i, (r, q) in enumerate(zip(p["rounds"], p["requests"], strict=True))])
    if fits:
        write_rows(OUT / "fits.csv", fits)
    text = summary(rows, profiles, fits, args, load, clientapp_import)
    (OUT / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
