"""Timestamps of a Flower round's hops, for ``benchmarks/flower_rounds.py --profile``.

Put this folder first on ``PYTHONPATH`` with ``KERNELSCALE_TRACE=<file>``: every
Python process of the federation (SuperLink, ServerApp, SuperNodes, their
ClientApp processes) then appends one line per event to the file, ``<unix time>
<pid> <event> <seconds>``, from wrappers around Flower's and kernelscale's own
functions (nothing else changes). Without ``KERNELSCALE_TRACE`` it does nothing.
Not part of the library: a measuring tool.
"""

import functools
import importlib.abc
import importlib.util
import os
import sys
import time

TRACE = os.environ.get("KERNELSCALE_TRACE")


def _install(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(event: str, start: float, seconds: float = 0.0) -> None:
        os.write(fd, f"{start:.6f} {os.getpid()} {event} {seconds:.6f}\n".encode())

    def timed(owner, name: str, event: str) -> None:
        function = getattr(owner, name, None)
        if function is None or getattr(function, "_traced", False):
            return

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            start = time.time()
            try:
                return function(*args, **kwargs)
            finally:
                log(event, start, time.time() - start)

        wrapper._traced = True
        setattr(owner, name, wrapper)

    def pulled_message(owner, name: str, event: str) -> None:
        """The node's pull of the SuperLink: logged only when it brought a message."""
        function = getattr(owner, name)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            start = time.time()
            run_id = function(*args, **kwargs)
            if run_id is not None:
                log(event, start, time.time() - start)
            return run_id

        setattr(owner, name, wrapper)

    def http(module) -> None:
        send = module.Client.send

        def traced_send(self, request, *args, **kwargs):
            start = time.time()
            try:
                return send(self, request, *args, **kwargs)
            finally:
                log("http" + request.url.path.replace(" ", "_"), start, time.time() - start)

        module.Client.send = traced_send

    hooks = {
        "httpx": http,
        "flwr.supernode.start_client_internal": lambda m: (
            pulled_message(m, "_pull_and_store_message", "node.pull"),
            timed(m, "_push_messages", "node.push")),
        "flwr.superlink.grid.http_grid": lambda m: (
            timed(m.HttpGrid, "push_messages", "grid.push"),
            timed(m.HttpGrid, "pull_messages", "grid.pull")),
        "flwr.supernode.runtime.run_clientapp": lambda m: (
            timed(m, "push_message", "app.push_message"),
            timed(m, "push_task_output", "app.push_output")),
        "kernelscale.backends.flower.node": lambda m: timed(m, "run_step", "app.step"),
        "flwr.supercore.inflatable.inflatable_utils": lambda m: timed(
            m, "pull_and_inflate_object_from_tree", "app.pull_message"),
    }

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname not in hooks:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(fullname)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            execute = spec.loader.exec_module

            def exec_module(module, execute=execute, name=fullname):
                execute(module)
                hooks[name](module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())
    sys.modules["builtins"].__dict__["_kernelscale_trace"] = log


if TRACE:
    _install(TRACE)
