"""The MCP 2026-07-28 wire types as msgspec Structs.

Every class mirrors the ``$defs`` entry of the same name in the official ``schema.json``:
attribute names are snake_case and travel as camelCase, the ``_meta`` member travels under
its exact name, optional members default to ``None`` (or ``msgspec.UNSET`` where ``null``
is a legal value) and are left out of the JSON when unset. Members the schema does not name
are ignored on read, so newer or older peers can be decoded.

Three places need more than msgspec's built-in dispatch, because the wire gives no tag:

* ``ElicitRequest.params`` is form or URL parameters, told apart by ``mode``; a missing
  ``mode`` means form. The field is declared ``Any`` and ``__post_init__`` turns the decoded
  object into a typed Struct through :func:`decode_elicit_params`.
* ``ReadResourceResult.contents`` items and ``EmbeddedResource.resource`` are text or blob
  contents, told apart by which of ``text``/``blob`` is present
  (:func:`decode_resource_contents`), the same way.
* ``InputResponses`` values carry no discriminator at all; the runtime decodes each one
  against the request it answers with :func:`mrtr.core.kinds.decode_input_response`,
  which finds the answer type in the table of request kinds.

Results (``CallToolResult`` and friends) always emit ``resultType``: the field is filled by a
default factory, which ``omit_defaults`` never elides. A result decoded without ``resultType``
reads as ``"complete"``, as the spec tells clients to assume. The JSON-RPC ``jsonrpc: "2.0"``
member works the same way.

Why the server still reads request params by hand: this module is a catalogue of the whole
schema, used to decode answers that have no discriminator (through :mod:`mrtr.core.kinds`), to type
what handlers may return (``CallToolResult``, ``GetPromptResult``, ...), by the client, and by
the tests that check every message against ``schema.json``. The server's envelope and
``tools/call`` checks, and the ledger's check of an elicitation answer, stay hand-written
because their error messages name the exact member and the fix (``inputResponses key "k":
"action" must be one of accept, decline, cancel``); a Struct decode would report msgspec's
generic path instead, and decoding a whole request into Structs first would cost every call
for members the server never reads.

This module does no I/O and imports nothing from trio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from .jsonrpc import JSONRPC_VERSION, RequestId  # re-exported: both belong to the framing
from .jsonrpc import encode  # re-exported: one encoder for Structs and builtins alike

__all__ = [
    # constants
    "PROTOCOL_VERSION",
    "JSONRPC_VERSION",
    "JSONRPCVersion",
    "RESULT_TYPE_COMPLETE",
    "RESULT_TYPE_INPUT_REQUIRED",
    "META_PROTOCOL_VERSION",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "META_PROGRESS_TOKEN",
    "TASKS_EXTENSION",
    # scalar aliases
    "Role",
    "LoggingLevel",
    "CacheScope",
    "RequestId",
    "ProgressToken",
    # metadata
    "Icon",
    "Implementation",
    "Annotations",
    # content
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceLink",
    "EmbeddedResource",
    "TextResourceContents",
    "BlobResourceContents",
    "ResourceContents",
    "ToolUseContent",
    "ToolResultContent",
    "ContentBlock",
    "SamplingMessageContentBlock",
    "AnyContentBlock",
    # sampling
    "SamplingMessage",
    "ModelHint",
    "ModelPreferences",
    "ToolChoice",
    "CreateMessageRequestParams",
    "CreateMessageRequest",
    "CreateMessageResult",
    # roots
    "Root",
    "ListRootsRequest",
    "ListRootsResult",
    # elicitation
    "ElicitRequestFormParams",
    "ElicitRequestURLParams",
    "ElicitRequestParams",
    "ElicitRequest",
    "ElicitResult",
    # MRTR
    "InputRequest",
    "InputRequests",
    "InputResponse",
    "InputResponses",
    "InputRequiredResult",
    # request params
    "RequestParams",
    "PaginatedRequestParams",
    "CallToolRequestParams",
    "GetPromptRequestParams",
    "ReadResourceRequestParams",
    "PromptReference",
    "ResourceTemplateReference",
    "CompletionArgument",
    "CompletionContext",
    "CompleteRequestParams",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
    # results
    "CallToolResult",
    "PromptMessage",
    "GetPromptResult",
    "ReadResourceResult",
    "Completion",
    "CompleteResult",
    "ClientCapabilities",
    "ServerCapabilities",
    "ToolAnnotations",
    "Tool",
    "PromptArgument",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "ListToolsResult",
    "ListPromptsResult",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "DiscoverResult",
    "SubscriptionsListenResult",
    # notifications
    "NotificationParams",
    "ProgressNotificationParams",
    "LoggingMessageNotificationParams",
    "CancelledNotificationParams",
    "ResourceUpdatedNotificationParams",
    "SubscriptionsAcknowledgedNotificationParams",
    # JSON-RPC
    "ErrorObject",
    "JSONRPCRequest",
    "JSONRPCNotification",
    "JSONRPCResultResponse",
    "JSONRPCErrorResponse",
    # helpers
    "encode",
    "decode",
    "to_builtins",
    "from_builtins",
    "decode_elicit_params",
    "decode_resource_contents",
    "convert_result",
]

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

PROTOCOL_VERSION = "2026-07-28"
"""The protocol revision this module describes."""

JSONRPCVersion = Literal["2.0"]
"""The type of every envelope's ``jsonrpc`` member: the one value :data:`JSONRPC_VERSION`."""

RESULT_TYPE_COMPLETE = "complete"
"""``resultType`` of a finished request."""

RESULT_TYPE_INPUT_REQUIRED = "input_required"
"""``resultType`` of an :class:`InputRequiredResult`."""

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
"""Request ``_meta`` key: the protocol version (required)."""

META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
"""Request ``_meta`` key: the client's capabilities for this request (required)."""

META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
"""Request ``_meta`` key: the client's self-reported :class:`Implementation` (optional)."""

META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
"""Request ``_meta`` key: the deprecated per-request log level (optional)."""

META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
"""Result ``_meta`` key: the server's :class:`Implementation`."""

META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""Notification/result ``_meta`` key: id of the ``subscriptions/listen`` request."""

META_PROGRESS_TOKEN = "progressToken"
"""Request ``_meta`` key: opts the request into ``notifications/progress``."""

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The tasks extension's id, under ``extensions`` in the client's and the server's capabilities."""

# ---------------------------------------------------------------------------
# Scalar aliases
# ---------------------------------------------------------------------------

Role = Literal["user", "assistant"]
"""Who a message or annotation is for."""

LoggingLevel = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""Syslog severity used by ``notifications/message``."""

CacheScope = Literal["public", "private"]
"""Who may reuse a cacheable result."""

ProgressToken = str | int
"""A progress token: string or integer."""


def _complete() -> str:
    return RESULT_TYPE_COMPLETE


def _input_required() -> str:
    return RESULT_TYPE_INPUT_REQUIRED


def _jsonrpc() -> JSONRPCVersion:
    return JSONRPC_VERSION


def _url() -> Literal["url"]:
    return "url"


# ---------------------------------------------------------------------------
# Base
# ---------------------------------------------------------------------------


class _Wire(
    msgspec.Struct,
    rename="camel",
    omit_defaults=True,
    kw_only=True,
    forbid_unknown_fields=False,
    repr_omit_defaults=True,
):
    """Common options of every wire Struct: camelCase names, unset optionals left out.

    msgspec does not inherit ``kw_only``, so every subclass repeats ``kw_only=True``.
    """


_META = msgspec.field(default=None, name="_meta")

# ---------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------


class Icon(_Wire, kw_only=True):
    """An icon a client may show for a server, tool, prompt or resource."""

    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


class Implementation(_Wire, kw_only=True):
    """Name and version of an MCP client or server (``clientInfo``/``serverInfo``)."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: list[Icon] | None = None


class Annotations(_Wire, kw_only=True):
    """Hints to the client about how to use or show an object."""

    audience: list[Role] | None = None
    priority: float | None = None
    last_modified: str | None = None


# ---------------------------------------------------------------------------
# Content
# ---------------------------------------------------------------------------


class TextContent(_Wire, tag_field="type", tag="text", kw_only=True):
    """Plain text content."""

    type: ClassVar[Literal["text"]] = "text"
    text: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class ImageContent(_Wire, tag_field="type", tag="image", kw_only=True):
    """Base64-encoded image content."""

    type: ClassVar[Literal["image"]] = "image"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class AudioContent(_Wire, tag_field="type", tag="audio", kw_only=True):
    """Base64-encoded audio content."""

    type: ClassVar[Literal["audio"]] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class TextResourceContents(_Wire, kw_only=True):
    """A resource's contents as text (untagged: recognised by its ``text`` member)."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = _META


class BlobResourceContents(_Wire, kw_only=True):
    """A resource's contents as base64 (untagged: recognised by its ``blob`` member)."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = _META


ResourceContents = TextResourceContents | BlobResourceContents
"""Text or blob resource contents; decode with :func:`decode_resource_contents`."""


def decode_resource_contents(obj: Any) -> TextResourceContents | BlobResourceContents:
    """Turn a decoded object into text or blob contents by the presence of ``text``/``blob``."""
    if isinstance(obj, (TextResourceContents, BlobResourceContents)):
        return obj
    if not isinstance(obj, Mapping):
        raise msgspec.ValidationError(
            f"Expected resource contents `object`, got `{type(obj).__name__}`"
        )
    if "text" in obj:
        return msgspec.convert(obj, TextResourceContents)
    if "blob" in obj:
        return msgspec.convert(obj, BlobResourceContents)
    raise msgspec.ValidationError("Resource contents need a `text` or a `blob` member")


class ResourceLink(_Wire, tag_field="type", tag="resource_link", kw_only=True):
    """A reference to a resource the client may read later."""

    type: ClassVar[Literal["resource_link"]] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class EmbeddedResource(_Wire, tag_field="type", tag="resource", kw_only=True):
    """A resource's contents embedded in a message or tool result."""

    type: ClassVar[Literal["resource"]] = "resource"
    # Text or blob contents; declared Any because the wire has no tag to dispatch on.
    resource: Any
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META

    def __post_init__(self) -> None:
        self.resource = decode_resource_contents(self.resource)


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
"""Content of tool results and prompt messages (``$defs/ContentBlock``)."""


class ToolUseContent(_Wire, tag_field="type", tag="tool_use", kw_only=True):
    """A model's request to call a tool, inside sampling."""

    type: ClassVar[Literal["tool_use"]] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]
    meta: dict[str, Any] | None = _META


class ToolResultContent(_Wire, tag_field="type", tag="tool_result", kw_only=True):
    """The outcome of a tool call fed back to the model, inside sampling."""

    type: ClassVar[Literal["tool_result"]] = "tool_result"
    tool_use_id: str
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | None = None
    meta: dict[str, Any] | None = _META


SamplingMessageContentBlock = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
)
"""Content allowed in sampling messages (``$defs/SamplingMessageContentBlock``)."""

AnyContentBlock = (
    TextContent
    | ImageContent
    | AudioContent
    | ResourceLink
    | EmbeddedResource
    | ToolUseContent
    | ToolResultContent
)
"""Every content block type, for lenient decoding (not a schema ``$def``)."""

# ---------------------------------------------------------------------------
# Tools (needed by sampling, so defined early)
# ---------------------------------------------------------------------------


class ToolAnnotations(_Wire, kw_only=True):
    """Untrusted hints describing a tool's behaviour."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class Tool(_Wire, kw_only=True):
    """A tool the server offers."""

    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# Sampling (deprecated in 2026-07-28, still valid)
# ---------------------------------------------------------------------------


class SamplingMessage(_Wire, kw_only=True):
    """One message of a sampling conversation: a block or a list of blocks."""

    role: Role
    content: SamplingMessageContentBlock | list[SamplingMessageContentBlock]
    meta: dict[str, Any] | None = _META


class ModelHint(_Wire, kw_only=True):
    """A hint for model selection."""

    name: str | None = None


class ModelPreferences(_Wire, kw_only=True):
    """The server's model-selection preferences for a sampling request."""

    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


class ToolChoice(_Wire, kw_only=True):
    """How the model may use the tools offered in a sampling request."""

    mode: Literal["auto", "required", "none"] | None = None


class CreateMessageRequestParams(_Wire, kw_only=True):
    """Parameters of an embedded ``sampling/createMessage`` request."""

    messages: list[SamplingMessage]
    max_tokens: int
    model_preferences: ModelPreferences | None = None
    system_prompt: str | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None


class CreateMessageRequest(_Wire, tag_field="method", tag="sampling/createMessage", kw_only=True):
    """An embedded sampling request (``{method, params}``, no id)."""

    method: ClassVar[Literal["sampling/createMessage"]] = "sampling/createMessage"
    params: CreateMessageRequestParams


class CreateMessageResult(_Wire, kw_only=True):
    """The client's answer to a sampling request (not a ``Result``: no ``resultType``)."""

    role: Role
    content: SamplingMessageContentBlock | list[SamplingMessageContentBlock]
    model: str
    stop_reason: str | None = None
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# Roots (deprecated in 2026-07-28, still valid)
# ---------------------------------------------------------------------------


class Root(_Wire, kw_only=True):
    """A directory or file the client exposes (``file://`` URI)."""

    uri: str
    name: str | None = None
    meta: dict[str, Any] | None = _META


class ListRootsRequest(_Wire, tag_field="method", tag="roots/list", kw_only=True):
    """An embedded ``roots/list`` request; its params hold at most ``_meta``."""

    method: ClassVar[Literal["roots/list"]] = "roots/list"
    params: dict[str, Any] | None = None


class ListRootsResult(_Wire, kw_only=True):
    """The client's answer to ``roots/list`` (not a ``Result``: no ``resultType``)."""

    roots: list[Root]
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# Elicitation
# ---------------------------------------------------------------------------


class ElicitRequestFormParams(_Wire, kw_only=True):
    """Form-mode elicitation: a message and a flat schema of primitive fields."""

    message: str
    requested_schema: dict[str, Any]
    # Optional on the wire: a missing mode means form.
    mode: Literal["form"] | None = None


class ElicitRequestURLParams(_Wire, kw_only=True):
    """URL-mode elicitation: send the user to a URL out of band."""

    message: str
    url: str
    mode: Literal["url"] = msgspec.field(default_factory=_url)


ElicitRequestParams = ElicitRequestFormParams | ElicitRequestURLParams
"""Form or URL elicitation parameters; decode with :func:`decode_elicit_params`."""


def decode_elicit_params(obj: Any) -> ElicitRequestFormParams | ElicitRequestURLParams:
    """Turn a decoded object into form or URL params by ``mode`` (missing means form)."""
    if isinstance(obj, (ElicitRequestFormParams, ElicitRequestURLParams)):
        return obj
    if not isinstance(obj, Mapping):
        raise msgspec.ValidationError(
            f"Expected elicitation params `object`, got `{type(obj).__name__}`"
        )
    mode = obj.get("mode")
    if mode is None or mode == "form":
        return msgspec.convert(obj, ElicitRequestFormParams)
    if mode == "url":
        return msgspec.convert(obj, ElicitRequestURLParams)
    raise msgspec.ValidationError(f"Unknown elicitation mode {mode!r}")


class ElicitRequest(_Wire, tag_field="method", tag="elicitation/create", kw_only=True):
    """An embedded ``elicitation/create`` request (``{method, params}``, no id)."""

    method: ClassVar[Literal["elicitation/create"]] = "elicitation/create"
    # ElicitRequestFormParams | ElicitRequestURLParams after construction or decoding.
    # Declared Any because msgspec cannot dispatch on a tag that may be missing.
    params: Any

    def __post_init__(self) -> None:
        self.params = decode_elicit_params(self.params)


class ElicitResult(_Wire, kw_only=True):
    """The client's answer to an elicitation (not a ``Result``: no ``resultType``)."""

    action: Literal["accept", "decline", "cancel"]
    # schema.json says integer, schema.ts says number: floats are accepted here.
    content: dict[str, str | int | float | bool | list[str]] | None = None


# ---------------------------------------------------------------------------
# Multi Round-Trip Requests
# ---------------------------------------------------------------------------

InputRequest = CreateMessageRequest | ListRootsRequest | ElicitRequest
"""A request embedded in ``inputRequests``, dispatched on ``method``."""

InputRequests = dict[str, InputRequest]
"""Embedded requests keyed by the server's names for them."""

InputResponse = CreateMessageResult | ListRootsResult | ElicitResult
"""An answer in ``inputResponses``; has no tag, see :func:`mrtr.core.kinds.decode_input_response`."""

InputResponses = dict[str, Any]
"""Answers keyed like ``inputRequests``; values decoded per key by the runtime."""

class InputRequiredResult(_Wire, kw_only=True):
    """An interim result asking the client to gather input and retry."""

    result_type: str = msgspec.field(default_factory=_input_required)
    input_requests: dict[str, InputRequest] | None = None
    request_state: str | None = None
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# Request params (client to server)
# ---------------------------------------------------------------------------
# ``_meta`` is required by the schema on every request's params but optional here, so the
# runtime can notice its absence and answer -32602 itself rather than fail the decode.


class RequestParams(_Wire, kw_only=True):
    """Params of a request that carries only ``_meta`` (e.g. ``server/discover``)."""

    meta: dict[str, Any] | None = _META


class PaginatedRequestParams(_Wire, kw_only=True):
    """Params of a list request: ``_meta`` and an optional cursor."""

    cursor: str | None = None
    meta: dict[str, Any] | None = _META


class CallToolRequestParams(_Wire, kw_only=True):
    """Params of ``tools/call``, including an MRTR retry's answers and state."""

    name: str
    arguments: dict[str, Any] | None = None
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    meta: dict[str, Any] | None = _META


class GetPromptRequestParams(_Wire, kw_only=True):
    """Params of ``prompts/get``, including an MRTR retry's answers and state."""

    name: str
    arguments: dict[str, str] | None = None
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    meta: dict[str, Any] | None = _META


class ReadResourceRequestParams(_Wire, kw_only=True):
    """Params of ``resources/read``, including an MRTR retry's answers and state."""

    uri: str
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    meta: dict[str, Any] | None = _META


class PromptReference(_Wire, tag_field="type", tag="ref/prompt", kw_only=True):
    """Completion target: a prompt by name."""

    type: ClassVar[Literal["ref/prompt"]] = "ref/prompt"
    name: str
    title: str | None = None


class ResourceTemplateReference(_Wire, tag_field="type", tag="ref/resource", kw_only=True):
    """Completion target: a resource template by URI template."""

    type: ClassVar[Literal["ref/resource"]] = "ref/resource"
    uri: str


class CompletionArgument(_Wire, kw_only=True):
    """The argument being completed and its partial value."""

    name: str
    value: str


class CompletionContext(_Wire, kw_only=True):
    """Already-resolved arguments that may narrow a completion."""

    arguments: dict[str, str] | None = None


class CompleteRequestParams(_Wire, kw_only=True):
    """Params of ``completion/complete``."""

    ref: PromptReference | ResourceTemplateReference
    argument: CompletionArgument
    context: CompletionContext | None = None
    meta: dict[str, Any] | None = _META


class SubscriptionFilter(_Wire, kw_only=True):
    """Which change notifications a ``subscriptions/listen`` stream wants."""

    tools_list_changed: bool | None = None
    prompts_list_changed: bool | None = None
    resources_list_changed: bool | None = None
    resource_subscriptions: list[str] | None = None


class SubscriptionsListenRequestParams(_Wire, kw_only=True):
    """Params of ``subscriptions/listen``."""

    notifications: SubscriptionFilter
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# Results (server to client)
# ---------------------------------------------------------------------------


class CallToolResult(_Wire, kw_only=True):
    """The final result of ``tools/call``."""

    result_type: str = msgspec.field(default_factory=_complete)
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | None = None
    meta: dict[str, Any] | None = _META


class PromptMessage(_Wire, kw_only=True):
    """One message of a prompt."""

    role: Role
    content: ContentBlock


class GetPromptResult(_Wire, kw_only=True):
    """The final result of ``prompts/get``."""

    result_type: str = msgspec.field(default_factory=_complete)
    messages: list[PromptMessage]
    description: str | None = None
    meta: dict[str, Any] | None = _META


class ReadResourceResult(_Wire, kw_only=True):
    """The final result of ``resources/read``.

    ``ttlMs`` and ``cacheScope`` are required by schema.json; they are optional here only so
    that results from peers that leave them out (one official example does) still decode.
    A server must set both.
    """

    result_type: str = msgspec.field(default_factory=_complete)
    # TextResourceContents | BlobResourceContents items, dispatched on text/blob presence.
    contents: list[Any]
    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None
    meta: dict[str, Any] | None = _META

    def __post_init__(self) -> None:
        self.contents = [decode_resource_contents(item) for item in self.contents]


class Completion(_Wire, kw_only=True):
    """The completion values inside a :class:`CompleteResult`."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(_Wire, kw_only=True):
    """The result of ``completion/complete``."""

    result_type: str = msgspec.field(default_factory=_complete)
    completion: Completion
    meta: dict[str, Any] | None = _META


class ClientCapabilities(_Wire, kw_only=True):
    """What the client supports; sub-objects stay dicts so unknown subfields survive."""

    experimental: dict[str, Any] | None = None
    roots: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    extensions: dict[str, Any] | None = None


class ServerCapabilities(_Wire, kw_only=True):
    """What the server supports; sub-objects stay dicts so unknown subfields survive."""

    experimental: dict[str, Any] | None = None
    logging: dict[str, Any] | None = None
    completions: dict[str, Any] | None = None
    prompts: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    tools: dict[str, Any] | None = None
    extensions: dict[str, Any] | None = None


class PromptArgument(_Wire, kw_only=True):
    """An argument a prompt accepts."""

    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(_Wire, kw_only=True):
    """A prompt the server offers."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = _META


class Resource(_Wire, kw_only=True):
    """A resource the server offers."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class ResourceTemplate(_Wire, kw_only=True):
    """A parameterised family of resources (RFC 6570 URI template)."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = _META


class ListToolsResult(_Wire, kw_only=True):
    """The cacheable result of ``tools/list``."""

    result_type: str = msgspec.field(default_factory=_complete)
    tools: list[Tool]
    ttl_ms: int
    cache_scope: CacheScope
    next_cursor: str | None = None
    meta: dict[str, Any] | None = _META


class ListPromptsResult(_Wire, kw_only=True):
    """The cacheable result of ``prompts/list``."""

    result_type: str = msgspec.field(default_factory=_complete)
    prompts: list[Prompt]
    ttl_ms: int
    cache_scope: CacheScope
    next_cursor: str | None = None
    meta: dict[str, Any] | None = _META


class ListResourcesResult(_Wire, kw_only=True):
    """The cacheable result of ``resources/list``."""

    result_type: str = msgspec.field(default_factory=_complete)
    resources: list[Resource]
    ttl_ms: int
    cache_scope: CacheScope
    next_cursor: str | None = None
    meta: dict[str, Any] | None = _META


class ListResourceTemplatesResult(_Wire, kw_only=True):
    """The cacheable result of ``resources/templates/list``."""

    result_type: str = msgspec.field(default_factory=_complete)
    resource_templates: list[ResourceTemplate]
    ttl_ms: int
    cache_scope: CacheScope
    next_cursor: str | None = None
    meta: dict[str, Any] | None = _META


class DiscoverResult(_Wire, kw_only=True):
    """The cacheable result of ``server/discover``; server identity goes in ``_meta``."""

    result_type: str = msgspec.field(default_factory=_complete)
    supported_versions: list[str]
    capabilities: ServerCapabilities
    ttl_ms: int
    cache_scope: CacheScope
    instructions: str | None = None
    meta: dict[str, Any] | None = _META


class SubscriptionsListenResult(_Wire, kw_only=True):
    """The result closing a ``subscriptions/listen`` stream; ``_meta`` names the subscription."""

    result_type: str = msgspec.field(default_factory=_complete)
    meta: dict[str, Any] = msgspec.field(name="_meta")


# ---------------------------------------------------------------------------
# Notification params
# ---------------------------------------------------------------------------


class NotificationParams(_Wire, kw_only=True):
    """Params of a notification that carries only ``_meta`` (the list-changed ones)."""

    meta: dict[str, Any] | None = _META


class ProgressNotificationParams(_Wire, kw_only=True):
    """Params of ``notifications/progress``."""

    progress_token: ProgressToken
    # int | float so whole-number progress stays an integer on the wire.
    progress: int | float
    total: int | float | None = None
    message: str | None = None
    meta: dict[str, Any] | None = _META


class LoggingMessageNotificationParams(_Wire, kw_only=True):
    """Params of ``notifications/message`` (deprecated logging)."""

    level: LoggingLevel
    data: Any
    logger: str | None = None
    meta: dict[str, Any] | None = _META


class CancelledNotificationParams(_Wire, kw_only=True):
    """Params of ``notifications/cancelled``."""

    request_id: RequestId
    reason: str | None = None
    meta: dict[str, Any] | None = _META


class ResourceUpdatedNotificationParams(_Wire, kw_only=True):
    """Params of ``notifications/resources/updated``."""

    uri: str
    meta: dict[str, Any] | None = _META


class SubscriptionsAcknowledgedNotificationParams(_Wire, kw_only=True):
    """Params of ``notifications/subscriptions/acknowledged``."""

    notifications: SubscriptionFilter
    meta: dict[str, Any] | None = _META


# ---------------------------------------------------------------------------
# JSON-RPC envelopes
# ---------------------------------------------------------------------------

P = TypeVar("P")
R = TypeVar("R")


class ErrorObject(_Wire, kw_only=True):
    """The ``error`` member of a JSON-RPC error response."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class JSONRPCRequest(_Wire, Generic[P], kw_only=True):
    """A JSON-RPC request; ``JSONRPCRequest[CallToolRequestParams]`` types its params."""

    jsonrpc: JSONRPCVersion = msgspec.field(default_factory=_jsonrpc)
    id: RequestId
    method: str
    params: P | None = None


class JSONRPCNotification(_Wire, Generic[P], kw_only=True):
    """A JSON-RPC notification (no id); parameterise to type params."""

    jsonrpc: JSONRPCVersion = msgspec.field(default_factory=_jsonrpc)
    method: str
    params: P | None = None


class JSONRPCResultResponse(_Wire, Generic[R], kw_only=True):
    """A successful JSON-RPC response; parameterise to type the result."""

    jsonrpc: JSONRPCVersion = msgspec.field(default_factory=_jsonrpc)
    id: RequestId
    result: R


class JSONRPCErrorResponse(_Wire, kw_only=True):
    """A JSON-RPC error response; ``id`` is left out when the request id is unknown."""

    jsonrpc: JSONRPCVersion = msgspec.field(default_factory=_jsonrpc)
    id: RequestId | None = None
    error: ErrorObject


# ---------------------------------------------------------------------------
# Encoding helpers
# ---------------------------------------------------------------------------

_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}
T = TypeVar("T")


def _decoder_for(type_: Any) -> msgspec.json.Decoder[Any]:
    try:
        return _DECODERS[type_]
    except KeyError:
        decoder = _DECODERS[type_] = msgspec.json.Decoder(type_)
        return decoder


def decode(data: bytes | bytearray | memoryview | str, type: Any = Any) -> Any:
    """Decode JSON into ``type``, reusing one cached Decoder per type."""
    return _decoder_for(type).decode(data)


def to_builtins(obj: Any) -> Any:
    """Convert Structs into plain dicts/lists, exactly as :func:`encode` would emit them."""
    return msgspec.to_builtins(obj)


def from_builtins(obj: Any, type: type[T] | Any) -> T:
    """Convert plain JSON-shaped builtins (e.g. a parsed dict) into ``type``."""
    return msgspec.convert(obj, type)


def convert_result(obj: Mapping[str, Any], complete_type: type[T]) -> T | InputRequiredResult:
    """Read a result dict as ``complete_type`` or, by ``resultType``, an InputRequiredResult.

    A missing ``resultType`` counts as ``"complete"``; any other unknown value is rejected.
    """
    result_type = obj.get("resultType", RESULT_TYPE_COMPLETE)
    if result_type == RESULT_TYPE_INPUT_REQUIRED:
        return msgspec.convert(obj, InputRequiredResult)
    if result_type == RESULT_TYPE_COMPLETE:
        return msgspec.convert(obj, complete_type)
    raise msgspec.ValidationError(f"Unrecognised resultType {result_type!r}")
