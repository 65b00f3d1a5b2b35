"""The fixture server for the official MCP conformance suite, and the tools to run the suite.

- ``server.py``: every fixture the 2026-07-28 server scenarios call (``server``,
  ``lenient_server``, ``make_server(answers)``);
- ``asgi.py``: the same servers as ASGI applications, for hypercorn's trio worker;
- ``run.py``: runs the suite against a URL, summarises ``checks.json``, and renders
  ``docs/conformance.md`` from several labelled runs.

``.ci/conformance.sh`` ties them together.
"""
