"""The client the official conformance suite drives: ``conformance client --command ...``.

The suite starts a scenario server and runs this script with the server's URL as the
last argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` (some scenarios
pass more in ``MCP_CONFORMANCE_CONTEXT``, JSON). Everything goes through
:class:`mrtr.Client`; this script only decides what to call for each scenario.
Exit code 0 when the client did its part; the suite judges the rest.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import trio

import mrtr
from mrtr.cli.serve import example_arguments
from mrtr.client import ElicitationRequest


def _example(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return "x"
    if "default" in prop:
        return prop["default"]
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    for union in ("oneOf", "anyOf"):
        if isinstance(prop.get(union), list) and prop[union] and "const" in prop[union][0]:
            return prop[union][0]["const"]
    kind = prop.get("type")
    if kind == "array":
        options = (prop.get("items") or {}).get("enum") or [
            entry.get("const") for entry in (prop.get("items") or {}).get("anyOf") or []]
        return options[:1]
    return {"boolean": True, "integer": 1, "number": 1}.get(kind, "x")


def accept_everything(request: ElicitationRequest) -> dict[str, Any]:
    """Accept a form with an example value for every field (URL mode: consent)."""
    properties = (request.requested_schema or {}).get("properties") or {}
    return mrtr.accept({name: _example(prop) for name, prop in properties.items()})


CIMD_URL = "https://conformance-test.local/client-metadata.json"  # the client id the basic-cimd scenario expects


async def registered_issuer(url: str, context: dict[str, Any]) -> str:
    """The issuer the suite registered its client with: the context's, else the one its scenario server names.

    A deployment knows which authorization server its credential belongs to and says so
    (``issuer=``, ``mrtr call --issuer``): the client refuses a secret or key without it.
    The suite's scenarios pass only the id and the secret or key, and the scenario server
    is the suite's own, so this harness reads the issuer from that server's protected
    resource metadata first. Reading it from the server is exactly what the binding exists
    to prevent with a server one does not trust: only a harness may do it.
    """
    if context.get("issuer"):
        return str(context["issuer"])
    import httpx

    from mrtr.core.resource_urls import metadata_url, root_metadata_url

    async with httpx.AsyncClient(follow_redirects=False, timeout=10) as http:
        for where in (metadata_url(url), root_metadata_url(url)):
            response = await http.get(where)
            if response.status_code == 200:
                return str(response.json()["authorization_servers"][0])
    raise mrtr.ClientError(-32600, f"the scenario server at {url} publishes no protected resource metadata")


def authorizer(scenario: str, context: dict[str, Any], issuer: str | None) -> Any:
    """The OAuth flow a scenario calls for, from what the suite passed in ``MCP_CONFORMANCE_CONTEXT``."""
    from mrtr.client.oauth import AuthorizationCode, ClientCredentials
    from mrtr.client.tokens import MemoryTokenStore
    from tests.auth.idp import approve_in_browser  # the suite's authorization server approves at once

    store = MemoryTokenStore()
    if scenario.startswith("auth/client-credentials"):
        if context.get("private_key_pem"):
            return ClientCredentials(context["client_id"], private_key=context["private_key_pem"], issuer=issuer,
                                     signing_algorithm=context.get("signing_algorithm", "ES256"), store=store)
        return ClientCredentials(context["client_id"], client_secret=context["client_secret"], issuer=issuer,
                                 store=store)
    if scenario == "auth/pre-registration":
        return AuthorizationCode(client_id=context["client_id"], client_secret=context["client_secret"],
                                 issuer=issuer, open_url=approve_in_browser, store=store)
    return AuthorizationCode(client_metadata_url=CIMD_URL, open_url=approve_in_browser, store=store)


REGISTERED = ("auth/client-credentials", "auth/pre-registration")
"""The scenarios whose client comes with a credential registered with the suite's authorization server."""


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    client: mrtr.Client

    async def answer(request: ElicitationRequest) -> dict[str, Any]:
        if scenario == "sep-2322-client-request-state":
            # Another call between two rounds of a chain: it must carry none of the chain's state.
            await client.call_tool("test_mrtr_unrelated")
        return accept_everything(request)

    issuer = await registered_issuer(url, context) if scenario.startswith(REGISTERED) else None
    auth = authorizer(scenario, context, issuer) if scenario.startswith("auth/") else None
    client = mrtr.Client(url, on_elicit=answer, elicitation_modes=("form", "url"),
                         on_sample=lambda request: "conformance reply",
                         on_roots=lambda request: ["file:///tmp"], auth=auth)
    async with client:
        if scenario.startswith("auth/"):
            for tool in await client.list_tools():
                await client.call_tool(tool["name"], {})
            return
        if scenario == "request-metadata":
            await client.discover()
        tools = await client.list_tools()
        if scenario == "json-schema-ref-no-deref":
            return
        if context.get("toolCalls"):
            for call in context["toolCalls"]:
                await client.call_tool(call["name"], call.get("arguments") or {})
            return
        if scenario == "json-schema-2020-12-preservation":
            focal = next(tool for tool in tools if tool["name"] != "json_schema_echo")
            await client.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})
            return
        if scenario == "tools_call":
            await client.call_tool("add_numbers", {"a": 2, "b": 3})
            return
        for tool in tools:
            if tool["name"] == "test_mrtr_unrelated":
                continue
            await client.call_tool(tool["name"], example_arguments(tool.get("inputSchema")))
        if scenario == "http-standard-headers":
            for resource in (await client.list_resources())[:1]:
                await client.read_resource(resource["uri"])
            for prompt in (await client.list_prompts())[:1]:
                arguments = {argument["name"]: "x" for argument in prompt.get("arguments") or []}
                await client.get_prompt(prompt["name"], arguments)


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        trio.run(run, url, scenario, context)
    except mrtr.ClientError as error:
        print(f"conformance client: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
