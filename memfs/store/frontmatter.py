"""What a memory says about itself (SPEC §8): its YAML front matter, the store's registry of
types, and what memfs derives from both.

A memory may start with front matter, ``---`` … ``---`` closed within its first 4 KiB. The text
stays the truth: nothing here changes it, and **nothing here makes a write fail**. A value
memfs cannot use is kept as written and reported in :attr:`Derived.warnings`.

- :func:`split` finds the front matter, :func:`parse` reads it as safe YAML (a fast path for
  the plain ``key: value`` lines most memories have, else libyaml's safe loader);
- :class:`Registry` is a store's types (the reference MemoryTool's four by default, each with its
  directory, importance, scope and lifetime), read from the store's metadata
  (:data:`TYPES_KEY`), which :func:`check_metadata` checks when a person sets it;
- :func:`derive` is the index a write records beside the memory (type, importance, expiry,
  tags, description, pinned, supersedes, source, warnings): :class:`Derived`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import InvalidMetadata, InvalidRequest
from ..models import MemoryMeta
from ..rules import SCOPES, SESSIONS_VISIBILITIES, SESSIONS_VISIBILITY_KEY, format_time

__all__ = [
    "DEFAULT_TYPES",
    "EXPIRY_KEY",
    "FRONT_MATTER_MAX",
    "IMPORTANCE_LEVELS",
    "META_REV",
    "TYPES_KEY",
    "Derived",
    "MemoryType",
    "Registry",
    "check_metadata",
    "derive",
    "expiry_mode",
    "parse",
    "registry",
    "split",
]

#: Front matter is read only when it closes within a memory's first 4 KiB.
FRONT_MATTER_MAX = 4096
#: The store metadata key that redefines the types (a JSON object) or turns them off (``off``).
TYPES_KEY = "memfs_types"
#: The store metadata key that says whether expired memories are deleted (``on``) or only
#: reported (``report``). Without it, a store made before typed memories reports and a newer
#: one deletes (``stores.expiry``).
EXPIRY_KEY = "memfs_expiry"
EXPIRY_MODES = ("on", "report")
#: The named levels of importance, and what they weigh in recall's ranking.
IMPORTANCE_LEVELS = {"low": 0.2, "medium": 0.5, "high": 0.8}
#: The version of :func:`derive` a row's ``meta_rev`` records. A migration that changes what is
#: derived sets ``meta_rev`` NULL, and the memories are derived again when a store next opens
#: the database (:meth:`memfs.store.typed.Typed.reindex_pending`).
META_REV = 1

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_DURATION_FULL = re.compile(r"\s*(?:\d+(?:\.\d+)?\s*[smhdw]\s*)+", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MAX_TAGS = 32
_MAX_TAG = 64
_MAX_DESCRIPTION = 512
#: A value quoted in a warning, at most (characters).
_SHOWN = 80
#: The longest lifetime a type may give (a longer one is refused: its times would overflow).
_MAX_LIFETIME = dt.timedelta(days=36500)


@dataclass(frozen=True)
class MemoryType:
    """One type of memory: where its memories live by default, how important they are, for
    whom (``general``: every workflow; ``workflow``: the work at hand) and how long they live
    after their last change (None: for ever)."""

    name: str
    directory: str
    importance: float
    scope: str
    expires: dt.timedelta | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "directory": self.directory,
            "importance": self.importance,
            "scope": self.scope,
            "expires": "never" if self.expires is None else _format_duration(self.expires),
        }


DEFAULT_TYPES: tuple[MemoryType, ...] = (
    MemoryType("preference", "/preferences/", IMPORTANCE_LEVELS["high"], "general", None),
    MemoryType("context", "/context/", IMPORTANCE_LEVELS["low"], "workflow",
               dt.timedelta(days=7)),
    MemoryType("knowledge", "/knowledge/", IMPORTANCE_LEVELS["medium"], "general", None),
    MemoryType("decision", "/decisions/", IMPORTANCE_LEVELS["high"], "workflow", None),
)


@dataclass(frozen=True)
class Registry:
    """A store's types. ``source`` says where they come from: ``default``, ``metadata`` (the
    store's :data:`TYPES_KEY`) or ``off`` (types turned off: none)."""

    types: tuple[MemoryType, ...]
    source: str = "default"

    def named(self, name: str) -> MemoryType | None:
        for t in self.types:
            if t.name == name:
                return t
        return None

    def of_path(self, path: str) -> MemoryType | None:
        """The type whose directory holds ``path`` (the deepest, if directories nest)."""
        best: MemoryType | None = None
        for t in self.types:
            if path.startswith(t.directory) and (
                best is None or len(t.directory) > len(best.directory)
            ):
                best = t
        return best

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "types": [t.to_dict() for t in self.types]}


DEFAULT_REGISTRY = Registry(DEFAULT_TYPES)
OFF_REGISTRY = Registry((), "off")


def registry(metadata: Mapping[str, str] | str | None) -> Registry:
    """The registry a store's metadata (a mapping, or its JSON text) gives. A value that
    :func:`check_metadata` would refuse (written before it checked) gives the default types."""
    if isinstance(metadata, str) or metadata is None:
        return _registry_of_text(metadata or "{}")
    value = metadata.get(TYPES_KEY)
    return DEFAULT_REGISTRY if value is None else _registry_of_value(value)


@lru_cache(maxsize=256)
def _registry_of_text(text: str) -> Registry:
    """The registry of a store's metadata as stored (JSON text): a write reads it with the
    store's row, so the same text is parsed once."""
    try:
        metadata = json.loads(text)
    except ValueError:
        return DEFAULT_REGISTRY
    value = metadata.get(TYPES_KEY) if isinstance(metadata, dict) else None
    return DEFAULT_REGISTRY if not isinstance(value, str) else _registry_of_value(value)


@lru_cache(maxsize=256)
def _registry_of_value(value: str) -> Registry:
    try:
        return _parse_registry(value)
    except InvalidRequest:
        return DEFAULT_REGISTRY


def _parse_registry(value: str) -> Registry:
    """:raises InvalidRequest: not ``off``, ``default`` nor a JSON object of types."""
    if value.strip().lower() == "off":
        return OFF_REGISTRY
    if value.strip().lower() == "default":
        return DEFAULT_REGISTRY
    where = f"metadata {TYPES_KEY}"
    try:
        spec = json.loads(value)
    except ValueError:
        raise InvalidRequest(
            f"{where} must be 'off', 'default' or a JSON object of types, e.g. "
            '{"context": {"directory": "/context/", "importance": "low", "expires": "7d", '
            '"scope": "workflow"}}'
        ) from None
    if not isinstance(spec, dict):
        raise InvalidRequest(f"{where} must be a JSON object of types")
    types = []
    for name, t in spec.items():
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
            raise InvalidRequest(f"{where}: type name {_shown(name)} must be lower-case letters, "
                                 "digits, - or _ (at most 32)")
        if not isinstance(t, dict):
            raise InvalidRequest(f"{where}: type {name} must be an object")
        unknown = set(t) - {"directory", "importance", "expires", "scope"}
        if unknown:
            raise InvalidRequest(f"{where}: type {name} has unknown keys {sorted(unknown)}; "
                                 "known: directory, importance, expires, scope")
        directory = t.get("directory", f"/{name}/")
        if (not isinstance(directory, str) or not directory.startswith("/")
                or not directory.endswith("/") or directory == "/" or "//" in directory):
            raise InvalidRequest(f"{where}: type {name}'s directory must be a path that "
                                 "begins and ends with / (e.g. /notes/)")
        importance, problem = _importance(t.get("importance", "medium"))
        if importance is None:
            raise InvalidRequest(f"{where}: type {name}: {problem}")
        expires: dt.timedelta | None = None
        raw = t.get("expires", "never")
        if not (isinstance(raw, str) and raw.strip().lower() == "never"):
            expires = _duration(raw) if isinstance(raw, str) else None
            if expires is None or expires > _MAX_LIFETIME:
                raise InvalidRequest(f"{where}: type {name}'s expires must be 'never' or a "
                                     "duration such as 7d, 12h or 2w (at most 36500d)")
        scope = t.get("scope", "general")
        if scope not in SCOPES:
            raise InvalidRequest(f"{where}: type {name}'s scope must be general or workflow")
        types.append(MemoryType(name, directory, importance, scope, expires))
    return Registry(tuple(types), "metadata")


def check_metadata(metadata: Mapping[str, str | None]) -> None:
    """Check the keys of a store's metadata that memfs reads (a person sets them).

    :raises InvalidMetadata: a :data:`TYPES_KEY` or :data:`EXPIRY_KEY` that means nothing
        (``details.error_code`` ``invalid_metadata`` on the wire).
    """
    types = metadata.get(TYPES_KEY)
    if types is not None:
        try:
            _parse_registry(types)
        except InvalidRequest as e:
            raise InvalidMetadata(e.message) from None
    mode = metadata.get(EXPIRY_KEY)
    if mode is not None and mode not in EXPIRY_MODES:
        raise InvalidMetadata(f"metadata {EXPIRY_KEY} must be 'on' (expired memories are "
                             "deleted, as versions) or 'report' (only reported)")
    seen = metadata.get(SESSIONS_VISIBILITY_KEY)
    if seen is not None and seen not in SESSIONS_VISIBILITIES:
        raise InvalidMetadata(f"metadata {SESSIONS_VISIBILITY_KEY} must be 'session' (a "
                              "session's .sessions/ shows its own folder only) or 'workspace' "
                              "(every session that had the store attached)")


def expiry_mode(metadata: Mapping[str, str], born: str) -> str:
    """Whether a store's expired memories are deleted (``on``) or only reported (``report``):
    its metadata's :data:`EXPIRY_KEY`, else what the store was born with (``born``)."""
    mode = metadata.get(EXPIRY_KEY)
    return mode if mode in EXPIRY_MODES else born


# --------------------------------------------------------------------------------------------
# reading the front matter


def split(text: str) -> tuple[str | None, str | None]:
    """The YAML between a memory's opening ``---`` line and its closing ``---`` (or ``...``)
    line, when it closes within :data:`FRONT_MATTER_MAX` bytes; and what is wrong when it
    looks like front matter that does not close there."""
    if not text.startswith("---"):
        return None, None
    first = text.find("\n")
    if first < 0 or text[3:first].strip():
        return None, None
    head = text[: FRONT_MATTER_MAX + 1]
    pos = first + 1
    while pos < len(head):
        end = head.find("\n", pos)
        line = head[pos:] if end < 0 else head[pos:end]
        if line.rstrip() in ("---", "..."):
            if len(text[: pos + len(line)].encode("utf-8")) > FRONT_MATTER_MAX:
                break
            return text[first + 1: pos], None
        if end < 0:
            break
        pos = end + 1
    second = head[first + 1:].lstrip("\n").split("\n", 1)[0]
    if re.match(r"[A-Za-z_][\w-]*\s*:", second):
        return None, (f"front matter does not close with a --- line within its first "
                      f"{FRONT_MATTER_MAX} bytes: read as text")
    return None, None


def parse(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """A memory's front matter as a mapping (None: none), and warnings."""
    raw, problem = split(text)
    if raw is None:
        return None, [problem] if problem else []
    data, warnings = _read(raw)
    return data, list(warnings)


@lru_cache(maxsize=4096)
def _read(raw: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """The YAML of a front matter read (:func:`parse`), kept for the next write of the same
    front matter: a rename, a restore, a revert, a store's types changed, most edits of the
    text below it. (Its values are never changed by those who read them.)"""
    data, warnings = _read_yaml(raw)
    return data, tuple(warnings)


def _read_yaml(raw: str) -> tuple[dict[str, Any] | None, list[str]]:
    data = _fast(raw)
    if data is None:
        import yaml  # not at import: every command and daemon loads this module

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            # No aliases: 4 KiB of ``&a [*a, *a]`` chains would expand to gigabytes.
            if "*" in raw and any(isinstance(e, yaml.AliasEvent)
                                  for e in yaml.parse(raw, Loader=loader)):
                return None, ["front matter uses YAML aliases (*name), which memfs does not "
                              "read: write each value out"]
            data = yaml.load(raw, Loader=loader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            what = getattr(e, "problem", None) or str(e).split("\n", 1)[0]
            return None, [f"front matter is not valid YAML{where}: {what}"]
        except (RecursionError, ValueError, OverflowError) as e:
            return None, [f"front matter is not valid YAML: {e}"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return None, ["front matter is not a mapping of keys to values"]
    return data, []


# The fast path: lines of ``key: value`` whose values are plain words, which is what memories
# say. Anything else (quotes, flow or block collections, anchors, tags, comments, documents
# markers, continuation lines) goes to libyaml. What the fast path gives is what
# ``yaml.safe_load`` gives (tests/unit/store/test_frontmatter.py checks it with hypothesis).
_FAST_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*")
_FAST_VALUE = re.compile(r"[A-Za-z/][A-Za-z0-9 _./-]*")
_YAML_WORDS = frozenset((
    "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL",
))
_BOOLS = {w: w.lower() in ("yes", "true", "on") for w in _YAML_WORDS if w.lower() != "null"}
_NUMBER = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+")


def _fast(raw: str) -> dict[str, Any] | None:
    """``raw`` read without a YAML parser, or None when it is not simple enough to."""
    if "\t" in raw:  # where YAML allows a tab is its own business
        return None
    out: dict[str, Any] = {}
    for line in raw.split("\n"):
        if not line or line.isspace():
            continue
        m = _FAST_LINE.fullmatch(line)
        if m is None:
            return None
        key, value = m.group(1), m.group(2)
        if key in _YAML_WORDS:
            return None
        if value and value[0] == "[" and value[-1] == "]":
            items = value[1:-1].split(",")
            if items[-1].strip() == "":
                items.pop()  # [a, b,] and []
            listed = [_fast_scalar(item.strip(" ")) for item in items]
            if any(item is _NOT_SIMPLE for item in listed):
                return None
            out[key] = listed
            continue
        one = _fast_scalar(value) if value else None
        if one is _NOT_SIMPLE:
            return None
        out[key] = one
    return out


_NOT_SIMPLE = object()


def _fast_scalar(value: str) -> Any:
    """A plain value as YAML reads it, or :data:`_NOT_SIMPLE`."""
    if value in _BOOLS:
        return _BOOLS[value]
    if value in ("null", "Null", "NULL"):
        return None
    if _NUMBER.fullmatch(value):
        return float(value) if "." in value else int(value)
    if _FAST_VALUE.fullmatch(value) and not _yaml_special(value):
        return value
    return _NOT_SIMPLE


def _yaml_special(value: str) -> bool:
    """Could YAML read this plain value as something other than the string itself?"""
    return (value.endswith(" ") or "  " in value or " #" in value
            or value in ("~",) or value.lower() in (".inf", ".nan"))


# --------------------------------------------------------------------------------------------
# what memfs derives


@dataclass(frozen=True)
class Derived:
    """The index of one memory (SPEC §8): what its front matter and its directory say."""

    type: str | None = None
    importance: float | None = None
    expires_at: str | None = None
    pinned: bool = False
    tags: tuple[str, ...] = ()
    description: str | None = None
    supersedes: tuple[str, ...] = ()
    source: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def meta_json(self) -> str | None:
        """The parts without a column of their own, as the row's ``meta`` (None: none)."""
        d: dict[str, Any] = {}
        if self.tags:
            d["tags"] = list(self.tags)
        if self.description is not None:
            d["description"] = self.description
        if self.supersedes:
            d["supersedes"] = list(self.supersedes)
        if self.source is not None:
            d["source"] = self.source
        if self.warnings:
            d["warnings"] = list(self.warnings)
        return json.dumps(d, ensure_ascii=False) if d else None

    def to_meta(self) -> MemoryMeta:
        return MemoryMeta(self.type, self.importance, self.expires_at, self.pinned, self.tags,
                          self.description, self.supersedes, self.source, self.warnings)

    def columns(self) -> tuple[str | None, float | None, str | None, int, str | None, int]:
        """``(mtype, importance, expires_at, pinned, meta, meta_rev)``: the row's columns."""
        return (self.type, self.importance, self.expires_at, int(self.pinned),
                self.meta_json(), META_REV)


NOTHING = Derived()


def derive(path: str, text: str, types: Registry, changed_at: str) -> Derived:
    """What memfs knows of the memory at ``path`` with ``text``, last changed at
    ``changed_at`` (RFC 3339): never raises for what a memory says."""
    if not text.startswith("---"):
        t = types.of_path(path) if types.types else None
        if t is None:
            return NOTHING
        return Derived(t.name, t.importance, _expiry_time(t.expires, changed_at))
    try:
        data, warnings = parse(text)
        return _derive(path, data or {}, warnings, types, changed_at)
    except Exception as e:  # never a failed write (SPEC §8): what was not read is said
        t = types.of_path(path) if types.types else None
        return Derived(t.name if t else None, t.importance if t else None,
                       _expiry_time(t.expires, changed_at) if t else None,
                       warnings=(f"front matter could not be read ({type(e).__name__}): read "
                                 "as text",))


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _derive(
    path: str, data: Mapping[str, Any], warnings: list[str], types: Registry,
    changed_at: str,
) -> Derived:
    t = types.of_path(path)
    name = data.get("type")
    if name is not None:
        named = types.named(name) if isinstance(name, str) else None
        if named is not None:
            t = named
        elif not types.types:
            warnings.append(f"type {_shown(name)} is not used: this store's types are off")
        else:
            known = ", ".join(x.name for x in types.types)
            warnings.append(f"type {_shown(name)} is not one of this store's types ({known})"
                            + (f": the type of its directory, {t.name}, applies" if t else ""))
    importance = t.importance if t else None
    if "importance" in data:
        value, problem = _importance(data["importance"])
        if value is None:
            warnings.append(f"importance: {problem}")
        else:
            importance = value
    expires_at = _expiry_time(t.expires, changed_at) if t else None
    if "expires" in data and data["expires"] is not None:
        ok, when, problem = _expires(data["expires"], changed_at)
        if ok:
            expires_at = when
        else:
            warnings.append(f"expires: {problem}")
    pinned = False
    if "pinned" in data and data["pinned"] is not None:
        if isinstance(data["pinned"], bool):
            pinned = data["pinned"]
        else:
            warnings.append(f"pinned: {_shown(data['pinned'])} is not true or false")
    return Derived(
        type=t.name if t else None,
        importance=importance,
        expires_at=expires_at,
        pinned=pinned,
        tags=_tags(data.get("tags"), warnings),
        description=_description(data.get("description"), warnings),
        supersedes=_supersedes(data.get("supersedes"), path, warnings),
        source=_source(data.get("source"), warnings),
        warnings=tuple(warnings),
    )


def _importance(value: Any) -> tuple[float | None, str]:
    if isinstance(value, str) and value.strip().lower() in IMPORTANCE_LEVELS:
        return IMPORTANCE_LEVELS[value.strip().lower()], ""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value), ""
    return None, f"{_shown(value)} is not low, medium, high or a number from 0 to 1"


def _expiry_time(after: dt.timedelta | None, changed_at: str) -> str | None:
    if after is None:
        return None
    try:
        return format_time(_time(changed_at) + after)
    except (OverflowError, ValueError):  # past year 9999: never, in effect
        return None


def _duration(value: str) -> dt.timedelta | None:
    if not _DURATION_FULL.fullmatch(value):
        return None
    seconds = sum(float(n) * _UNITS[u.lower()] for n, u in _DURATION.findall(value))
    try:
        return dt.timedelta(seconds=seconds) if seconds > 0 else None
    except OverflowError:
        return None


def _format_duration(d: dt.timedelta) -> str:
    s = int(d.total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s % n == 0:
            return f"{s // n}{unit}"
    return f"{s}s"


def _expires(value: Any, changed_at: str) -> tuple[bool, str | None, str]:
    """``(understood, the expiry time or None for never, what is wrong)``."""
    if isinstance(value, str):
        v = value.strip()
        if v.lower() == "never":
            return True, None, ""
        d = _duration(v)
        if d is not None:
            try:
                return True, format_time(_time(changed_at) + d), ""
            except OverflowError:
                return False, None, f"{_shown(value)} is too far away"
        try:
            value = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return False, None, (f"{_shown(value)} is not a date, a time, a duration from the last "
                                 "change (such as 7d, 12h or 2w) or never")
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        try:
            return True, format_time(value.astimezone(dt.UTC)), ""
        except (OverflowError, ValueError):
            return False, None, f"{_shown(value)} is out of range"
    if isinstance(value, dt.date):
        return True, format_time(dt.datetime(value.year, value.month, value.day,
                                              tzinfo=dt.UTC)), ""
    return False, None, (f"{_shown(value)} is not a date, a time, a duration from the last change "
                         "(such as 7d, 12h or 2w) or never")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date | int | float | str):
        return str(value)
    return _shown(value)


def _shown(value: Any) -> str:
    """A value in a warning, or a structure where text was expected: its repr, cut."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _tags(value: Any, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [x for x in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list):
        warnings.append(f"tags: {_shown(value)} is not a list of words")
        return ()
    out: list[str] = []
    for item in items:
        if isinstance(item, dict | list) or item is None:
            warnings.append(f"tags: {_shown(item)} is not a word")
            continue
        tag = _scalar(item).strip()
        if not tag:
            continue
        if len(tag) > _MAX_TAG or "\n" in tag:
            warnings.append(f"tags: {_shown(tag[:_MAX_TAG])}… is longer than {_MAX_TAG} characters "
                            "or spans lines")
            continue
        if tag not in out:
            out.append(tag)
    if len(out) > _MAX_TAGS:
        warnings.append(f"tags: only the first {_MAX_TAGS} of {len(out)} are used")
        out = out[:_MAX_TAGS]
    return tuple(out)


def _source(value: Any, warnings: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict | list):
        warnings.append(f"source: {_shown(value)} is not text")
        return None
    return _scalar(value)


def _description(value: Any, warnings: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict | list):
        warnings.append("description is not one line of text")
        return None
    text = _scalar(value).strip()
    if "\n" in text:
        warnings.append("description spans several lines: its first line is used")
        text = text.split("\n", 1)[0].strip()
    if len(text) > _MAX_DESCRIPTION:
        warnings.append(f"description is longer than {_MAX_DESCRIPTION} characters: cut")
        text = text[:_MAX_DESCRIPTION]
    return text


def _supersedes(value: Any, path: str, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        warnings.append(f"supersedes: {_shown(value)} is not a path or a list of paths")
        return ()
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.startswith("/") or item == path:
            warnings.append(f"supersedes: {_shown(item)} is not another memory's path "
                            "(a path begins with /)")
            continue
        if item not in out:
            out.append(item)
    return tuple(out)
