"""An official Python SDK 2.3 server (``mcp`` 2.3.0 ``MCPServer``) behind OAuth, for mrtr.Client to authorize against.

Runs in ``.cache/interop-venv``: ``python sdk_auth_server.py PORT ISSUER PUBLIC_KEY_PEM_FILE``
serves stateless Streamable HTTP on 127.0.0.1:PORT/mcp as a protected resource: the SDK
publishes the protected resource metadata naming ISSUER and answers 401 with a
``resource_metadata`` challenge; tokens are JWTs signed by ISSUER's key, checked here
with PyJWT (which the SDK depends on) for issuer, audience (this endpoint) and expiry.
``mcp:read`` is required for everything; ``write`` needs ``mcp:write`` too.
"""

from __future__ import annotations

import sys

import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer


class Verifier:
    """Checks the loopback provider's JWTs: RS256, issuer, audience, expiry."""

    def __init__(self, public_key: str, issuer: str, audience: str) -> None:
        self.public_key, self.issuer, self.audience = public_key, issuer, audience

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"], audience=self.audience,
                                issuer=self.issuer)
        except jwt.PyJWTError:
            return None
        return AccessToken(token=token, client_id=str(claims.get("client_id", "")), scopes=str(
            claims.get("scope", "")).split(), expires_at=claims.get("exp"), resource=self.audience,
            subject=claims.get("sub"))


def main() -> None:
    port, issuer, key_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    url = f"http://127.0.0.1:{port}/mcp"
    with open(key_file, encoding="utf-8") as file:
        public_key = file.read()
    app = MCPServer("sdk-auth", token_verifier=Verifier(public_key, issuer, url),
                    auth=AuthSettings(issuer_url=issuer, resource_server_url=url, required_scopes=["mcp:read"],
                                      validate_token_resource=True))

    @app.tool()
    def whoami() -> str:
        """The client the token was issued to."""
        token = get_access_token()
        return f"client {token.client_id if token else '?'} with {' '.join(token.scopes) if token else ''}"

    app.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)


if __name__ == "__main__":
    main()
