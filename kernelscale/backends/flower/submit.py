"""``kernelscale flower run``: submit a Flower run, follow its log, exit with its outcome.

``flwr run --stream`` exits 0 whatever the ServerApp did (only ``flwr ls`` says
``finished:failed``), and a connection that fails says only that the SuperLink
is "unavailable". This command, for scripts, runs Flower's own commands:

1. ``flwr run APP CONNECTION --run-config ... --format json``: the run's id; a
   submission that fails is explained by
   :func:`~kernelscale.backends.flower.connection.probe_superlink` (nothing
   listening, a certificate that does not verify, TLS on one side only);
2. ``flwr log RUN_ID CONNECTION --stream``: the run's log, line by line, as it
   comes;
3. ``flwr ls CONNECTION --run-id RUN_ID --format json``: the run's final status.

It returns 0 for ``finished:completed``; otherwise it prints the reason the
ServerApp gave (kernelscale's fitting app ends a failed run's log with one line,
``kernelscale: the run failed: <error>``) and returns 1. Nothing here imports
Flower: the ``flwr`` command does the talking, with the user's own Flower
configuration (``$FLWR_HOME/config.toml``) and Flower's telemetry and update
check off.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from kernelscale.backends.flower.connection import (
    flower_env,
    flwr_command,
    named_connection,
    probe_superlink,
    unreachable,
)

#: The line with which the fitting ServerApp ends the log of a run that failed.
FAILED_MARK = "kernelscale: the run failed: "
_UNREACHABLE = ("unavailable", "could not establish", "failed to connect", "ssl",
                "certificate", "handshake")


class RunFailed(RuntimeError):
    """A run that could not be submitted, or did not finish as ``completed``."""


def _json_from(text: str) -> dict:
    """The first JSON object printed on a line of its own in ``text``."""
    decoder = json.JSONDecoder()
    for start in [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]:
        if text.startswith("{", start):
            try:
                return decoder.raw_decode(text, start)[0]
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON in the output of flwr:\n{text[-1500:]}")


def _why_unreachable(connection: str | None, output: str) -> str:
    """The probe's line on what answers at the connection's address, when flwr could not
    reach it."""
    if not any(word in output.lower() for word in _UNREACHABLE):
        return ""
    address, root, insecure = named_connection(connection)
    if not address:
        return ""
    return probe_superlink(address, root, bool(insecure))


def submit(app: str, connection: str | None, run_config: list[str], env: dict) -> int:
    """Submit the run; its id, or :class:`RunFailed` with flwr's message and the cause.

    A connection that cannot work (nothing listening, a certificate that does not
    verify) is refused at once, without the retries of ``flwr run``."""
    cause = unreachable(*named_connection(connection))
    if cause:
        raise RunFailed(f"`flwr run` could not submit the run: the SuperLink of connection "
                        f"{connection or '(default)'} cannot be used\ncause: {cause}")
    command = [flwr_command(), "run", str(app), *([connection] if connection else [])]
    for config in run_config:
        command += ["--run-config", config]
    done = subprocess.run([*command, "--format", "json"], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=600)
    output = done.stdout + done.stderr
    try:
        reply = _json_from(done.stdout)
    except ValueError:
        reply = {}
    if done.returncode != 0 or not reply.get("success") or not reply.get("run-id"):
        message = reply.get("error-message") or output.strip()[-1500:]
        cause = _why_unreachable(connection, output)
        raise RunFailed(f"`flwr run` could not submit the run: {message}"
                        + (f"\ncause: {cause}" if cause else ""))
    return int(reply["run-id"])


def run_status(run_id: int, connection: str | None, env: dict) -> tuple[str, str]:
    """``(status, details)`` of the run, as ``flwr ls`` gives them."""
    done = subprocess.run([flwr_command(), "ls", *([connection] if connection else []),
                           "--run-id", str(run_id), "--format", "json"], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    try:
        runs = _json_from(done.stdout).get("runs") or []
    except ValueError:
        runs = []
    if not runs:
        raise RunFailed(f"`flwr ls` does not know run {run_id}: "
                        f"{(done.stdout + done.stderr).strip()[-1000:]}")
    return str(runs[0].get("status", "")), str(runs[0].get("status-details", ""))


def follow_run(app: str, connection: str | None, run_config: list[str] = (),
               out=None, poll_seconds: float = 1.0, timeout: float | None = None) -> int:
    """Submit, stream the log to ``out`` (default stdout), return 0 if the run completed.

    Raises :class:`RunFailed` when the run failed or was stopped (the message is
    the ServerApp's), when it cannot be submitted (with the cause), or when it
    has not finished within ``timeout`` seconds.
    """
    out = sys.stdout if out is None else out
    env = flower_env(None)
    run_id = submit(app, connection, list(run_config), env)
    print(f"kernelscale: run {run_id} submitted; its log follows", file=out, flush=True)
    failure = ""
    log = subprocess.Popen([flwr_command(), "log", str(run_id),
                            *([connection] if connection else []), "--stream"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env, stdin=subprocess.DEVNULL)
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    try:
        for line in log.stdout:
            out.write(line)
            out.flush()
            if FAILED_MARK in line:
                failure = line.split(FAILED_MARK, 1)[1].strip()
            if deadline is not None and time.monotonic() > deadline:
                break
    finally:
        if log.poll() is None:
            log.terminate()
        log.wait()
        log.stdout.close()
    while True:  # the stream ends with the run; its status may lag by a poll
        status, details = run_status(run_id, connection, env)
        if status.startswith("finished"):
            break
        if deadline is not None and time.monotonic() > deadline:
            raise RunFailed(f"run {run_id} has not finished within {timeout:g} s "
                            f"(status {status}); `flwr stop {run_id}` stops it.")
        time.sleep(poll_seconds)
    if status == "finished:completed":
        print(f"kernelscale: run {run_id} {status}", file=out, flush=True)
        return 0
    raise RunFailed(f"run {run_id} {status}: "
                    + (failure or details or "see its log above (flwr log "
                       f"{run_id} --show)"))


def add_subcommand(subparsers) -> None:
    """Register ``flower run`` (as ``kernelscale flower run``) on an argparse subparsers."""
    flower = subparsers.add_parser(
        "flower", help="Flower federations: run an app and follow it",
        description="Commands for a Flower federation (see docs/flower.md).")
    sub = flower.add_subparsers(dest="flower_command", metavar="COMMAND", required=True,
                                help="run: submit a run and follow it")
    p = sub.add_parser(
        "run", help="submit a run, follow its log, exit non-zero if it fails",
        description="flwr run APP CONNECTION, then flwr log --stream, then flwr ls: exits 0 "
        "when the run finished as completed, 1 with the ServerApp's message when it failed "
        "or was stopped, 2 when it could not be submitted (with the cause: nothing "
        "listening, a certificate that does not verify...).")
    p.add_argument("app", metavar="APP", help="the Flower app folder (kernelscale flower-app "
                   "writes one)")
    p.add_argument("connection", metavar="CONNECTION", nargs="?", default=None,
                   help="a SuperLink connection of your Flower configuration "
                   "($FLWR_HOME/config.toml; default: its default connection)")
    p.add_argument("-c", "--run-config", action="append", default=[], metavar="CONFIG",
                   help="run-config overrides, as flwr run takes them ('k1=v1 k2=\"v2\"' or "
                   "a TOML file); repeatable")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the run to finish (default: no limit)")
    p.set_defaults(func=_run_command)


def _run_command(args) -> int:
    try:
        return follow_run(args.app, args.connection, args.run_config, timeout=args.timeout)
    except RunFailed as exc:
        print(f"kernelscale: {exc}", file=sys.stderr)
        return 2 if str(exc).startswith("`flwr run` could not submit") else 1


__all__ = ["FAILED_MARK", "RunFailed", "follow_run", "run_status", "submit"]
