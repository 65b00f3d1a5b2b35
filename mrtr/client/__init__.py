"""``mrtr.Client``: call MCP servers of both eras and answer their questions. See ``docs/client.md``.

Targets: a URL (Streamable HTTP; needs the ``client`` extra for httpx), a server object
in process, or a subprocess (:meth:`Client.stdio`). Tasks are driven through
:class:`TaskHandle`; OAuth lives in :mod:`mrtr.client.oauth`, its token store in
:mod:`mrtr.client.tokens`. MCP Apps: :class:`ToolInfo` (what :meth:`Client.list_tools` returns)
and :class:`UiResource` (what :meth:`Client.read_ui` returns), in :mod:`mrtr.client.apps`.
"""

from ..core.answers import accept, cancel, decline, roots, sampled
from .apps import ToolInfo, UiResource
from .errors import ClientError, ConnectionFailed, RoundLimitExceeded, StateLost, Unreadable
from .requests import ElicitationRequest, InputRequest, RootsRequest, SamplingRequest
from .client import CLIENT_DEADLINE, DEFAULT_DEADLINE, DEFAULT_MAX_ROUNDS, Client, EraMemory
from .results import PromptResult, ResourceResult, ToolResult
from .tasks import TaskCancelled, TaskHandle, TaskStatus

__all__ = [
    "CLIENT_DEADLINE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_ROUNDS",
    "Client",
    "ClientError",
    "ConnectionFailed",
    "ElicitationRequest",
    "EraMemory",
    "InputRequest",
    "PromptResult",
    "ResourceResult",
    "RootsRequest",
    "RoundLimitExceeded",
    "SamplingRequest",
    "StateLost",
    "TaskCancelled",
    "TaskHandle",
    "TaskStatus",
    "ToolInfo",
    "ToolResult",
    "UiResource",
    "Unreadable",
    "accept",
    "cancel",
    "decline",
    "roots",
    "sampled",
]
