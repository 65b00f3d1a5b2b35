"""Transports: bytes to JSON-RPC messages and back, thin, on trio.

:mod:`~mrtr.transports.shared` holds what every transport shares on trio (worker threads
for blocking handlers, the dispatcher's lifecycle, the notification hub);
:mod:`~mrtr.transports.outgoing` what goes into every message a transport writes (the
notification sink, the encoding fallback, the access record); :mod:`~mrtr.transports.http`
is Streamable HTTP (the native server, the ASGI adapter, workers);
:mod:`~mrtr.transports.stdio` is stdio; :mod:`~mrtr.transports.logs` and
:mod:`~mrtr.transports.telemetry` record each request. A transport reaches the server
only through :class:`mrtr.core.jsonrpc.Dispatcher`.
"""
