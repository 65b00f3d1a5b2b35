"""Redis as it is deployed, started by the tests on loopback: a 3-primary Cluster, a primary with a
replica watched by a Sentinel, and a Redis that speaks TLS only, with a certificate made here."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..conftest import stop
from ..tasks.redis_server import free_port, redis_server

__all__ = ["redis_cluster", "redis_sentinel", "redis_tls", "self_signed"]


def _binary(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, f"{name} is not installed (apt-get install redis-server)"
    return found


def _wait(command: list[str], wanted: str, timeout: float = 20) -> str:
    """Run ``command`` until its output contains ``wanted`` (a deadline, not a fixed pause)."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
        if wanted in done.stdout:
            return done.stdout
        if time.monotonic() > deadline:
            raise AssertionError(f"{' '.join(command)} never said {wanted!r}: {done.stdout}{done.stderr}")
        time.sleep(0.05)


def _start(arguments: list[str], log: Path) -> subprocess.Popen[bytes]:
    """redis-server with ``arguments``, its output in ``log`` (redis-server logs to stdout)."""
    with open(log, "wb") as output:
        return subprocess.Popen([_binary("redis-server"), *arguments], stdout=output, stderr=subprocess.STDOUT)


def _cluster_port() -> int:
    """A free port whose cluster bus port (the port + 10000) is free and valid too."""
    import socket

    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@contextmanager
def redis_cluster(workdir: Path, primaries: int = 3) -> Iterator[tuple[str, list[int]]]:
    """``primaries`` redis-server processes made one Redis Cluster (``redis-cli --cluster create``);
    the ``redis+cluster://`` URL naming the first node only (the others are discovered), and the ports."""
    ports = [_cluster_port() for _ in range(primaries)]
    with ExitStack() as stack:
        for port in ports:
            directory = workdir / f"cluster-{port}"
            directory.mkdir()
            process = _start(["--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                              "--cluster-config-file", str(directory / "nodes.conf"), "--dir", str(directory),
                              "--save", "", "--appendonly", "no"], directory / "log")
            stack.callback(stop, process, 5)
            _wait([_binary("redis-cli"), "-p", str(port), "PING"], "PONG")
        subprocess.run([_binary("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{port}" for port in ports),
                        "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, timeout=60, check=True)
        for port in ports:
            _wait([_binary("redis-cli"), "-p", str(port), "CLUSTER", "INFO"], "cluster_state:ok")
        yield f"redis+cluster://127.0.0.1:{ports[0]}", ports


@contextmanager
def redis_sentinel(workdir: Path, service: str = "mymaster") -> Iterator[tuple[str, int, int, int]]:
    """A primary, a replica of it, and one Sentinel watching them (quorum 1, a failover in about a
    second); the ``redis+sentinel://`` URL and the primary's, the replica's and the Sentinel's ports."""
    with ExitStack() as stack:
        _url, _primary = stack.enter_context(redis_server(workdir=str(_mkdir(workdir / "primary"))))
        primary = int(_url.rsplit(":", 1)[1].split("/")[0])
        replica = free_port()
        process = _start(["--port", str(replica), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1", str(primary),
                          "--dir", str(_mkdir(workdir / "replica")), "--save", "", "--appendonly", "no"],
                         workdir / "replica" / "log")
        stack.callback(stop, process, 5)
        _wait([_binary("redis-cli"), "-p", str(replica), "INFO", "replication"], "master_link_status:up")
        sentinel = free_port()
        config = workdir / "sentinel.conf"
        config.write_text(f"port {sentinel}\nbind 127.0.0.1\ndir {workdir}\n"
                          f"sentinel monitor {service} 127.0.0.1 {primary} 1\n"
                          f"sentinel down-after-milliseconds {service} 1000\n"
                          f"sentinel failover-timeout {service} 5000\n")
        process = _start([str(config), "--sentinel"], workdir / "sentinel.log")
        stack.callback(stop, process, 5)
        _wait([_binary("redis-cli"), "-p", str(sentinel), "SENTINEL", "replicas", service], str(replica))
        yield f"redis+sentinel://127.0.0.1:{sentinel}/{service}/0", primary, replica, sentinel


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def self_signed(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and 127.0.0.1, and its key, as PEM files."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@contextmanager
def redis_tls(workdir: Path) -> Iterator[tuple[int, Path]]:
    """A redis-server that speaks TLS only (``--port 0 --tls-port``), with a self-signed certificate;
    its port and the certificate (the CA a client trusts)."""
    certificate, key = self_signed(workdir)
    port = free_port()
    process = _start(["--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--tls-cert-file",
                      str(certificate), "--tls-key-file", str(key), "--tls-ca-cert-file", str(certificate),
                      "--tls-auth-clients", "no", "--dir", str(workdir), "--save", "", "--appendonly", "no"],
                     workdir / "tls.log")
    try:
        _wait([_binary("redis-cli"), "-p", str(port), "--tls", "--cacert", str(certificate), "PING"], "PONG")
        yield port, certificate
    finally:
        stop(process, 5)
