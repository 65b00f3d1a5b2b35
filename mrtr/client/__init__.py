"""``mrtr.Client``: call MCP 2026-07-28 servers and answer their questions. See ``docs/client.md``.

Targets: a URL (Streamable HTTP; needs the ``client`` extra for httpx), a server object
in process, or a subprocess (:meth:`Client.stdio`).
"""

from ..core.answers import accept, cancel, decline, roots, sampled
from .errors import ClientError, RoundLimitExceeded
from .requests import ElicitationRequest, InputRequest, RootsRequest, SamplingRequest
from .session import (CLIENT_DEADLINE, DEFAULT_DEADLINE, DEFAULT_MAX_ROUNDS, Client, PromptResult, ResourceResult,
                      ToolResult)

__all__ = [
    "CLIENT_DEADLINE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_ROUNDS",
    "Client",
    "ClientError",
    "ElicitationRequest",
    "InputRequest",
    "PromptResult",
    "ResourceResult",
    "RootsRequest",
    "RoundLimitExceeded",
    "SamplingRequest",
    "ToolResult",
    "accept",
    "cancel",
    "decline",
    "roots",
    "sampled",
]
