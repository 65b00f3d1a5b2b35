"""``mrtr call`` and ``mrtr list``: a person at a terminal as the client's answerer.

Rendering and progress use ``rich`` (the ``client`` extra). When standard input is a
terminal, each question shows the field's title, description, type, default and
constraints, choices are numbered, booleans are yes/no, and a wrong value is explained
and asked again. When standard input is not a terminal, each field is read as one line
in order and nothing is coloured or animated, so answers can be piped in. Questions go
to stderr, results to stdout.

Everything printed goes through :func:`_say` (or :func:`_ask` for a prompt): the text
is cleaned by :func:`mrtr.client.display.printable` and printed as plain text, so
nothing a server sent can drive the terminal or be read as markup.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import trio

try:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
    from rich.syntax import Syntax
    from rich.text import Text
except ImportError:
    raise ImportError("mrtr call and mrtr list need rich: install the 'client' extra: pip install 'mrtr[client]'") \
        from None

from ..core.answers import accept, cancel, decline, sampled
from ..core.docstrings import plain_text
from ..core.errors import ProtocolError
from ..core.schema import RequestedSchema
from .addresses import inspect_address
from .apps import interface_note, ui_traits
from .display import printable, printable_json
from .errors import ClientError, StateLost
from .requests import ElicitationRequest, RootsRequest, SamplingRequest
from .client import DEFAULT_DEADLINE, Client, PromptResult, ResourceResult, ToolResult
from .tasks import TaskHandle

__all__ = ["ArgumentError", "Terminal", "parse_arguments", "show_listing", "show_result"]

DECLINE = "!decline"
CANCEL = "!cancel"


class ArgumentError(ValueError):
    """A ``name=value`` argument that cannot be read (a usage error)."""


class _Stop(Exception):
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer


# -- the one way out ---------------------------------------------------------------------------


def _say(console: Console, text: str = "", *, style: str | None = None, end: str = "\n", line: bool = False,
         json_text: bool = False) -> None:
    """Print ``text`` literally: cleaned by :func:`printable`, then as plain text.

    Every print of this module goes through here (tests/client/test_terminal_escapes.py
    holds it to that), so no new print can forget the rule. A rich ``Text`` is never read
    as markup, emoji codes or something to highlight; ``style`` shows only where the
    console has colour. ``line`` keeps the text to one line (names, titles, choices);
    ``json_text`` is JSON, coloured as such on a colour console.
    """
    shown = printable(text, multiline=not line)
    if json_text and console.color_system is not None:
        console.print(Syntax(shown, "json", background_color="default"), end=end)
    else:
        console.print(Text(shown, style=style or ""), end=end)


def _ask(console: Console, prompt: str) -> str:
    """Show ``prompt`` (cleaned as :func:`_say` does, on one line) and read what the person types."""
    return console.input(Text(printable(prompt, multiline=False)))


def _one(value: Any) -> str:
    """A server's name, title or URI as one line of text."""
    return printable(str(value), multiline=False)


# -- name=value arguments ------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one: a server's schema is read, never trusted."""
    return value if isinstance(value, Mapping) else {}


def _names(value: Any) -> set[str]:
    """The strings of a ``required`` list (anything else in it, or around it, is ignored)."""
    return {item for item in value if isinstance(item, str)} if isinstance(value, list) else set()


def _kind(schema: Any, depth: int = 0) -> str | None:
    if not isinstance(schema, Mapping) or depth > 4:  # a union nested without end names no type
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    if kind is None:
        for union in ("anyOf", "oneOf"):
            options = schema.get(union)
            for option in options if isinstance(options, list) else []:
                found = _kind(option, depth + 1)
                if found not in (None, "null"):
                    return found
    return kind if isinstance(kind, str) else None


def _boolean(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in ("y", "yes", "true", "1", "on"):
        return True
    if lowered in ("n", "no", "false", "0", "off"):
        return False
    return None


def _typed(name: str, text: str, schema: Any) -> Any:
    kind = _kind(schema)
    if kind == "string":
        return text
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ArgumentError(f"{name}={text!r}: expected a whole number") from None
    if kind == "number":
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise ArgumentError(f"{name}={text!r}: expected a number") from None
    if kind == "boolean":
        value = _boolean(text)
        if value is None:
            raise ArgumentError(f"{name}={text!r}: expected true or false")
        return value
    if kind in ("object", "array", "null"):
        try:
            return json.loads(text)
        except ValueError:
            raise ArgumentError(f"{name}={text!r}: expected JSON ({kind})") from None
    try:  # no schema for this name: JSON when it reads as JSON, else the text
        return json.loads(text)
    except ValueError:
        return text


def parse_arguments(pairs: Sequence[str], input_schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read ``name=value`` words into arguments, typed by the tool's ``inputSchema``.

    A property typed integer, number or boolean gets that type; objects and arrays are
    JSON; strings are taken as written. A name the schema does not list is refused with
    the tool's parameters, unless the schema allows more (``additionalProperties``),
    when it is JSON if it parses, else text. Raises :class:`ArgumentError` for a word
    without ``=``, an unknown name or a value that does not fit its type.
    """
    properties = _mapping(_mapping(input_schema).get("properties"))
    extra = _mapping(input_schema).get("additionalProperties")
    open_schema = input_schema is None or extra is True or isinstance(extra, Mapping)
    arguments: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ArgumentError(f"{pair!r}: arguments are written name=value")
        if name not in properties and not open_schema:
            listed = "\n".join(_parameters(input_schema)) or "    (none)"
            raise ArgumentError(f"the tool takes no argument {name!r}; its parameters are:\n{listed}")
        arguments[name] = _typed(name, text, properties.get(name))
    return arguments


# -- the answerer ------------------------------------------------------------------------------


def _options(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``(value, label)`` for a single-choice property, else None."""
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        return [(value, str(names[i]) if names and i < len(names) else str(value))
                for i, value in enumerate(prop["enum"])]
    for union in ("oneOf", "anyOf"):
        entries = prop.get(union)
        if isinstance(entries, list) and entries and all(isinstance(e, Mapping) and "const" in e for e in entries):
            return [(entry["const"], str(entry.get("title", entry["const"]))) for entry in entries]
    return None


def _constraints(prop: Mapping[str, Any]) -> list[str]:
    words = {"minLength": "min length {}", "maxLength": "max length {}",
             "minimum": "at least {}", "maximum": "at most {}", "format": "format {}",
             "minItems": "pick at least {}", "maxItems": "pick at most {}"}
    return [template.format(prop[key]) for key, template in words.items() if key in prop]


class Terminal:
    """The answerers and progress view of ``mrtr call``.

    ``interactive`` says whether a person is typing (standard input is a terminal): then
    questions are decorated and a progress bar is shown; otherwise one line per field is
    read from ``stdin`` and nothing is animated.
    """

    def __init__(self, *, stdin: TextIO | None = None, console: Console | None = None,
                 interactive: bool | None = None, sample_reply: str | None = None,
                 roots: Sequence[str] = ()) -> None:
        self.stdin = stdin or sys.stdin
        self.interactive = self.stdin.isatty() if interactive is None else interactive
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True,
                                          color_system="auto" if self.interactive else None)
        self.sample_reply = sample_reply
        self.roots = [Path(root).expanduser().resolve().as_uri() for root in roots]
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    # -- options for mrtr.Client -------------------------------------------------------------------

    def client_options(self) -> dict[str, Any]:
        """Answerers for :class:`mrtr.Client`: elicitation always, sampling and roots when flags gave answers."""
        options: dict[str, Any] = {"on_elicit": self.elicit, "elicitation_modes": ("form", "url"),
                                   "on_progress": self.progress}
        if self.sample_reply is not None:
            options["on_sample"] = self.sample
        if self.roots:
            options["on_roots"] = self.list_roots
        return options

    def sample(self, request: SamplingRequest) -> dict[str, Any]:
        """Answer sampling with the ``--sample-reply`` text."""
        self.pause()
        _say(self.console, f"sampling request answered with --sample-reply ({len(self.sample_reply or '')} "
                           "characters)", style="dim")
        return sampled(self.sample_reply or "", model="mrtr-call")

    def list_roots(self, request: RootsRequest) -> dict[str, Any]:
        """Answer roots with the ``--root`` paths."""
        return {"roots": [{"uri": uri} for uri in self.roots]}

    # -- progress ------------------------------------------------------------------------------

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Show a progress notification as a bar (interactive only)."""
        if not self.interactive:
            return
        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                      MofNCompleteColumn(),
                                      console=self.console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task("working", total=None)
        assert self._task is not None
        completed, total = bar_values(progress, total)
        self._progress.update(self._task, completed=completed, total=total,
                              description=printable(message, multiline=False) if message else "working")

    def pause(self) -> None:
        """Take the progress bar off the screen (before a question, and at the end)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # -- reading ---------------------------------------------------------------------------------

    def _read(self, prompt: str) -> str:
        if self.interactive:
            try:
                text = _ask(self.console, prompt)
            except EOFError:
                raise _Stop(cancel()) from None
        else:
            _say(self.console, prompt, end="", line=True)
            line = self.stdin.readline()
            if not line:
                _say(self.console)
                raise _Stop(cancel())
            text = line.rstrip("\r\n")
            _say(self.console, text, line=True)
        stripped = text.strip()
        if stripped == DECLINE:
            raise _Stop(decline())
        if stripped == CANCEL:
            raise _Stop(cancel())
        return text

    def confirm(self, question: str) -> bool:
        """Ask a yes/no question (no answer, or end of input, is no)."""
        if self.interactive:
            try:
                text = _ask(self.console, question)
            except EOFError:
                return False
        else:
            _say(self.console, question, end="", line=True)
            text = self.stdin.readline().strip()
            _say(self.console, text, line=True)
        return _boolean(text) is True

    def _problem(self, text: str) -> None:
        _say(self.console, f"  {text}", style="red")

    # -- elicitation ---------------------------------------------------------------------------

    def elicit(self, request: ElicitationRequest) -> dict[str, Any]:
        """Ask the person: a form field by field, or consent to open a URL (:meth:`visit`)."""
        self.pause()
        _say(self.console)
        _say(self.console, request.message, style="bold")
        if request.mode == "url":
            return self.visit(request.url or "")
        _say(self.console, f"(type {DECLINE} to decline, {CANCEL} to cancel)", style="dim")
        try:
            return accept(self._form(request.requested_schema or {}))
        except _Stop as stop:
            return stop.answer

    def visit(self, url: str) -> dict[str, Any]:
        """Ask consent to open ``url``: shown in full, its host on a line of its own, what may deceive flagged.

        An address :func:`mrtr.client.addresses.inspect_address` refuses (anything but
        https, plain http except to this machine) is not offered: the answer is decline.
        """
        address = inspect_address(url)
        if address.refused is not None:
            clipped = url if len(url) <= _LONGEST_REFUSED else url[:_LONGEST_REFUSED] + "..."
            _say(self.console, f"Not opened: the server asked to open {clipped}, which {address.refused}.",
                 style="red", line=True)
            _say(self.console, "(answered decline: only https addresses are opened, and plain http to this "
                               "machine)", style="dim")
            return decline()
        _say(self.console, f"(type {DECLINE} to decline, {CANCEL} to cancel)", style="dim")
        _say(self.console, f"Open this address: {address.shown}", line=True)
        _say(self.console, f"  host: {address.host_line}", style="bold", line=True)
        for warning in address.warnings:
            _say(self.console, f"  warning: {warning}", style="red", line=True)
        try:
            self._read("Press Enter once done: ")
        except _Stop as stop:
            return stop.answer
        return accept()

    def _form(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        properties = _mapping(schema.get("properties"))
        required = _names(schema.get("required"))
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            value = self._field(name, prop if isinstance(prop, Mapping) else {}, name in required)
            if value is not _SKIP:
                content[name] = value
        return content

    def _field(self, name: str, prop: Mapping[str, Any], required: bool) -> Any:
        kind = _kind(prop)
        options = _options(prop)
        items = prop.get("items") if isinstance(prop.get("items"), Mapping) else None
        multi = _options(items) if kind == "array" and items is not None else None
        described = "choose one" if options else "choose any (numbers separated by commas)" if multi else \
            "yes/no" if kind == "boolean" else kind or "text"
        details = [described, "required" if required else "optional", *_constraints(prop)]
        has_default = "default" in prop and _answerable(prop["default"])
        if has_default:
            details.append(f"default {json.dumps(prop['default'])}")
        title = prop.get("title") or name
        line = f"{title} ({', '.join(details)})"
        _say(self.console, f"  {line}", style="cyan", line=True)
        if isinstance(prop.get("description"), str):
            _say(self.console, f"  {prop['description']}", style="dim")
        for number, (_, label) in enumerate(options or multi or [], start=1):
            _say(self.console, f"    {number}) {label}", line=True)
        check = _checker(name, prop)
        while True:
            text = self._read(f"  {name}> ")
            try:
                if text.strip():
                    value = _read_value(name, text, kind, options, multi)
                elif has_default:
                    value = prop["default"]
                elif not required:
                    return _SKIP
                else:
                    raise ValueError("an answer is required")
                if not _answerable(value):
                    raise ValueError("the server offered this choice with a value no answer can carry: pick another")
                check(value)
            except ValueError as problem:
                self._problem(str(problem))
                continue
            return value


_SKIP = object()

_LONGEST_REFUSED = 200
"""How much of a refused address is shown (a data: URL may be megabytes): enough to recognize it."""

_LARGEST_SHOWN = 1e15
"""Past this a progress value is scaled down: the bar multiplies it by its width, and a float
that overflows to infinity there would end the call with an OverflowError."""


def bar_values(progress: float, total: float | None) -> tuple[float, float | None]:
    """What the progress bar can draw of a server's ``progress`` and ``total``.

    A server may send any JSON number: a total that is not a positive finite number means
    the end is unknown (an indeterminate bar); values too large to draw are scaled down
    together, and the bar's fill stays within ``[0, total]``.
    """
    completed = progress if math.isfinite(progress) else 0.0
    if total is not None and not (math.isfinite(total) and total > 0):
        total = None
    largest = max(abs(completed), total or 0.0)
    if largest > _LARGEST_SHOWN:
        completed *= _LARGEST_SHOWN / largest
        total = total * (_LARGEST_SHOWN / largest) if total is not None else None
    completed = max(0.0, completed if total is None else min(completed, total))
    return completed, total


def _answerable(value: Any) -> bool:
    """Whether ``value`` fits an elicitation answer (a string, number, boolean or list of strings).

    Defaults and choices come from the server's schema and may be anything JSON.
    """
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return isinstance(value, (str, int, float, bool))


def _pick(text: str, options: list[tuple[Any, str]]) -> Any:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    for value, label in options:
        if text in (str(value), label):
            return value
    raise ValueError(f"{text!r} is not one of the choices: enter a number from 1 to {len(options)}")


def _read_value(name: str, text: str, kind: str | None, options: list[tuple[Any, str]] | None,
                multi: list[tuple[Any, str]] | None) -> Any:
    """The value typed for field ``name``; a ValueError names the field, as the schema's own checks do."""
    try:
        if options:
            return _pick(text, options)
        if multi is not None:
            return [_pick(part, multi) for part in text.split(",") if part.strip()]
    except ValueError as problem:
        raise ValueError(f"{_quoted(name)}: {problem}") from None
    if kind == "boolean":
        value = _boolean(text)
        if value is None:
            raise ValueError(f"{_quoted(name)}: answer yes or no, got {_quoted(text.strip())}")
        return value
    if kind in ("integer", "number"):
        try:
            return _typed(name, text.strip(), {"type": kind})
        except ArgumentError:
            expected = "a whole number" if kind == "integer" else "a number"
            raise ValueError(f"{_quoted(name)}: expected {expected}, got {_quoted(text.strip())}") from None
    return text


def _quoted(text: str, longest: int = 80) -> str:
    """``text`` as a JSON string for a message, as the schema's checks write names and values (clipped)."""
    shown = json.dumps(text, ensure_ascii=False)
    return shown if len(shown) <= longest else shown[:longest - 4] + '..."'


def _checker(name: str, prop: Mapping[str, Any]) -> Callable[[Any], None]:
    """Check one field's value with the schema vocabulary's own validators."""
    try:
        compiled = RequestedSchema({"type": "object", "properties": {name: dict(prop)}})
    except (ProtocolError, ValueError, TypeError):
        return lambda value: None  # outside the flat vocabulary: the server will judge

    def check(value: Any) -> None:
        try:
            compiled.validate({name: value})
        except ProtocolError as error:
            message = error.message.replace("Elicitation answer field ", "")
            raise ValueError(message) from None

    return check


# -- showing results ---------------------------------------------------------------------------


def _block(console: Console, block: Mapping[str, Any]) -> None:
    kind = block.get("type")
    if kind == "text":
        _say(console, block.get("text", ""))
    elif kind in ("image", "audio"):
        _say(console, f"[{kind} {block.get('mimeType')}, {len(block.get('data', '')) * 3 // 4} bytes]", line=True)
    elif kind == "resource_link":
        _say(console, f"[link {block.get('uri')}{' ' + block['name'] if block.get('name') else ''}]", line=True)
    elif kind == "resource":
        _contents(console, block.get("resource") or {})
    else:
        _json(console, block)


def _contents(console: Console, item: Mapping[str, Any]) -> None:
    if isinstance(item.get("text"), str):
        _say(console, item["text"])
    else:
        size = len(item.get("blob", "")) * 3 // 4
        _say(console, f"[{item.get('mimeType') or 'binary'} {item.get('uri')}, {size} bytes]", line=True)


def _json_text(value: Any) -> str:
    # Indented and readable, with the controls json.dumps leaves raw (DEL, C1, bidi) escaped.
    return printable_json(json.dumps(value, indent=2, ensure_ascii=False))


def _json(console: Console, value: Any) -> None:
    _say(console, _json_text(value), json_text=True)


def _same_json(block: Mapping[str, Any], value: Any) -> bool:
    text = block.get("text", "")
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def show_result(console: Console, result: ToolResult | PromptResult | ResourceResult) -> None:
    """Print a final result readably: text as text, structured content as indented JSON."""
    if isinstance(result, ToolResult):
        if result.is_error:
            _say(console, "the tool reported an error:", style="bold red")
        structured = result.structured
        texts = [block for block in result.content if block.get("type") == "text"]
        if isinstance(structured, dict) and list(structured) == ["result"] and len(texts) == 1 \
                and structured["result"] == texts[0].get("text"):
            structured = None  # a wrapped plain value the text block already shows
        for block in result.content:
            if structured is not None and block.get("type") == "text" and _same_json(block, structured):
                continue  # the usual text copy of the structured content: shown once, below
            _block(console, block)
        if structured is not None:
            _json(console, structured)
    elif isinstance(result, PromptResult):
        if result.description:
            _say(console, result.description, style="dim")
        for message in result.messages:
            _say(console, f"{message.get('role')}:", style="bold", line=True)
            _block(console, message.get("content") or {})
    else:
        for item in result.contents:
            _contents(console, item)


def _hint_for(error: ClientError, url: str | None) -> str | None:
    required = error.data.get("requiredCapabilities") if isinstance(error.data, Mapping) else None
    if error.code == -32021 and isinstance(required, Mapping):
        if "extensions" in required and not ({"sampling", "roots"} & set(required)):
            return "note: this tool runs only as a task, and the client did not declare the tasks extension"
        flags = [flag for member, flag in (("sampling", "--sample-reply TEXT"), ("roots", "--root PATH"))
                 if member in required]
        if flags:
            return f"note: the server needs a capability this client did not declare: pass {' and '.join(flags)}"
    if isinstance(error, StateLost):
        return "note: the server restarted without a fixed MRTR_SECRET (or the retry reached a node with another " \
               "key): the answers given so far are lost, and the conversation must start again"
    if error.status == 404 and url is not None and error.code != -32601:
        parts = urlsplit(url)
        if parts.path.rstrip("/") != "/mcp":
            suggestion = urlunsplit((parts.scheme, parts.netloc, "/mcp", "", ""))
            return f"note: nothing answers MCP at {url}; MCP servers usually answer on the path /mcp: try {suggestion}"
        return f"note: nothing answers MCP at {url} (HTTP 404): check the address and the server's path"
    return None


def show_error(console: Console, error: ClientError, url: str | None = None) -> None:
    """Print a failed call: its JSON-RPC code and message (in red on a colour terminal), and what to do about it."""
    text = f"error {error.code}: {error.message}"
    if error.data is not None:
        text += f"\n{_json_text(error.data)}"
    hint = _hint_for(error, url)
    if hint is not None:
        text += f"\n{hint}"
    _say(console, text, style="red")


def _parameters(schema: Mapping[str, Any] | None) -> list[str]:
    properties = _mapping(_mapping(schema).get("properties"))
    required = _names(_mapping(schema).get("required"))
    lines = []
    for name, prop in properties.items():
        prop = _mapping(prop)
        kind = _kind(prop) or "any"
        bits = [kind, "required" if name in required else "optional", *_constraints(prop)]
        if "default" in prop:
            bits.append(f"default {json.dumps(prop['default'])}")
        if _options(prop):
            bits.append("one of " + ", ".join(str(value) for value, _ in _options(prop) or []))
        description = f": {prop['description']}" if isinstance(prop.get("description"), str) else ""
        lines.append(f"    {_one(name)}=<{_one(', '.join(bits))}>{description}")
    return lines


_HINTS = (("readOnlyHint", True, "read-only"), ("destructiveHint", True, "destructive"),
          ("idempotentHint", True, "idempotent"), ("openWorldHint", False, "closed world"))


def _traits(tool: Mapping[str, Any]) -> list[str]:
    """What a listing says about a tool beside its name: task support, its title and hints."""
    traits = []
    support = _mapping(tool.get("execution")).get("taskSupport")
    if support in ("optional", "required"):
        traits.append("runs as a task" if support == "required" else "may run as a task")
    annotations = _mapping(tool.get("annotations"))
    if isinstance(annotations.get("title"), str):
        traits.append(f"title: {annotations['title']}")
    traits += [label for key, value, label in _HINTS if annotations.get(key) is value]
    return traits + ui_traits(tool)  # MCP Apps: its interface, and who may call it


def _described(item: Mapping[str, Any]) -> str:
    """`` - description`` as plain text (a docstring's markup removed), or nothing."""
    description = item.get("description")
    return f" - {plain_text(description)}" if isinstance(description, str) and description else ""


async def show_listing(console: Console, client: Client) -> None:
    """Print the server's tools (with their parameters), prompts, resources and templates."""
    discovered = await client.discover()
    capabilities = discovered.get("capabilities") or {}
    info = _mapping(discovered.get("serverInfo") or _mapping(discovered.get("_meta")).get(
        "io.modelcontextprotocol/serverInfo"))
    if info:
        _say(console, f"{info.get('name')} {info.get('version', '')}".strip(), style="bold", line=True)
    sections: list[tuple[str, list[str]]] = []
    if "tools" in capabilities:
        lines = []
        for tool in await client.list_tools():
            traits = _traits(tool)
            lines.append(f"  {_one(tool['name'])}" + (f" [{_one(', '.join(traits))}]" if traits else "")
                         + _described(tool))
            lines += _parameters(tool.get("inputSchema"))
        sections.append(("tools", lines))
    if "prompts" in capabilities:
        lines = []
        for prompt in await client.list_prompts():
            lines.append(f"  {_one(prompt['name'])}" + _described(prompt))
            for argument in prompt.get("arguments") or []:
                need = "required" if argument.get("required") else "optional"
                lines.append(f"    {_one(argument['name'])}=<string, {need}>"  # prompt arguments are strings
                             + (f": {argument['description']}" if argument.get("description") else ""))
        sections.append(("prompts", lines))
    if "resources" in capabilities:
        lines = [f"  {_one(item['uri'])}" + _described(item) for item in await client.list_resources()]
        lines += [f"  {_one(item['uriTemplate'])} (template)" for item in await client.list_resource_templates()]
        sections.append(("resources", lines))
    for title, lines in sections:
        _say(console, f"{title}:", style="bold", line=True)
        for line in lines or ["  (none)"]:
            _say(console, line)


# -- the commands --------------------------------------------------------------------------------


def _client(target: str | Sequence[str], terminal: Terminal | None, max_rounds: int,
            deadline: float | None, **extra: Any) -> Client:
    options = terminal.client_options() if terminal is not None else {}
    options["deadline"] = DEFAULT_DEADLINE if deadline is None else deadline
    options.update(extra)
    if isinstance(target, str):
        return Client(target, max_rounds=max_rounds, **options)
    stderr = options.pop("stderr", None)
    return Client.stdio(target, max_rounds=max_rounds, stderr=stderr, **options)


def _interrupted(error: BaseException) -> bool:
    """Whether ``error`` is Ctrl-C, alone or as the one exception of a nursery's group."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return isinstance(error, KeyboardInterrupt)


async def _call_tool(client: Client, words: Sequence[str], *, terminal: Terminal, task_id: str | None,
                     resume: str, save_ui: str | None = None) -> ToolResult:
    handle: TaskHandle
    if task_id is not None:
        if words:
            raise ArgumentError("--task takes no tool or arguments: the task already has them")
        handle = client.task(task_id)
    else:
        if not words:
            raise ArgumentError("name the tool to call (mrtr list TARGET shows them)")
        name, *pairs = words
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        if name not in tools:
            known = ", ".join(sorted(tools)) or "none"
            raise ArgumentError(f"the server has no tool {name!r} (tools: {known})")
        if save_ui is not None and tools[name].ui is None:  # before the call: it may have effects
            raise ArgumentError(f"--save-ui: tool {name!r} has no interface (mrtr list TARGET marks those that do)")
        handle = await client.start_task(name, parse_arguments(pairs, tools[name].get("inputSchema")))
    try:  # from the first line that names the task: Ctrl-C may come at any moment after it
        if handle.id is not None:
            terminal.pause()
            _say(terminal.console, f"task {handle.id} (resume with: {resume} --task={handle.id})", style="dim",
                 line=True)
        return await handle.wait()
    except BaseException as error:
        if handle.id is None or not _interrupted(error):
            raise
        terminal.pause()
        if terminal.confirm(f"Cancel task {handle.id} on the server? [y/N] "):
            with trio.CancelScope(shield=True):
                await handle.cancel()
            _say(terminal.console, f"task {handle.id} cancelled", line=True)
        else:
            _say(terminal.console, f"task {handle.id} goes on; resume with: {resume} --task={handle.id}",
                 line=True)
        raise


async def run_call(target: str | Sequence[str], words: Sequence[str], *, prompt: str | None = None,
                   resource: str | None = None, terminal: Terminal, out: Console,
                   max_rounds: int = 10, deadline: float | None = None, task_id: str | None = None,
                   resume: str = "mrtr call TARGET", save_ui: str | None = None, **options: Any) -> int:
    """``mrtr call``: call a tool (``words[0]``, then ``name=value``), a prompt or a resource; return the exit code.

    ``deadline`` bounds each exchange with the server (default :data:`~mrtr.client.client.DEFAULT_DEADLINE`).
    A tool the server runs as a task prints the task's id (``resume`` is the command line
    that picks it up again, ``task_id`` what that command passes); Ctrl-C then asks
    whether to cancel it. A conversation whose state the server lost (it restarted
    without a fixed secret) is offered to start again. A tool with an interface (MCP Apps)
    is said to have one; ``save_ui`` is the file its HTML is written to. Other ``options``
    go to :class:`Client`.
    """
    url = target if isinstance(target, str) else None
    if save_ui is not None and (resource is not None or prompt is not None or task_id is not None):
        raise ArgumentError("--save-ui writes the interface of the tool called: name a tool, not --prompt, "
                            "--resource or --task")
    note = None
    while True:
        try:
            async with _client(target, terminal, max_rounds, deadline, **options) as client:
                result: ToolResult | PromptResult | ResourceResult
                if resource is not None:
                    if words:
                        raise ArgumentError("--resource takes no other arguments")
                    result = await client.read_resource(resource)
                elif prompt is not None:
                    arguments = {}
                    for pair in words:
                        name, sep, text = pair.partition("=")
                        if not sep or not name:
                            raise ArgumentError(f"{pair!r}: arguments are written name=value")
                        arguments[name] = text
                    result = await client.get_prompt(prompt, arguments)
                else:
                    result = await _call_tool(client, words, terminal=terminal, task_id=task_id, resume=resume,
                                              save_ui=save_ui)
                    note = await interface_note(client, words[0], save_ui) if words else None
                terminal.pause()
        except ClientError as error:
            terminal.pause()
            show_error(terminal.console, error, url)
            if isinstance(error, StateLost) and terminal.interactive and terminal.confirm("Start again? [y/N] "):
                continue
            return 1
        show_result(out, result)
        if note is not None:
            message, html = note
            if html is not None and save_ui is not None:
                try:
                    Path(save_ui).write_text(html, encoding="utf-8")
                except OSError as exc:
                    _say(terminal.console, f"mrtr call: cannot write the interface to {save_ui}: {exc}", style="red")
                    return 1
            _say(terminal.console, message, style="dim")
        return 1 if isinstance(result, ToolResult) and result.is_error else 0


async def run_list(target: str | Sequence[str], *, out: Console, errors: Console,
                   deadline: float | None = None, **options: Any) -> int:
    """``mrtr list``: print what the server offers; return the exit code (``deadline`` as for :func:`run_call`)."""
    try:
        async with _client(target, None, 10, deadline, **options) as client:
            await show_listing(out, client)
    except ClientError as error:
        show_error(errors, error, target if isinstance(target, str) else None)
        return 1
    return 0


def output_console(interactive: bool, *, stderr: bool = False) -> Console:
    """Where results (or, with ``stderr``, errors) go; coloured only when ``interactive``."""
    return Console(stderr=stderr, highlight=False, color_system="auto" if interactive else None, soft_wrap=True)
