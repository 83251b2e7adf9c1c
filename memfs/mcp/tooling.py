"""What every MCP tool of memfs shares: its spec (:class:`ToolSpec`: name, description, JSON
schema, honest annotations), the state of one call (:class:`Act`: the store it is about, its
event pair) and the run of a call (:func:`run_tool`): arguments checked against the schema,
the logic driven, every failure made a result (``<error type>: <message>``, the HTTP API's
error types, :data:`memfs.errors.WIRE`), and the call recorded as an ``agent.tool_use`` /
``agent.tool_result`` pair of the session.

Every rule stays in the store: a tool names the calls it needs (:class:`memfs.toolkit.Call`)
and words what the store answers, with how to go on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from .. import errors
from ..models import Memory
from ..toolkit import Call, event_pair
from .reach import Reach, StoreView

log = logging.getLogger(__name__)

#: An argument's string longer than this is cut in the call's event (the version keeps a
#: write's content; the event says what was asked).
EVENT_ARGUMENT_CHARS = 4000
#: The arguments an event keeps are at most this many characters of JSON (past it, each
#: argument is only named, with its size).
EVENT_INPUT_CHARS = 16_000
#: Lists and objects in an argument are kept this deep in its event.
EVENT_DEPTH = 4
#: An error message is cut past this (a schema error may quote a huge argument).
MESSAGE_CHARS = 500


@dataclass(frozen=True)
class Outcome:
    """What a tool returns: the text the model reads and the same as structured content."""

    text: str
    data: dict[str, Any]


@dataclass
class Act:
    """One tool call as it goes: the reach, the arguments, the store it is about once looked
    up, and what its event pair says (``operation``, ``file_path``, ``new_path``); a write
    that recorded its pair in its own transaction sets ``recorded``."""

    reach: Reach
    tool: str
    args: dict[str, Any]
    store: StoreView | None = None
    operation: str = ""
    file_path: str = ""
    new_path: str | None = None
    recorded: bool = False
    memory: Memory | None = None

    def store_of(self, ref: Any) -> Generator[Call, Any, StoreView]:
        """Look the store up (see :meth:`Reach.store_of`); the call is then about it."""
        self.store = yield from self.reach.store_of(ref)
        return self.store

    def writer(self) -> Generator[Call, Any, Any]:
        """Who writes to the call's store (:meth:`Reach.writer`)."""
        assert self.store is not None
        return (yield from self.reach.writer(self.store))

    def pair(self, text: str, *, is_error: bool) -> list[dict[str, Any]] | None:
        """The call's event pair with ``text`` as its result (None without a session)."""
        if self.reach.session is None:
            return None
        return event_pair(event_input(self.args), self.operation or self.tool,
                          safe_text(self.file_path), text, is_error=is_error,
                          new_path=None if self.new_path is None else safe_text(self.new_path),
                          name=self.tool)

    def events_for(self, text: str) -> list[dict[str, Any]] | None:
        """The pair of a write that records it in its own transaction (``events=``): the
        call counts as recorded if it succeeds (a tool that goes on after such a write
        failed sets ``recorded`` back)."""
        self.recorded = self.reach.session is not None
        return self.pair(text, is_error=False)


#: A tool's logic: yields store calls, returns its outcome, raises a MemfsError whose message
#: says how to go on.
Logic = Callable[[Act], Generator[Call, Any, Outcome]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what tools/list says of it, and its logic."""

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    logic: Logic
    #: It changes nothing (readOnlyHint); else it writes.
    read_only: bool
    #: It may replace or remove what is stored (destructiveHint; a write tool only).
    destructive: bool = False
    #: Calling it again with the same arguments changes nothing more (idempotentHint).
    idempotent: bool = False
    validator: Any = field(default=None, compare=False, repr=False)

    def annotations(self) -> dict[str, Any]:
        """The MCP tool annotations, honest: memfs reaches no world beyond its stores."""
        out: dict[str, Any] = {"title": self.title, "readOnlyHint": self.read_only}
        if not self.read_only:
            out["destructiveHint"] = self.destructive
        out["idempotentHint"] = self.idempotent
        out["openWorldHint"] = False
        return out


def tool(name: str, title: str, description: str, properties: dict[str, Any],
         required: list[str], logic: Logic, *, read_only: bool, destructive: bool = False,
         idempotent: bool = False) -> ToolSpec:
    """A :class:`ToolSpec` whose schema is an object of ``properties`` (no others)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": required, "additionalProperties": False}
    if not required:
        del schema["required"]
    jsonschema.Draft202012Validator.check_schema(schema)
    return ToolSpec(name, title, description, schema, logic, read_only, destructive,
                    idempotent, jsonschema.Draft202012Validator(schema))


# -- arguments ----------------------------------------------------------------------------------


def schema_error(spec: ToolSpec, args: Any) -> errors.InvalidRequest | None:
    """The first way ``args`` breaks the tool's schema, naming the argument (None: fine)."""
    if not isinstance(args, dict):
        return errors.InvalidRequest("the arguments must be an object")
    found = sorted(spec.validator.iter_errors(args), key=lambda e: list(e.path))
    if not found:
        return _surrogate_error(args)
    e = found[0]
    where = ".".join(str(p) for p in e.path)
    if e.validator == "additionalProperties":
        extra = sorted(set(args) - set(spec.schema["properties"]))
        return errors.InvalidRequest(
            f"unknown argument {cut(', '.join(extra), 100)}: {spec.name} takes "
            f"{', '.join(spec.schema['properties'])}")
    if e.validator == "required":
        missing = [p for p in spec.schema.get("required", ()) if p not in args]
        return errors.InvalidRequest(f"{', '.join(missing)} is required")
    rule = e.schema if isinstance(e.schema, dict) else {}
    if e.validator == "type":
        return errors.InvalidRequest(f"{where} must be of type {rule.get('type')}")
    if e.validator == "enum":
        return errors.InvalidRequest(
            f"{where} must be one of {', '.join(map(str, rule.get('enum', [])))}")
    if e.validator in ("minimum", "maximum"):
        return errors.InvalidRequest(
            f"{where} must be {'at least' if e.validator == 'minimum' else 'at most'} "
            f"{e.validator_value}")
    if e.validator in ("anyOf", "oneOf") and "description" in rule:
        return errors.InvalidRequest(f"{where} must be {rule['description']}")
    if e.validator in ("maxLength", "minLength", "pattern", "maxItems"):
        return errors.InvalidRequest(f"{where}: {_rule_words(e.validator, e.validator_value)}")
    return errors.InvalidRequest(f"{where or 'arguments'}: {cut(e.message, 200)}")


def _surrogate_error(value: Any, where: str = "") -> errors.InvalidRequest | None:
    """A string argument no store can keep (a lone surrogate, which a JSON parser lets
    through as ``"\\ud800"``), named: checked once here, not by each store call."""
    if isinstance(value, str):
        if safe_text(value) != value:
            return errors.InvalidRequest(
                f"{where}: is not valid UTF-8 text (it holds a lone surrogate)")
        return None
    items = (value.items() if isinstance(value, dict) else
             enumerate(value) if isinstance(value, list) else ())
    for k, v in items:
        inner = f"{where}.{k}" if where else str(k)
        problem = _surrogate_error(v, inner)
        if problem is not None:
            return problem
    return None


def safe_text(text: str) -> str:
    """``text`` as valid UTF-8 text: a lone surrogate as its escape (``\\ud800``)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _rule_words(rule: str, value: Any) -> str:
    return {"maxLength": f"at most {value} characters",
            "minLength": f"at least {value} character{'s' if value != 1 else ''}",
            "pattern": f"must match {value}",
            "maxItems": f"at most {value} items"}[rule]


def cut(text: str, most: int = MESSAGE_CHARS) -> str:
    return text if len(text) <= most else text[:most] + f"… ({len(text) - most} more characters)"


def event_input(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the call's event keeps them, whatever the model sent: valid text
    (:func:`safe_text`), long strings cut, lists and objects cut in length and depth, and
    at most :data:`EVENT_INPUT_CHARS` of JSON in all (past it, each argument only named with
    its size: the event says what was asked, not all of it)."""
    def small(v: Any, depth: int) -> Any:
        if isinstance(v, str):
            v = safe_text(v)
            if len(v) > EVENT_ARGUMENT_CHARS:
                return v[:EVENT_ARGUMENT_CHARS] + f"[... {len(v) - EVENT_ARGUMENT_CHARS} more]"
            return v
        if isinstance(v, (list, dict)) and depth >= EVENT_DEPTH:
            return f"[... {type(v).__name__} nested too deep, cut]"
        if isinstance(v, list):
            return [small(x, depth + 1) for x in v[:100]]
        if isinstance(v, dict):
            return {safe_text(str(k))[:100]: small(x, depth + 1)
                    for k, x in list(v.items())[:50]}
        return v
    kept: dict[str, Any] = small(args, 0)
    size = len(json.dumps(kept))
    if size <= EVENT_INPUT_CHARS:
        return kept
    return {k: (v if isinstance(v, (bool, int, float)) or v is None else
                f"[... {len(json.dumps(v))} characters of JSON, cut]")
            for k, v in kept.items()}


# -- failures -----------------------------------------------------------------------------------

#: How to go on after a store's refusal that the tool did not word itself.
_HINTS: list[tuple[type[errors.MemfsError], str]] = [
    (errors.ReadOnly, "memory_list_stores shows the stores you may write"),
    (errors.StoreArchived, "an archived store can be read, not changed"),
    (errors.LimitExceeded, "delete memories that are no longer needed (memory_delete), or "
                           "write to another store"),
    (errors.ContentTooLarge, "split it into several memories"),
    (errors.InvalidCursor, "start again without it"),
    (errors.Busy, "try again in a moment"),
    (errors.StorageError, "the store cannot answer now; try again later"),
]


def failure(e: BaseException) -> dict[str, Any]:
    """The error object of a failed call (``type``, ``message``): the HTTP API's error type
    of the exception (:func:`memfs.errors.to_wire`), its message with how to go on."""
    if not isinstance(e, errors.MemfsError):
        log.exception("an MCP tool failed", exc_info=e)
    _, err = errors.to_wire(e)
    message = str(err["message"])
    for cls, hint in _HINTS:
        if isinstance(e, cls) and hint not in message:
            message = f"{message}: {hint}"
            break
    out: dict[str, Any] = {"type": err["type"], "message": cut(message)}
    if "details" in err:
        out["details"] = err["details"]
    return out


def error_text(err: dict[str, Any]) -> str:
    """The one line a failed call's content is: ``<error type>: <message>``."""
    return f"{err['type']}: {' '.join(str(err['message']).split())}"


# -- a call -------------------------------------------------------------------------------------


def run_tool(reach: Reach, spec: ToolSpec, args: Any
             ) -> Generator[Call, Any, tuple[bool, str, dict[str, Any]]]:
    """Run one call of ``spec``: ``(is_error, text, structured content)``; never raises a
    MemfsError (a bug is logged and answered as the API answers one: ``api_error``)."""
    act = Act(reach, spec.name, args if isinstance(args, dict) else {})
    problem = schema_error(spec, args)
    try:
        if problem is not None:
            raise problem
        out = yield from spec.logic(act)
    except Exception as e:
        # A write that failed recorded nothing (its events were in its transaction): the
        # failure's pair is recorded however far the call went.
        err = failure(e)
        text = error_text(err)
        yield from record(act, act.pair(text, is_error=True))
        return True, text, {"type": "error", "error": err}
    if not act.recorded:
        pair = act.pair(out.text, is_error=False)
        if pair is not None and act.memory is not None:
            pair[1]["memory_id"] = act.memory.id
            pair[1]["memory_version_id"] = act.memory.memory_version_id
        yield from record(act, pair)
    return False, out.text, out.data


def record(act: Act, pair: list[dict[str, Any]] | None) -> Generator[Call, Any, None]:
    """Record a call's event pair no write recorded. A failure is logged, never the call's."""
    if pair is None:
        return
    store_id = act.store.id if act.store is not None else None
    try:
        yield Call("events.add", (act.reach.session, pair), {"store_id": store_id})
    except errors.MemfsError as e:
        log.error("could not record the events of %s: %s", act.tool, e.message)
