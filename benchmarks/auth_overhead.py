"""What bearer authentication adds to a request, against a baseline measured in the same run.

Usage: ``python benchmarks/auth_overhead.py [--requests N]`` (needs the ``auth`` extra)

Measured in process, without HTTP, keys already held (the JWKS cache is warm, as it
is for every request but the first after a rotation), microseconds per request,
median of several repeats:

- ``tools/list``: ``Server.handle`` of a ``tools/list`` on an unprotected server (the baseline);
- ``verify RS256|ES256|EdDSA``: ``ResourceServer.authenticate`` of a header with a
  token signed with that algorithm, seen for the first time (``cache_ttl=0``: parse,
  header policy, signature, claims);
- ``repeat ES256``: the same token again, as a client sends it with every request
  (the verified-token cache answers);
- ``protected tools/list (ES256)``: authenticate a repeated token, then the same ``handle``.

The ratios printed are each against the baseline.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402
from joserfc import jwk, jwt  # noqa: E402

from mrtr.auth import JWTVerifier, ResourceServer  # noqa: E402
from mrtr.server import Server  # noqa: E402
from mrtr.core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION  # noqa: E402

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
SECRET = base64.b64encode(bytes(32)).decode()
MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
           "params": {"_meta": {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: {}}}}


def keys() -> dict[str, Any]:
    return {
        "RS256": jwk.RSAKey.import_key(rsa.generate_private_key(public_exponent=65537, key_size=2048),
                                       parameters={"kid": "rs"}),
        "ES256": jwk.ECKey.import_key(ec.generate_private_key(ec.SECP256R1()), parameters={"kid": "es"}),
        "EdDSA": jwk.OKPKey.import_key(ed25519.Ed25519PrivateKey.generate(), parameters={"kid": "ed"}),
    }


def token(alg: str, key: Any) -> str:
    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "c", "scope": "mcp:read",
              "exp": int(time.time()) + 3600}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jwt.encode({"alg": alg, "kid": key.kid}, claims, key, algorithms=[alg])


def server(auth: ResourceServer | None) -> Server:
    built = Server("bench", secret=SECRET, auth=auth)
    for index in range(5):
        built.tool(lambda: "ok", name=f"tool_{index}")
    return built


async def per_request(fn: Any, n: int) -> float:
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            await fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(samples)


async def main(n: int) -> None:
    material = keys()
    public = {"keys": [key.as_dict(private=False) | {"kid": key.kid} for key in material.values()]}
    rs = ResourceServer(JWTVerifier(public_key=public, issuer=ISSUER, audience=RESOURCE), resource=RESOURCE,
                        authorization_servers=[ISSUER], required_scopes=["mcp:read"])
    cold = ResourceServer(JWTVerifier(public_key=public, issuer=ISSUER, audience=RESOURCE, cache_ttl=0),
                          resource=RESOURCE, authorization_servers=[ISSUER], required_scopes=["mcp:read"])
    plain, protected = server(None), server(rs)
    results: dict[str, float] = {}
    results["tools/list"] = await per_request(lambda: plain.handle(MESSAGE), n)
    for alg, key in material.items():
        header = [f"Bearer {token(alg, key)}"]
        results[f"verify {alg}"] = await per_request(lambda header=header: cold.authenticate(header), n)
    header = [f"Bearer {token('ES256', material['ES256'])}"]
    results["repeat ES256"] = await per_request(lambda: rs.authenticate(header), n)

    async def protected_list() -> None:
        await protected.handle(MESSAGE, auth=await rs.authenticate(header))

    results["protected tools/list (ES256)"] = await per_request(protected_list, n)
    base = results["tools/list"]
    for name, value in results.items():
        print(f"{name:32} {value:9.1f} µs   {value / base:6.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    trio.run(main, parser.parse_args().requests)
