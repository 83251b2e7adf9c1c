"""What a store holds and a memory with a type (SPEC §8), for a tool: the describe object
in words, a memory's front matter, the directory of a type, a file name made of a text. The
memory tool (:mod:`memfs.tools`, paths under ``/memories``) and the MCP server
(:mod:`memfs.mcp`, the store's own paths) word the same facts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from .. import errors

#: A name made from a memory's text is at most this long (before ``.md``).
NAME_CHARS = 48
#: Names tried (``name``, ``name-2``, …) before giving up on a name made from the text.
NAME_ATTEMPTS = 100

#: What YAML reads as something else than a string, unquoted: a plain scalar must not be one.
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ""}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_ ./-]*")


def describe_text(d: dict[str, Any], shown: Callable[[str], str] = str) -> str:
    """The describe object as the model reads it, each path as ``shown`` shows it."""
    def counts(mapping: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in mapping.items()) or "none"

    def listed(title: str, part: dict[str, Any], line: Any) -> list[str]:
        rows = [f"{title}: {part['count']}"]
        rows += [f"  {line(m)}" for m in part["memories"]]
        if part["count"] > len(part["memories"]):
            rows.append(f"  … and {part['count'] - len(part['memories'])} more")
        return rows

    def change(c: dict[str, Any] | None) -> str:
        return "none" if c is None else f"{shown(c['path'])} at {c['updated_at']}"

    def expiry(m: dict[str, Any]) -> str:
        return f"{shown(m['path'])} ({m['memory_type'] or 'no type'}) at {m['expires_at']}"

    types = d["types"]
    known = "; ".join(
        f"{t['name']} in {shown(t['directory'])} ({t['importance']} importance, "
        f"{t['scope']}, expires {t['expires']})" for t in types["types"]) or "none"
    lines = [
        f"Memory store {d['name']}: {d['memories']} memories, {d['content_size_bytes']} "
        f"bytes, {d['pinned']} pinned (described at {d['at']})",
        f"By type: {counts(d['by_type'])}",
        f"By directory: {counts({shown(k): v for k, v in d['by_directory'].items()})}",
        f"Tags: {counts(d['by_tag'])}",
        *listed(f"Expiring within {d['expiring_soon']['within_days']} days",
                d["expiring_soon"], expiry),
        *listed("Expired" + (" (deleted soon)" if d["expiry"] == "on" else
                             " (kept: this store only reports expiry)"), d["expired"], expiry),
        f"Oldest change: {change(d['oldest_change'])}",
        f"Newest change: {change(d['newest_change'])}",
        *listed("Warnings", d["warnings"],
                lambda m: f"{shown(m['path'])}: {'; '.join(m['warnings'])}"),
        f"Types ({types['source']}): {known}",
    ]
    return "\n".join(lines) + "\n"


def front_matter(text: str, type_: str, *, tags: Iterable[str], importance: str | float | None,
                 description: str | None) -> str:
    """``text`` with front matter saying its type and the rest given (values quoted where
    YAML would read them as something else). A description is made one line."""
    lines = ["---", f"type: {_scalar(type_)}"]
    if importance is not None:
        lines.append(f"importance: {_scalar(importance)}")
    tags = [str(t) for t in tags]
    if tags:
        lines.append(f"tags: [{', '.join(_scalar(t) for t in tags)}]")
    if description is not None:
        lines.append(f"description: {_scalar(' '.join(description.split()))}")
    body = text if text.endswith("\n") or not text else text + "\n"
    return "\n".join(lines) + "\n---\n" + body


def _scalar(value: str | float) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        return json.dumps(value)
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS \
            and not value.endswith(" "):
        return value
    return json.dumps(value, ensure_ascii=False)


def directory_of(d: dict[str, Any], type_: str) -> str:
    """The directory of the type ``type_`` in the store's types (its describe object).

    :raises InvalidRequest: the store has no such type, or none at all."""
    types = {t["name"]: t["directory"] for t in d["types"]["types"]}
    if not types:
        raise errors.InvalidRequest("this store has no types (its metadata turns them off)")
    if type_ not in types:
        raise errors.InvalidRequest(
            f"unknown type {type_!r} (this store's types: {', '.join(types)})")
    directory: str = types[type_]
    return directory


def name_of(text: str) -> str:
    """A file name made of the first line of ``text`` that has words: lower case, words
    joined by ``-``, at most :data:`NAME_CHARS` (``memory`` when it has none)."""
    for line in text.splitlines():
        words = re.findall(r"[^\W_]+", line.lower())
        if words:
            name = "-".join(words)
            if len(name) > NAME_CHARS:
                name = name[:NAME_CHARS].rsplit("-", 1)[0] or name[:NAME_CHARS]
            return name
    return "memory"


def file_names(name: str | None, text: str) -> list[str]:
    """The file names to try, in turn, for a typed memory: ``name`` alone when given (taken,
    it is an error), else one made of ``text`` (:func:`name_of`), then ``NAME-2``, ``NAME-3``,
    … up to :data:`NAME_ATTEMPTS` names; ``.md`` added to a name without an extension."""
    stem = name if name is not None else name_of(text)
    if "." not in stem.rsplit("/", 1)[-1]:
        stem += ".md"
    base, dot, ext = stem.rpartition(".")
    return [stem] + ([] if name is not None else
                     [f"{base}-{n}{dot}{ext}" for n in range(2, NAME_ATTEMPTS + 1)])
