"""Session spec files: ``memfs run --spec FILE`` and ``memfs session create --spec FILE``.

A spec is YAML (JSON is YAML too) describing a session as the API's ``sessions.create`` does
(API.md §4.2)::

    title: Triage bot                  # optional; memfs run defaults to the command line
    metadata: {team: support}          # optional; strings only (quote numbers and yes/no)
    resources:
      - type: memory_store
        memory_store: User Preferences # a name or an id, looked up like --store
        access: read_write             # or read_only; the default is read_write
        instructions: Check before answering.
      - type: memory_store
        memory_store: Sprint 12
        scope: workflow                # or general, the default (SPEC §8)
        pinned_budget: 8000            # characters of pinned memories (SPEC §9; 4,000)
      - type: memory_store
        memory_store_id: memstore_01…  # the API's own key: the wire shape pasted as is
        access: read_only

Each entry is the wire shape of ``BetaManagedAgentsMemoryStoreResourceParam`` (with memfs's
extensions ``memfs_scope`` and ``memfs_pinned_budget``), with three additions:
``memory_store`` names the store by name or id (as ``--store`` does), ``scope`` is
``memfs_scope`` (as ``--store NAME:workflow``) and ``pinned_budget`` is ``memfs_pinned_budget``
(as ``--store NAME:pinned=8000``: the characters of pinned memories the store may put in the
prompt, SPEC §9); an entry has exactly one of ``memory_store`` and ``memory_store_id``, and at
most one of each short name and its long one. ``memory_store_id`` is resolved the same way,
so a name there works too, but an id is what it is meant to hold.

:func:`load` reads and checks a spec into :class:`SessionSpec`, whose ``attachments`` are the
same :class:`~memfs.launcher.plan.Attachment` objects ``--store`` gives (plus their instructions).
Nothing here talks to a store except :meth:`SessionSpec.resolve`, which looks the stores up.
Every rule the store has is the store's (:func:`memfs.rules.validate_session_resource`,
``validate_metadata``): this module checks only the file's shape (unknown keys are refused, so
a typo never passes silently) and names where a message belongs: ``FILE: resources[1]: …``.
Every error is :class:`~memfs.errors.InvalidRequest` (exit 5), or whatever the store raises
for a store that is not there (``NotFound``, exit 3, as ``--store`` gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from ..errors import InvalidRequest, MemfsError
from ..protocol import StoreAPI
from ..rules import (
    Limits,
    validate_metadata,
    validate_pinned_budget,
    validate_session_resource,
    validate_text,
)
from .plan import Attachment

#: The keys of a spec, and of one of its resources.
SPEC_KEYS = ("title", "metadata", "resources")
RESOURCE_KEYS = ("type", "memory_store", "memory_store_id", "access", "instructions", "scope",
                 "memfs_scope", "pinned_budget", "memfs_pinned_budget")


@dataclass
class SessionSpec:
    """A checked spec: what ``--store``/``--instructions`` would have given, plus a title
    and metadata. ``source`` is the file name every error message starts with."""

    source: str
    attachments: list[Attachment] = field(default_factory=list)
    title: str | None = None
    metadata: dict[str, str] | None = None

    def resources(self) -> list[dict[str, Any]]:
        """The wire ``resources`` (API.md §4.2); ids only once :meth:`resolve` has run."""
        out: list[dict[str, Any]] = []
        for a in self.attachments:
            res: dict[str, Any] = {
                "type": "memory_store", "memory_store_id": a.ref, "access": a.access,
                "memfs_scope": a.scope,
            }
            if a.instructions is not None:
                res["instructions"] = a.instructions
            if a.pinned_budget is not None:
                res["memfs_pinned_budget"] = a.pinned_budget
            out.append(res)
        return out

    def resolve(self, store: StoreAPI) -> SessionSpec:
        """This spec with every store named by its id, looked up as ``--store`` does.

        :raises NotFound, InvalidRequest: the store's error, after ``FILE: resources[i]: ``.
        """
        resolved = []
        for i, a in enumerate(self.attachments):
            try:
                found = store.stores.resolve(a.ref)
            except MemfsError as e:
                e.args = (f"{self.source}: resources[{i}]: {e.message}", *e.args[1:])
                raise
            resolved.append(replace(a, ref=found.id))
        return replace(self, attachments=resolved)


def load(path: str, limits: Limits | None = None) -> SessionSpec:
    """Read and check the spec file ``path`` (see the module docstring).

    :raises InvalidRequest: the file cannot be read, is not YAML, or breaks a rule; the
        message names the file and where in it.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InvalidRequest(f"cannot read the session spec {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"{path}: not UTF-8 text (byte {e.start})") from None
    return parse(text, path, limits)


def parse(text: str, source: str = "<spec>", limits: Limits | None = None) -> SessionSpec:
    """Check the spec in ``text``; ``source`` names it in messages. See :func:`load`."""
    lim = limits or Limits()
    try:
        doc = _safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidRequest(f"{source}: {_yaml_problem(e)}") from None

    def bad(where: str, message: str) -> InvalidRequest:
        return InvalidRequest(f"{source}: {where}{message}")

    if doc is None:
        raise bad("", "the session spec is empty (it needs at least resources: [])")
    if not isinstance(doc, dict):
        raise bad("", "a session spec must be a mapping with resources, title and metadata")
    _refuse_unknown(doc, SPEC_KEYS, lambda key: bad("", f"unknown key {key!r} (expected "
                                                        f"{', '.join(SPEC_KEYS)})"))
    spec = SessionSpec(source)
    try:
        validate_text(doc, "the spec")
    except InvalidRequest as e:
        raise bad("", e.message) from None
    if "title" in doc:
        spec.title = doc["title"]
        if spec.title is not None and not isinstance(spec.title, str):
            # The store's own message (create_session), with a YAML hint.
            raise bad("", f"title must be a string{_quote_hint(spec.title)}")
    if "metadata" in doc and doc["metadata"] is not None:
        try:
            spec.metadata = validate_metadata(doc["metadata"], lim)
        except InvalidRequest as e:
            raise bad("", e.message + _metadata_hint(doc["metadata"])) from None
    if "resources" not in doc:
        raise bad("", "resources is required (a list of memory_store entries; may be [])")
    resources = doc["resources"]
    if not isinstance(resources, list):
        raise bad("", "resources must be a list")
    for i, entry in enumerate(resources):
        spec.attachments.append(_attachment(entry, lim, lambda m, i=i: bad(f"resources[{i}]: ", m)))
    return spec


def _attachment(entry: Any, lim: Limits, bad: Any) -> Attachment:
    """One resource entry as an Attachment (its ref still a name or id)."""
    if not isinstance(entry, dict):
        raise bad("each resource must be a mapping (type: memory_store, memory_store: NAME…)")
    _refuse_unknown(entry, RESOURCE_KEYS,
                    lambda key: bad(f"unknown key {key!r} (expected {', '.join(RESOURCE_KEYS)})"))
    if "memory_store" in entry and "memory_store_id" in entry:
        raise bad("give memory_store (a name or id) or memory_store_id, not both")
    if "scope" in entry and "memfs_scope" in entry:
        raise bad("give scope or memfs_scope, not both")
    if "pinned_budget" in entry and "memfs_pinned_budget" in entry:
        raise bad("give pinned_budget or memfs_pinned_budget, not both")
    wire = {k: v for k, v in entry.items()
            if k not in ("memory_store", "scope", "pinned_budget")}
    if "pinned_budget" in entry:
        wire["memfs_pinned_budget"] = entry["pinned_budget"]
    if "memory_store" in entry:
        wire["memory_store_id"] = entry["memory_store"]
    if "scope" in entry:
        wire["memfs_scope"] = entry["scope"]
    try:
        ref, access, instructions, scope = validate_session_resource(wire, lim)
    except InvalidRequest as e:
        message = e.message
        if "memory_store_id" in message and "memory_store" in entry:
            message = "memory_store must be a store's name or id"
        if message.startswith("memfs_scope") and "scope" in entry:
            message = message.removeprefix("memfs_")
        raise bad(message + _quote_hint(wire.get("memory_store_id"))) from None
    budget = None
    if wire.get("memfs_pinned_budget") is not None:
        try:
            budget = validate_pinned_budget(wire)
        except InvalidRequest as e:
            message = e.message
            if "pinned_budget" in entry:
                message = message.removeprefix("memfs_")
            raise bad(message) from None
    return Attachment(ref, access, instructions, scope=scope, pinned_budget=budget)


class _Refused(yaml.MarkedYAMLError):
    """YAML that is valid but not accepted in a spec (see :func:`_safe_load`)."""


def _safe_load(text: str) -> Any:
    """``yaml.safe_load``, refusing a key given twice in one mapping (PyYAML keeps the last
    one silently: a second ``access:`` would quietly win) and aliases (``*name``, which can
    make a few lines expand to billions of values).

    The loader is PyYAML's own ``SafeLoader``, run as ``yaml.load`` runs it; only this one
    instance composes and constructs through the two checks below, which wrap its own
    methods (a subclass would make the spec module a class of PyYAML's 149 methods)."""
    loader = yaml.SafeLoader(text)
    compose_node, construct_mapping = loader.compose_node, loader.construct_mapping

    def refusing_aliases(parent: Any, index: Any) -> Any:
        if loader.check_event(yaml.AliasEvent):
            # types-PyYAML leaves Parser.peek_event unannotated.
            event = loader.peek_event()  # type: ignore[no-untyped-call]
            raise _Refused(
                None, None, "aliases (*name) are not supported in a session spec",
                event.start_mark,
            )
        return compose_node(parent, index)

    def refusing_twice(node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue  # an unhashable key: SafeLoader refuses it itself
            if key in seen:
                raise _Refused(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return construct_mapping(node, deep)

    # Attributes of the instance come before its class's methods: PyYAML's composer and
    # constructor, which call self.compose_node and self.construct_mapping, call these.
    vars(loader).update(compose_node=refusing_aliases, construct_mapping=refusing_twice)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _refuse_unknown(mapping: dict[Any, Any], known: Sequence[str], bad: Any) -> None:
    for key in mapping:
        if key not in known:
            raise bad(key)


def _quote_hint(value: Any) -> str:
    """YAML reads ``2024``, ``1.0``, ``yes`` or a date unquoted as a non-string: say so."""
    if value is None or isinstance(value, str | dict | list):
        return ""
    return f" (YAML read {value!r} as {type(value).__name__}: quote it)"


def _metadata_hint(metadata: Any) -> str:
    if isinstance(metadata, dict):
        for v in metadata.values():
            if hint := _quote_hint(v):
                return hint
    return ""


def _yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error on one line: where (1-based) and what."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = "" if isinstance(e, _Refused) else "not valid YAML: "
    return " ".join(f"{what}{where}{problem}".split())
