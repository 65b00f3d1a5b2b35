"""Transports: bytes to JSON-RPC messages and back, thin, on trio.

:mod:`~mrtr.transports.shared` holds what every transport shares on trio (worker threads
for blocking handlers, the dispatcher's lifecycle, the notification hub);
:mod:`~mrtr.transports.outgoing` what goes into every message a transport writes (the
notification sink, the encoding fallback, the access record); :mod:`~mrtr.transports.http`
is Streamable HTTP (the native server, the ASGI adapter, workers);
:mod:`~mrtr.transports.stdio` is stdio (both eras); :mod:`~mrtr.transports.pending` the
server-to-client requests of a legacy session waiting for answers, which every
transport carrying such sessions shares; :mod:`~mrtr.transports.logs` and
:mod:`~mrtr.transports.telemetry` record each request. A transport reaches the server
only through :class:`mrtr.core.jsonrpc.Dispatcher`.
"""
