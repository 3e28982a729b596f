"""``flower-superlink`` with the Fleet API alone on the parties' address.

Flower 1.42 serves its three APIs on one HTTP port (``--host``/``--port``; the
old ``--fleet-api-address`` and ``--control-api-address`` are deprecated and do
nothing): the Fleet API that the SuperNodes use, the Control API that registers
node keys, lists runs, reads their logs and submits runs, and the Runtime API
that the SuperLink's own SuperExec and ServerApps use. Whoever reaches that port
and trusts the CA is an operator, and open-source Flower has no account
authentication for the Control API. So this launcher runs the same SuperLink
(Flower's own app, state and lifespan; every ``flower-superlink`` argument) on
two addresses:

* ``--host``/``--port``: every API, for the operator (the loopback interface, or
  an operator-only network; the data scientist reaches it through an SSH tunnel);
  the SuperExec dials it, so the certificate must name it (``localhost``);
* ``--fleet-host``/``--fleet-port``: the Fleet API only (``/v1/fleet/...`` and
  ``/health``), for the parties, on the host name in the certificate; any other
  path answers 404.

::

    python -m kernelscale.backends.flower.superlink --ssl-ca-certfile ca.crt \\
        --ssl-certfile server.pem --ssl-keyfile server.key --enable-supernode-auth \\
        --host localhost --port 9093 --fleet-host superlink.example.org --fleet-port 9092

Without ``--fleet-host`` it is ``flower-superlink`` unchanged.
"""

from __future__ import annotations

import asyncio
import sys

#: The paths the parties' address serves (the Fleet API, and the health check).
FLEET_PATHS = ("/v1/fleet/", "/health")


class FleetOnly:
    """An ASGI app that passes the Fleet API's requests to ``app`` and answers 404 to the rest."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":  # the operator's server runs the lifespan
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if scope["type"] == "http" and (path.startswith(FLEET_PATHS[0])
                                        or path == FLEET_PATHS[1]):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return None
        body = (b"Not served here: this address serves the Fleet API to the SuperNodes; "
                b"the Control API is the operator's.\n")
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return None


def _take(argv: list[str], name: str) -> tuple[str | None, list[str]]:
    """``(value of --name, argv without it)``."""
    rest, value, skip = [], None, False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == name:
            if i + 1 >= len(argv):
                raise SystemExit(f"{name} needs a value")
            value, skip = argv[i + 1], True
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return value, rest


def _servers(config, fleet_host: str, fleet_port: int):
    """Two uvicorn servers of Flower's SuperLink app: every API, and the Fleet API alone."""
    import uvicorn
    from flwr.supercore.http_logging import get_uvicorn_log_config
    from flwr.supercore.logger import console_handler
    from flwr.superlink.cli.flower_superlink import SuperLinkLifespan
    from flwr.superlink.main import create_app

    app = create_app(config, SuperLinkLifespan)
    tls = {"ssl_keyfile": config.ssl_keyfile, "ssl_certfile": config.ssl_certfile}
    log_config = get_uvicorn_log_config(console_handler.level)
    everything = uvicorn.Server(uvicorn.Config(
        app, host=config.host, port=config.port, access_log=True, log_config=log_config,
        workers=1, **tls))
    fleet = uvicorn.Server(uvicorn.Config(
        FleetOnly(app), host=fleet_host, port=fleet_port, access_log=True, lifespan="off",
        log_config=log_config, workers=1, **tls))
    return everything, fleet


async def _serve(everything, fleet) -> None:
    """Serve both until a signal: the operator's server owns the lifespan and the signals
    (uvicorn's), and stops the Fleet server with it."""
    handle_exit = everything.handle_exit

    def both(sig, frame):
        fleet.should_exit = True
        handle_exit(sig, frame)

    everything.handle_exit = both
    fleet_task = asyncio.create_task(fleet._serve())
    try:
        await everything.serve()
    finally:
        fleet.should_exit = True
        await fleet_task


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fleet_host, argv = _take(argv, "--fleet-host")
    fleet_port, argv = _take(argv, "--fleet-port")
    sys.argv = ["flower-superlink", *argv]
    if fleet_host is None:
        from flwr.superlink.cli.flower_superlink import flower_superlink

        return flower_superlink() or 0
    try:
        from flwr.superlink.cli.flower_superlink import _parse_superlink_lifespan_config
    except ImportError as exc:
        raise SystemExit("--fleet-host needs the HTTP SuperLink of Flower 1.42 "
                         f"({exc}); run flower-superlink instead.") from None
    from flwr.supercore.update_check import warn_if_flwr_update_available

    warn_if_flwr_update_available(process_name="flower-superlink")
    config = _parse_superlink_lifespan_config()
    if config.simulation:
        raise SystemExit("--fleet-host: a simulation SuperLink has no Fleet API.")
    everything, fleet = _servers(config, fleet_host, int(fleet_port or 9092))
    asyncio.run(_serve(everything, fleet))
    return 0


if __name__ == "__main__":
    sys.exit(main())
