"""The load balancer configurations of docs/deployment.md, made in one place: the tests run them.

:func:`haproxy_config` and :func:`nginx_config` write what the deployment page shows;
the tests start haproxy (and nginx, where it is installed) with exactly this text for
their loopback nodes, and a test checks that the page shows it for the example
addresses. What both say, and why:

- round robin, nothing sticky: every round of a 2026-07-28 conversation carries its
  state in its token, and tasks and round records are in Redis, so any node serves any
  request;
- health checks on ``GET /healthz``, so a node that stops answering leaves the rotation
  within about two checks (haproxy checks actively; open source nginx only notices failed
  requests); a check may take 3 s to be answered, so a node that is busy, not dead, stays
  in (with only the check interval as timeout, a saturated single node was taken out);
- a request is retried on another node only when it never reached one (the
  connection failed): a request a node received may have had effects, and the client
  decides whether to send it again;
- buffering off and long read timeouts, for ``subscriptions/listen`` streams (the nodes
  send a keep-alive comment every 15 s);
- a header naming the node that answered (haproxy ``X-Mrtr-Node``), which the tests read
  and an operator finds handy.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["EXAMPLE_NODES", "EXAMPLE_LISTEN", "haproxy_config", "nginx_config"]

EXAMPLE_LISTEN = ("0.0.0.0", 8000)
"""Where the example balancer listens."""

EXAMPLE_NODES = (("10.0.0.11", 8000), ("10.0.0.12", 8000), ("10.0.0.13", 8000))
"""The example nodes."""


def haproxy_config(listen: tuple[str, int], nodes: Sequence[tuple[str, int]], *, check_every: str = "1s") -> str:
    """An haproxy configuration balancing ``listen`` over ``nodes``, checking each every ``check_every``."""
    servers = "\n".join(f"    server node{number} {host}:{port} check"
                        for number, (host, port) in enumerate(nodes, start=1))
    return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 75s
    timeout server 75s
    timeout http-keep-alive 30s
    option http-keep-alive

frontend mcp
    bind {listen[0]}:{listen[1]}
    default_backend mrtr

backend mrtr
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz
    http-check expect status 200
    timeout check 3s
    default-server inter {check_every} fall 2 rise 2
    retry-on conn-failure
    retries 2
    option redispatch 1
    http-response set-header X-Mrtr-Node %[srv_name]
{servers}
"""


def nginx_config(listen: tuple[str, int], nodes: Sequence[tuple[str, int]]) -> str:
    """The ``http`` block's part for nginx balancing ``listen`` over ``nodes`` (include it in ``http { }``)."""
    servers = "\n".join(f"    server {host}:{port} max_fails=1 fail_timeout=2s;" for host, port in nodes)
    return f"""upstream mrtr {{
{servers}
    keepalive 64;
}}

server {{
    listen {listen[0]}:{listen[1]};

    location / {{
        proxy_pass http://mrtr;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $http_host;
        proxy_buffering off;
        proxy_read_timeout 75s;
        proxy_send_timeout 75s;
        proxy_next_upstream error;
        client_max_body_size 4m;
        add_header X-Mrtr-Node $upstream_addr always;
    }}
}}
"""
