"""Throwaway certificates and keys for a secure Flower federation on one machine.

:class:`~kernelscale.backends.flower.local.LocalFederation` with ``tls=True``
makes a certificate authority and a server certificate for the SuperLink, and
with ``node_auth=True`` one key pair per SuperNode, with the ``cryptography``
package that Flower itself depends on. A real deployment makes them with its own
CA (``docs/flower.md`` gives the ``openssl`` and ``ssh-keygen`` commands); these
are for tests and demos: the CA's key is thrown away with the folder.

* ``ca.crt``: the CA certificate, what every client of the SuperLink trusts
  (``--root-certificates``, ``root-certificates`` of a Flower connection);
* ``server.pem`` / ``server.key``: the SuperLink's certificate, valid for
  ``localhost`` and ``127.0.0.1`` (``--ssl-certfile`` / ``--ssl-keyfile``,
  with ``--ssl-ca-certfile ca.crt``);
* ``node-<i>`` / ``node-<i>.pub``: a SuperNode's NIST P-384 key pair in OpenSSH
  format (``--auth-supernode-private-key``; the public key is what the
  operator registers with ``flwr supernode register``).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path


def _write_private(path: Path, data: bytes) -> Path:
    """Write a secret readable by this user only."""
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    path.write_bytes(data)
    return path


def make_tls_files(folder, hosts=("localhost", "127.0.0.1"), days: int = 2) -> dict[str, Path]:
    """A CA and a server certificate signed by it: ``{"ca", "cert", "key"}`` paths in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    def name(common: str):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_cert = (x509.CertificateBuilder()
               .subject_name(name("kernelscale throwaway CA")).issuer_name(name("kernelscale "
                                                                               "throwaway CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                            crl_sign=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP384R1())
    cert = (x509.CertificateBuilder()
            .subject_name(name(str(hosts[0]))).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = {"ca": folder / "ca.crt", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca_cert.public_bytes(pem))
    paths["cert"].write_bytes(cert.public_bytes(pem))
    _write_private(paths["key"], key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


def make_node_key(folder, name: str) -> tuple[Path, Path]:
    """A SuperNode's P-384 key pair in OpenSSH format: ``(private, public)`` paths."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    private = _write_private(folder / name, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()))
    public = folder / f"{name}.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    return private, public


__all__ = ["make_node_key", "make_tls_files"]
