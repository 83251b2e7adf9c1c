"""The API's inputs, declared once: every operation's query parameters and JSON body fields
with their types (:class:`Param`), from which both the request checks (:class:`Query`,
:func:`check_body`) and ``/openapi.json`` (:func:`document`) are made (issue 19: the document
had every query parameter a string, every body field ``{}``).

A declaration checks shapes only: that a value is a string (in a query, of UTF-8 bytes), an
integer (ASCII digits, 64 bits: :func:`memfs.rules.parse_int`), a number
(:func:`parse_number`), a boolean, an object or an array (of strings or of objects), that a
required one is there, and that a body holds no field it does not declare. Every rule about
the values themselves (ranges, lengths, enums, formats) is the store's, which raises the same
400 whatever layer calls it; an ``enum``, a range (``minimum``, ``maximum``), a length
(``min_length``, ``max_length``) or a ``pattern`` here only documents what the store takes,
and is declared with the very constant the store's check reads (:mod:`memfs.rules`), so that
the two cannot drift apart (issue 38 S6: schemathesis found values valid by the document that
the store refused; tests/unit/api/test_openapi_constraints.py holds them to it).
An optional body field may be ``null`` (the same as leaving it out, as for the SDK); a
required one may not. Query parameters the declaration does not name are ignored, as
the SDK's own qualifiers would be.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.datastructures import QueryParams

from .. import errors
from ..rules import parse_int

#: The JSON Schema types a value may be declared with.
TYPES = ("string", "integer", "number", "boolean", "object", "array")


@dataclass(frozen=True)
class Param:
    """One query parameter or body field. ``name`` is as on the wire (``statuses[]``,
    ``created_at[gte]``); ``types`` one or more of :data:`TYPES`; ``items`` the type of an
    array's items."""

    name: str
    types: tuple[str, ...]
    required: bool = False
    items: str | None = None
    enum: tuple[str, ...] = ()
    format: str | None = None
    description: str = ""
    #: What the store takes (see the module's docstring): a number's range, a string's length
    #: in characters, a string's pattern (Python's ``re`` syntax, ECMA-262 compatible).
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    #: The error a value of the wrong type raises (the store's own for that kind of value:
    #: InvalidPath for a path, InvalidContent for a content, so that its error code is).
    invalid: type[errors.InvalidRequest] = errors.InvalidRequest

    @property
    def key(self) -> str:
        """The name without an array's ``[]``."""
        return self.name.removesuffix("[]")

    def schema(self, *, nullable: bool = False, query: bool = False) -> dict[str, Any]:
        """Its JSON Schema (``query``: as a query parameter, where :class:`Query` refuses an
        empty value: a string there is at least one character long)."""
        types = list(self.types) + (["null"] if nullable else [])
        out: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if self.items is not None:
            out["items"] = {"type": self.items}
            if query and self.items == "string":
                out["items"]["minLength"] = 1
        min_length = self.min_length
        if query and "string" in self.types:
            min_length = max(1, min_length or 0)
        for key, value in (("minimum", self.minimum), ("maximum", self.maximum),
                           ("minLength", min_length), ("maxLength", self.max_length),
                           ("pattern", self.pattern)):
            if value is not None:
                out[key] = value
        if self.enum:
            out["enum"] = list(self.enum) + ([None] if nullable else [])
        if self.format is not None:
            out["format"] = self.format
        if self.description:
            out["description"] = self.description
        return out


def _param(types: tuple[str, ...], name: str, **kw: Any) -> Param:
    required = name.endswith("!")
    return Param(name.rstrip("!"), types, required=required, **kw)


def string(name: str, **kw: Any) -> Param:
    """A string (``name!``: required)."""
    return _param(("string",), name, **kw)


def time(name: str, **kw: Any) -> Param:
    """An RFC 3339 time, as a string."""
    return _param(("string",), name, format="date-time", **kw)


def integer(name: str, **kw: Any) -> Param:
    return _param(("integer",), name, **kw)


def number(name: str, **kw: Any) -> Param:
    """A number (in a query: :func:`parse_number`)."""
    return _param(("number",), name, **kw)


def boolean(name: str, **kw: Any) -> Param:
    return _param(("boolean",), name, **kw)


def obj(name: str, **kw: Any) -> Param:
    """A JSON object."""
    return _param(("object",), name, **kw)


def array(name: str, items: str = "object", **kw: Any) -> Param:
    """A JSON array (in a query, ``name[]`` repeated) of ``items``."""
    return _param(("array",), name, items=items, **kw)


def either(name: str, *types: str, **kw: Any) -> Param:
    """A value of any of ``types`` (a model: its id or an object)."""
    return _param(types, name, **kw)


# --------------------------------------------------------------------------------------------
# checks

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,),
}

_NUMBER_RE = re.compile(
    r"-?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][-+]?[0-9]{1,3})?")


def parse_number(text: str) -> float | None:
    """A number as a client writes one in a query: ASCII digits, one ``.``, an exponent
    (``0.5``, ``.5``, ``5e-1``); None for anything else (``float()`` alone takes ``nan``,
    ``inf``, Unicode digits, ``_`` and spaces)."""
    if not _NUMBER_RE.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _is(value: Any, type_: str) -> bool:
    if type_ in ("integer", "number") and isinstance(value, bool):
        return False  # JSON's true is no number
    return isinstance(value, _JSON_TYPES[type_])


def _a(types: Iterable[str]) -> str:
    names = {"string": "a string", "integer": "an integer", "number": "a number",
             "boolean": "true or false",
             "object": "an object", "array": "a list"}
    return " or ".join(names[t] for t in types)


def check_body(body: Any, fields: Sequence[Param]) -> dict[str, Any]:
    """``body`` (parsed JSON) as a checked object: no field that ``fields`` does not name,
    every required one, each of its declared type (an optional one may be null).

    :raises InvalidRequest:
    """
    if not isinstance(body, dict):
        raise errors.InvalidRequest("request body must be a JSON object")
    declared = {f.name: f for f in fields}
    unknown = sorted(set(body) - set(declared))
    if unknown:
        raise errors.InvalidRequest(
            f"unknown field {unknown[0]!r}; allowed: {', '.join(sorted(declared)) or 'none'}")
    for f in fields:
        if f.name not in body:
            if f.required:
                raise errors.InvalidRequest(f"{f.name} is required")
            continue
        value = body[f.name]
        if value is None and not f.required:
            continue
        if not any(_is(value, t) for t in f.types):
            raise f.invalid(f"{f.name} must be {_a(f.types)}")
        if f.items is not None and not all(_is(v, f.items) for v in value):
            raise f.invalid(f"{f.name} must be a list of {f.items}s")
    return body


def _check_utf8(raw: bytes, names: set[str], objects: Sequence[str] = ()) -> None:
    """:raises InvalidRequest: a parameter of ``names``, or a key of an object parameter of
    ``objects`` (``metadata[KEY]``), whose value, percent-decoded, is not UTF-8; or such a
    key that is not (another name that is not UTF-8 is none of them)."""
    starts = tuple(f"{o}[".encode() for o in objects)
    for part in raw.split(b"&"):
        key, _, value = part.partition(b"=")
        try:
            name = unquote_to_bytes(key.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            if starts and unquote_to_bytes(key.replace(b"+", b" ")).startswith(starts):
                raise errors.InvalidRequest(
                    f"a key of {objects[0]}[…] is not valid UTF-8 text") from None
            continue
        if name not in names and not (starts and name.encode().startswith(starts)):
            continue
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            raise errors.InvalidRequest(f"{name} is not valid UTF-8 text") from None


def _read_object(params: QueryParams, name: str) -> dict[str, str] | None:
    """An object of strings as the SDK sends one in a query (``name[key]=value`` for each
    pair: its ``deepObject`` style); None when no pair is there. A value may be empty (it is
    a value, not a left-out filter).

    :raises InvalidRequest: a key given twice; the name without brackets (``name=x``:
        left out, it would widen the listing to every item).
    """
    if name in params:
        raise errors.InvalidRequest(
            f"{name} is an object: give each pair as {name}[KEY]=VALUE")
    found: dict[str, str] = {}
    for key, value in params.multi_items():
        if key.startswith(name + "[") and key.endswith("]"):
            inner = key[len(name) + 1:-1]
            if inner in found:
                raise errors.InvalidRequest(f"{name}[{inner[:64]}] is given twice")
            found[inner] = value
    return found or None


class Query:
    """The declared query parameters of a request, checked and typed at once (API.md §1.4:
    the SDK's bracketed keys, ``name[]`` repeats (bare repeats accepted), ``true``/``false``).
    An empty value is refused, not read as absent. The accessors read what was checked; one
    of a parameter the operation does not declare is a bug (KeyError).

    ``raw``: the request's query string as sent; a declared parameter whose value is not
    UTF-8 there (``%ED%A0%80``, a lone surrogate's bytes; ``%FF``) is refused, rather than
    read with U+FFFD in place of its bytes.

    :raises InvalidRequest: a value of the wrong type, empty or not UTF-8, a required one
        missing.
    """

    def __init__(self, params: QueryParams, declared: Sequence[Param], *,
                 raw: bytes = b"") -> None:
        self.values: dict[str, Any] = {}
        self.declared = {p.key: p for p in declared}
        if raw and declared:
            _check_utf8(raw, {p.name for p in declared} | set(self.declared),
                        [p.name for p in declared if p.types == ("object",)])
        for p in declared:
            value = self._read(params, p)
            if value is None and p.required:
                hint = f" ({p.description})" if p.description else ""
                raise errors.InvalidRequest(f"{p.name} is required{hint}")
            self.values[p.key] = value

    @staticmethod
    def _read(params: QueryParams, p: Param) -> Any:
        if p.types == ("object",):
            return _read_object(params, p.name)
        if p.types == ("array",):
            values = params.getlist(p.key + "[]") + params.getlist(p.key)
            if "" in values:
                raise errors.InvalidRequest(f"{p.name} has an empty value: leave it out, or "
                                            "give it one")
            return values or None
        value = params.get(p.name)
        if value is None:
            return None
        if value == "":
            # Not read as absent (issue 38 S6): a client's empty variable would widen what it
            # asked for (?limit= as no limit, ?path_prefix= as every path).
            raise errors.InvalidRequest(f"{p.name} is empty: leave it out, or give it a value")
        if p.types == ("integer",):
            number = parse_int(value)
            if number is None:
                raise errors.InvalidRequest(f"{p.name} must be an integer, not {value[:40]!r}")
            return number
        if p.types == ("number",):
            real = parse_number(value)
            if real is None:
                raise errors.InvalidRequest(f"{p.name} must be a number, not {value[:40]!r}")
            return real
        if p.types == ("boolean",):
            if value.lower() in ("true", "1"):
                return True
            if value.lower() in ("false", "0"):
                return False
            raise errors.InvalidRequest(f"{p.name} must be true or false, not {value[:40]!r}")
        return value

    def _get(self, name: str) -> Any:
        if name not in self.declared:
            raise KeyError(f"query parameter {name!r} is not declared for this operation")
        return self.values[name]

    def text(self, name: str) -> str | None:
        value: str | None = self._get(name)
        return value

    def texts(self, name: str) -> list[str] | None:
        value: list[str] | None = self._get(name)
        return value

    def integer(self, name: str, default: int | None) -> int | None:
        value = self._get(name)
        return default if value is None else int(value)

    def number(self, name: str, default: float | None) -> float | None:
        value = self._get(name)
        return default if value is None else float(value)

    def mapping(self, name: str) -> dict[str, str] | None:
        value: dict[str, str] | None = self._get(name)
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self._get(name)
        return default if value is None else bool(value)


# --------------------------------------------------------------------------------------------
# the OpenAPI document


@dataclass(frozen=True)
class Stream:
    """What an SSE response sends: each event's name -> the schema of its ``data``."""

    events: Mapping[str, Any]
    description: str


def operation(
    *, operation_id: str, summary: str, path: str, method: str, query: Sequence[Param],
    body: Sequence[Param] | None, raw_body: Sequence[str], response: tuple[str, Any] | None,
    headers: Sequence[dict[str, Any]], extension: bool,
) -> dict[str, Any]:
    """The OpenAPI Operation Object of one operation. ``response``: (media type, schema or
    :class:`Stream`), None when it always answers an error; ``raw_body``: the media types of
    an upload (the body is not JSON)."""
    params = [{"name": p.split("}")[0], "in": "path", "required": True,
               "schema": {"type": "string"}} for p in path.split("{")[1:]]
    for q in query:
        entry: dict[str, Any] = {"name": q.name, "in": "query", "required": q.required,
                                 "schema": q.schema(query=True)}
        if q.types == ("array",):
            entry.update(style="form", explode=True)
        elif q.types == ("object",):
            entry.update(style="deepObject", explode=True)
            entry["schema"]["additionalProperties"] = {"type": "string"}
        if q.description:
            entry["description"] = q.description
        params.append(entry)
    params += headers
    responses: dict[str, Any] = {}
    if response is not None:
        media, schema = response
        if isinstance(schema, Stream):
            content = {media: {
                "schema": {"type": "string", "description": schema.description},
                # Each frame: "event: NAME", "data: JSON" (and "id:"), one per event.
                "x-memfs-sse-events": {name: s for name, s in schema.events.items()},
            }}
        else:
            content = {media: {"schema": schema}}
        responses["200"] = {"description": "OK", "content": content}
    responses["default"] = {"description": "Error", "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    out: dict[str, Any] = {"operationId": operation_id, "summary": summary,
                           "parameters": params, "responses": responses}
    if extension:
        out["x-memfs-extension"] = True
    if raw_body:
        out["requestBody"] = {"required": True, "content": {
            t: {"schema": {"type": "string", "format": "binary"}} for t in raw_body}}
    elif body is not None:
        required = [f.name for f in body if f.required]
        schema_: dict[str, Any] = {
            "type": "object", "additionalProperties": False,
            "properties": {f.name: f.schema(nullable=not f.required) for f in body}}
        if required:
            schema_["required"] = required
        out["requestBody"] = {"required": bool(required), "content": {
            "application/json": {"schema": schema_}}}
    return out
