"""How kernelscale reaches a SuperLink: Flower's configuration, TLS options, what answers.

A connection is Flower's own (``[superlink.<name>]`` in ``$FLWR_HOME/config.toml``:
``address``, ``root-certificates``, ``insecure``). :class:`FlowerCluster` writes
one for ``host:port`` and the CA certificate it is given, or uses a named one
of the user's; :class:`LocalFederation` writes one to itself. When ``flwr``
reports only that the SuperLink is "unavailable", :func:`probe_superlink` says
why (nothing listening, a certificate that does not verify, TLS on one side
only).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def flower_env(home: str | os.PathLike | None = None) -> dict:
    """Environment for Flower's commands: no telemetry, no update checks, ``FLWR_HOME``."""
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               PYTHONUNBUFFERED="1")
    if home is not None:
        env["FLWR_HOME"] = str(home)
    return env


def connection_toml(name: str, address: str, root_certificates=None,
                    insecure: bool = False) -> str:
    """A Flower configuration (``$FLWR_HOME/config.toml``) with one default connection."""
    lines = ["[superlink]", f'default = "{name}"', "", f"[superlink.{name}]",
             f'address = "{address}"']
    if root_certificates is not None:
        path = str(Path(root_certificates).resolve()).replace("\\", "\\\\")
        lines.append(f'root-certificates = "{path}"')
    lines.append(f"insecure = {str(bool(insecure)).lower()}")
    return "\n".join(lines) + "\n"


def check_tls_options(superlink, connection, root_certificates, insecure) -> bool:
    """Refuse contradictory connection options; return ``insecure`` (None: decide)."""
    if (superlink is None) == (connection is None):
        raise ValueError("Give the SuperLink's 'host:port' or connection='<name>' of a "
                         "connection in your Flower configuration, not both or neither.")
    if connection is not None and (root_certificates is not None or insecure is not None):
        raise ValueError(f"connection={connection!r} takes its TLS settings from your Flower "
                         "configuration; do not also give root_certificates or insecure.")
    if root_certificates is not None:
        if insecure:
            raise ValueError("root_certificates verifies a TLS SuperLink; it cannot be used "
                             "with insecure=True.")
        if not Path(root_certificates).is_file():
            raise FileNotFoundError(f"root_certificates: no such file {root_certificates!r} "
                                    "(the CA certificate of the SuperLink, PEM).")
        return False
    return True if insecure is None else bool(insecure)


def probe_superlink(address: str, root_certificates=None, insecure: bool = False,
                    timeout: float = 5.0) -> str:
    """One line on what answers at ``address``: the TLS or connection error Flower hides."""
    import socket
    import ssl

    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        raw = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as exc:
        return f"nothing answers at {address}: {exc}"
    with raw:
        context = ssl.create_default_context(
            cafile=None if root_certificates is None else str(root_certificates))
        try:
            with context.wrap_socket(raw, server_hostname=host):
                speaks_tls = True
        except ssl.SSLCertVerificationError as exc:
            return (f"the SuperLink's TLS certificate was not verified ({exc.verify_message}; "
                    f"{exc.reason}): give root_certificates, the CA certificate that signed it")
        except (ssl.SSLError, OSError):
            speaks_tls = False
    if insecure and speaks_tls:
        return ("the SuperLink speaks TLS and this connection is insecure: give "
                "root_certificates (the CA certificate) instead of insecure=True")
    if not insecure and not speaks_tls:
        return ("the SuperLink does not speak TLS (started with --insecure?): connect with "
                "insecure=True, on localhost only")
    return f"a TLS handshake with {address} works; see Flower's output"


def unreachable(address: str | None, root_certificates=None, insecure: bool = False) -> str:
    """Why the SuperLink at ``address`` cannot be used with these TLS settings (nothing
    listening, a certificate that does not verify, TLS on one side only); ``""`` when a
    connection can be made (or there is no address to check)."""
    if not address:
        return ""
    found = probe_superlink(address, root_certificates, bool(insecure))
    return "" if found.startswith("a TLS handshake") else found


class NodeErrors:
    """The error messages Flower logs in this process (its ``flwr`` logger), kept to say
    afterwards why a SuperNode exited: ``with NodeErrors() as errors: ...``."""

    def __init__(self):
        import logging

        self.messages: list[str] = []
        outer = self

        class Keep(logging.Handler):
            def emit(self, record) -> None:
                outer.messages.append(record.getMessage())

        self._handler = Keep(level=logging.ERROR)

    def __enter__(self) -> NodeErrors:
        import logging

        logging.getLogger("flwr").addHandler(self._handler)
        return self

    def __exit__(self, *exc) -> None:
        import logging

        logging.getLogger("flwr").removeHandler(self._handler)


#: What Flower 1.42's SuperNode logs when it cannot join its SuperLink.
NOT_CONNECTED = "could not establish a connection to the SuperLink"


def explain_node_failure(argv: list[str], messages=()) -> str:
    """One line on why a SuperNode started with ``argv`` (``flower-supernode``'s arguments)
    could not join its SuperLink (``messages``: what Flower logged, which must say so):
    what answers there, and an unregistered key when the SuperLink answers and its
    certificate verifies; ``""`` for any other exit."""
    if not any(NOT_CONNECTED in message for message in messages):
        return ""

    def option(name: str):
        for i, arg in enumerate(argv):
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

    address = option("--superlink")
    if not address:
        return ""
    found = probe_superlink(address, option("--root-certificates"), "--insecure" in argv)
    if not found.startswith("a TLS handshake"):
        return f"kernelscale: the SuperNode could not join {address}: {found}."
    if option("--auth-supernode-private-key") is None:
        return f"kernelscale: the SuperNode could not join {address} ({found})."
    return (f"kernelscale: the SuperLink at {address} answers and its certificate verifies, "
            "so it refused this node's key: the operator registers the node's public key "
            "(flwr supernode register <key>.pub <connection>) before the node starts.")


def named_connection(name: str | None) -> tuple:
    """``(address, root-certificates, insecure)`` of a connection in the Flower configuration
    (``None``: its default connection)."""
    import tomllib

    home = Path(os.environ.get("FLWR_HOME", Path.home() / ".flwr"))
    try:
        links = tomllib.loads((home / "config.toml").read_text())["superlink"]
        config = links[links["default"] if name is None else name]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None, None, False
    return (config.get("address"), config.get("root-certificates"),
            bool(config.get("insecure", False)))


def flwr_command() -> str:
    """The ``flwr`` command beside this Python, else on PATH."""
    candidate = Path(sys.executable).parent / "flwr"
    return str(candidate) if candidate.exists() else (shutil.which("flwr") or "flwr")


__all__ = ["NOT_CONNECTED", "NodeErrors", "check_tls_options", "connection_toml",
           "explain_node_failure", "flower_env", "flwr_command", "named_connection",
           "probe_superlink", "unreachable"]
