"""Response shapes, declared once: a model of :mod:`memfs.models` is a dataclass deriving from
:class:`Shape`, and its fields, with their type annotations, are its JSON object on the wire.
From that one declaration come the object the API answers and the CLI prints
(:meth:`Shape.to_dict`), the model the client decodes it back into (:meth:`Shape.from_dict`)
and its JSON Schema in ``/openapi.json`` (:meth:`Shape.json_schema`), so that the three cannot
drift apart (issue 21).

A declaration says the types and which fields exist, never the values: every rule about those
is the store's. What a class may declare besides its fields:

- ``WIRE_TYPE``: the constant ``type`` field its object starts with (``"memory"``);
- ``WIRE_CONSTANTS``: fields the wire always has with the same value (the SDK's fields memfs
  has nothing for), each ``name -> (value, JSON Schema)``;
- ``SCHEMA_NAME``: its name among the document's component schemas (default: the class's);
- per field, ``field(metadata={"wire": False})`` (not on the wire: the client supplies it) or
  ``{"wire": "data"}`` (the name on the wire, when it is not the field's);
- per type, ``Annotated[T, Doc({...})]``: JSON Schema keywords added to the ones ``T`` gives
  (``format``, ``enum``, ``description``), or with ``replace=True`` put in their place (a
  free-form ``dict`` whose keys are known).

Types: ``str``, ``int``, ``float``, ``bool``, ``Any``, ``Literal[...]``, ``X | None``,
``list[X]``, ``tuple[X, ...]``, ``dict[str, X]`` and other shapes (and :class:`memfs.models.Actor`,
which keeps its own ``to_dict``, ``from_dict`` and ``json_schema``). Imports nothing of memfs.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, Union


@dataclass(frozen=True, eq=False)  # hashed by identity: a type's metadata must hash
class Doc:
    """``Annotated`` metadata: JSON Schema keywords for a field's type (see the module)."""

    keywords: Mapping[str, Any]
    replace: bool = False


def ref(cls: type) -> dict[str, Any]:
    """The ``$ref`` of a class's component schema."""
    return {"$ref": f"#/components/schemas/{schema_name(cls)}"}


def obj(props: Mapping[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON Schema object of ``props``, each required unless ``required`` says which."""
    return {"type": "object", "properties": dict(props),
            "required": list(props) if required is None else required}


def schema_name(cls: type) -> str:
    name: str = getattr(cls, "SCHEMA_NAME", None) or cls.__name__
    return name


class Shape:
    """A model whose dataclass fields are its wire shape (see the module)."""

    WIRE_TYPE: ClassVar[str | None] = None
    WIRE_CONSTANTS: ClassVar[Mapping[str, tuple[Any, Mapping[str, Any]]]] = {}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object on the wire."""
        plan = _plan(type(self))
        out: dict[str, Any] = {} if plan.type is None else {"type": plan.type}
        for f in plan.fields:
            value = getattr(self, f.attr)
            out[f.wire] = value if f.encode is None or value is None else f.encode(value)
        for name, (value, _) in plan.constants:
            out[name] = value.copy() if isinstance(value, list | dict) else value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **extra: Any) -> Self:
        """The model of a JSON object on the wire; fields it does not have take their
        defaults, fields it has that the model does not are ignored; ``extra``: values of
        fields (those not on the wire) given in place of the object's."""
        kwargs: dict[str, Any] = {}
        for f in _plan(cls).fields:
            if f.attr in extra or f.wire not in d:
                continue
            value = d[f.wire]
            kwargs[f.attr] = value if f.decode is None or value is None else f.decode(value)
        return cls(**kwargs, **extra)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """Its JSON Schema: an object of every wire field, all required (``null`` where
        the type says so)."""
        plan = _plan(cls)
        props: dict[str, Any] = {} if plan.type is None else {"type": {"const": plan.type}}
        for f in plan.fields:
            props[f.wire] = f.schema
        for name, (_, schema) in plan.constants:
            props[name] = dict(schema)
        return obj(props)


# --------------------------------------------------------------------------------------------
# the plan of a class, made once from its annotations

Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class _Field:
    attr: str
    wire: str
    #: model -> wire and back, None where the value is the same (a string, a number).
    encode: Convert | None
    decode: Convert | None
    schema: dict[str, Any]


@dataclass(frozen=True)
class _Plan:
    type: str | None
    fields: tuple[_Field, ...]
    constants: tuple[tuple[str, tuple[Any, Mapping[str, Any]]], ...]


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for f in dataclasses.fields(cls):
        wire = f.metadata.get("wire", f.name)
        if wire is False:
            continue
        encode, decode, schema = _type(hints[f.name])
        fields.append(_Field(f.name, wire, encode, decode, schema))
    return _Plan(getattr(cls, "WIRE_TYPE", None), tuple(fields),
                 tuple(getattr(cls, "WIRE_CONSTANTS", {}).items()))


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type(hint: Any) -> tuple[Convert | None, Convert | None, dict[str, Any]]:
    """(encode, decode, JSON Schema) of a field's type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        encode, decode, schema = _type(args[0])
        for doc in args[1:]:
            if isinstance(doc, Doc):
                schema = dict(doc.keywords) if doc.replace else {**schema, **doc.keywords}
        return encode, decode, schema
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"unsupported wire type {hint!r}: only X | None")
        encode, decode, schema = _type(inner[0])
        return encode, decode, _nullable(schema)
    if origin is Literal:
        return None, None, {"enum": list(args)}
    if origin in (list, tuple):
        item = args[0] if args else Any
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"unsupported wire type {hint!r}: only tuple[X, ...]")
        encode, decode, schema = _type(item)
        make = list if origin is list else tuple
        array: dict[str, Any] = {"type": "array"}
        if schema:
            array["items"] = schema
        return (_each(encode, list), _each(decode, make), array)
    if origin is dict:
        schema = _type(args[1])[2]
        obj: dict[str, Any] = {"type": "object"}
        if schema:
            obj["additionalProperties"] = schema
        return dict, None, obj
    if hint is Any:
        return None, None, {}
    if hint is float:
        return None, float, {"type": "number"}
    if hint in _SIMPLE:
        return None, None, {"type": _SIMPLE[hint]}
    if isinstance(hint, type) and hasattr(hint, "from_dict") and hasattr(hint, "json_schema"):
        return _to_dict, hint.from_dict, ref(hint)
    raise TypeError(f"unsupported wire type {hint!r}")


def _to_dict(value: Any) -> Any:
    return value.to_dict()


def _each(convert: Convert | None, make: Callable[[Any], Any]) -> Convert:
    if convert is None:
        return make
    return lambda values: make(convert(v) for v in values)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null."""
    t = schema.get("type")
    if isinstance(t, str):
        out = {**schema, "type": [t, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    if "enum" in schema and len(schema) == 1:
        return {"enum": [*schema["enum"], None]}
    return {"oneOf": [schema, {"type": "null"}]}
