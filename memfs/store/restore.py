"""Restoring an archive (:meth:`memfs.store.archive.Archive.import_archive`): its records
checked, field by field, without the database.

An archive is client input. This module is pure (like :mod:`memfs.store.revert`): a
:class:`Checker` reads the records one by one, in the order of ``docs/EXPORT-FORMAT.md``
(grouped by memory in ascending memory id, each memory's versions oldest first, then the
memory itself if it is live), checks every field, the order, that a live memory's head is one
of its own versions, and that the archive holds at most ``Limits.max_import_versions``
versions, and turns each record into the row to insert (:class:`VersionRow`,
:class:`MemoryRow`).

The store runs a checker over the whole archive first, holding no lock and writing nothing
(the archive's reader checks its trailer at the end of that pass), and a second time as it
writes the rows, :data:`BATCH_ROWS` at a time, each batch one short transaction (issue 19: a
forged archive of 400,000 versions held the write lock for a minute, then was rolled back).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArchive, InvalidRequest
from ..models import Actor
from ..rules import (
    Limits,
    encode_content,
    format_time,
    new_id,
    parse_time,
    validate_description,
    validate_metadata,
    validate_name,
    validate_path,
    validate_text,
)

#: Rows written per transaction, and the content bytes after which a batch ends sooner: one
#: batch holds the write lock for some tens of milliseconds.
BATCH_ROWS = 500
BATCH_BYTES = 4 * 1024 * 1024
#: The operations a version may have.
OPERATIONS = ("created", "modified", "deleted")
#: An id in an archive: its prefix, then what memfs ids are made of (and a little more).
_ARCHIVE_ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")


@dataclass
class Group:
    """The memory a check is at: its archive id, its id here, its versions so far (archive id
    -> (id here, operation, path, sha256, size, redacted)), the last version's sort key."""

    old_id: str
    new_id: str
    versions: dict[str, tuple[str, str, str | None, str | None, int | None, bool]] = field(
        default_factory=dict)
    last: tuple[str, str] | None = None
    redacted: int = 0
    done: bool = False


@dataclass
class VersionRow:
    """A version to insert (``first``: its memory's first record)."""

    n: int
    group: Group
    first: bool
    old_id: str
    id: str
    operation: str
    created_at: str
    path: str | None
    content: str | None
    sha256: str | None
    size: int | None
    created_by: Actor | None
    redacted_at: str | None
    redacted_by: Actor | None


@dataclass
class MemoryRow:
    """A live memory to insert after its versions; its content is its head version's."""

    n: int
    group: Group
    path: str
    sha256: str
    size: int
    head_id: str
    created_at: str
    updated_at: str


class Checker:
    """Checks an archive's records in order (:meth:`check`); ``copy``: new ids for every
    memory and version (an import with a name or into a store), else the archive's."""

    def __init__(self, limits: Limits, copy: bool) -> None:
        self.limits = limits
        self.copy = copy
        self.group: Group | None = None
        self.versions = 0

    def check(self, n: int, rec: Any) -> VersionRow | MemoryRow:
        """Record ``n`` as the row to insert.

        :raises InvalidArchive: a field breaks a rule, the records are out of order, a
            memory's head is not one of its versions, or there are too many versions.
        """
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind not in ("version", "memory"):
            raise InvalidArchive(f"record {n}: unknown record type {kind!r}")
        mid = rec.get("memory_id") if kind == "version" else rec.get("id")
        group, first = self.group, False
        if group is None or mid != group.old_id:
            mid = archive_id(mid, "mem", n)
            if group is not None and mid < group.old_id:
                raise InvalidArchive(
                    f"record {n}: memory {mid} out of order (records are grouped by memory in "
                    "ascending memory id)")
            group = self.group = Group(mid, new_id("mem") if self.copy else mid)
            first = True
        if group.done:
            raise InvalidArchive(f"record {n}: memory {mid} has records after it")
        if kind == "version":
            self.versions += 1
            if self.versions > self.limits.max_import_versions:
                raise InvalidArchive(
                    f"the archive holds more than {self.limits.max_import_versions} versions, "
                    "more than one import takes: export less history (or several stores)")
            return self._version(n, group, first, rec)
        if first:
            raise InvalidArchive(f"record {n}: memory {mid} comes without its versions")
        group.done = True
        return self._memory(n, group, rec)

    def _version(self, n: int, group: Group, first: bool, rec: dict[str, Any]) -> VersionRow:
        lim = self.limits
        old = archive_id(rec.get("id"), "memver", n)
        op = rec.get("operation")
        if op not in OPERATIONS:
            raise InvalidArchive(f"record {n}: version {old}: bad operation {op!r}")
        created = archive_time(rec.get("created_at"), n, "created_at")
        key = (created, old)
        if group.last is not None and key <= group.last:
            raise InvalidArchive(f"record {n}: version {old} is out of order (each memory's "
                                 "versions come oldest first)")
        group.last = key
        created_by = archive_actor(rec.get("created_by"), n)
        redacted_at = rec.get("redacted_at")
        if redacted_at is not None:
            redacted_at = archive_time(redacted_at, n, "redacted_at")
        redacted_by = archive_actor(rec.get("redacted_by"), n)
        path, content = rec.get("path"), rec.get("content")
        sha, size = rec.get("content_sha256"), rec.get("content_size_bytes")
        try:
            if redacted_at is not None:
                if (path, content, sha, size) != (None, None, None, None):
                    raise InvalidArchive("a redacted version keeps no path or content")
            else:
                if redacted_by is not None:
                    raise InvalidArchive("redacted_by without redacted_at")
                path = validate_path(path, lim)
                if op == "deleted":
                    if (content, sha, size) != (None, None, None):
                        raise InvalidArchive("a deleted version has no content")
                else:
                    if not isinstance(content, str):
                        raise InvalidArchive("content must be a string")
                    text, data = encode_content(content, lim)
                    if sha != hashlib.sha256(data).hexdigest() or size != len(data):
                        raise InvalidArchive("content_sha256 or content_size_bytes does not "
                                             "match the content")
                    content = text
        except InvalidRequest as e:
            raise InvalidArchive(f"record {n}: version {old}: {e.message}") from None
        vid = new_id("memver") if self.copy else old
        group.versions[old] = (vid, op, path, sha, size, redacted_at is not None)
        group.redacted += redacted_at is not None
        return VersionRow(n, group, first, old, vid, op, created, path, content, sha, size,
                          created_by, redacted_at, redacted_by)

    def _memory(self, n: int, group: Group, rec: dict[str, Any]) -> MemoryRow:
        try:
            path = validate_path(rec.get("path"), self.limits)
        except InvalidRequest as e:
            raise InvalidArchive(f"record {n}: memory {group.old_id}: {e.message}") from None
        created = archive_time(rec.get("created_at"), n, "created_at")
        updated = archive_time(rec.get("updated_at"), n, "updated_at")
        head = group.versions.get(rec.get("memory_version_id"))  # type: ignore[arg-type]
        sha = rec.get("content_sha256")
        if head is None or head[1] == "deleted" or head[5] or (head[2], head[3]) != (path, sha):
            raise InvalidArchive(
                f"record {n}: memory {group.old_id}: its memory_version_id does not name one "
                "of its versions with the same path and content_sha256")
        if rec.get("content_size_bytes") != head[4]:
            raise InvalidArchive(f"record {n}: memory {group.old_id}: content_size_bytes "
                                 "does not match its head version")
        assert sha is not None and head[4] is not None
        return MemoryRow(n, group, path, sha, head[4], head[0], created, updated)


def batches(rows: Iterable[VersionRow | MemoryRow]) -> Iterator[list[VersionRow | MemoryRow]]:
    """``rows`` in lists of at most :data:`BATCH_ROWS` rows and about :data:`BATCH_BYTES` of
    content, each made before it is handed out (the caller writes one per transaction)."""
    batch: list[VersionRow | MemoryRow] = []
    size = 0
    for row in rows:
        batch.append(row)
        size += len(row.content or "") if isinstance(row, VersionRow) else 0
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def archive_id(value: Any, prefix: str, n: int) -> str:
    """:raises InvalidArchive: ``value`` is not an id of that prefix."""
    if (not isinstance(value, str) or not value.startswith(prefix + "_")
            or not _ARCHIVE_ID_RE.match(value[len(prefix) + 1:])):  # fmt: skip
        raise InvalidArchive(f"record {n}: {value!r} is not a {prefix}_ id")
    return value


def archive_time(value: Any, n: int, what: str) -> str:
    """:raises InvalidArchive: ``value`` is not a timestamp as memfs writes them (kept as is,
    so that it sorts with the others)."""
    try:
        ok = isinstance(value, str) and format_time(parse_time(value)) == value
    except (InvalidRequest, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InvalidArchive(f"record {n}: {what} {value!r} is not an RFC 3339 UTC timestamp "
                             "like 2025-01-31T12:00:59.000000Z")
    return str(value)


def archive_actor(value: Any, n: int) -> Actor | None:
    """:raises InvalidArchive: ``value`` is neither None nor an actor's wire object."""
    if value is None:
        return None
    try:
        actor = Actor.from_dict(value)
        ok = isinstance(actor.id, str) and 0 < len(actor.id) <= 200
        validate_text(actor.id, "actor")
    except (KeyError, TypeError, ValueError, AttributeError, InvalidRequest):
        ok = False
    if not ok:
        raise InvalidArchive(f"record {n}: {value!r} is not an actor")
    return actor


def store_fields(store: Any, lim: Limits) -> dict[str, Any]:
    """The archive's store object, checked. :raises InvalidArchive:"""
    if not isinstance(store, dict):
        raise InvalidArchive("the archive's header has no store object")
    try:
        fields = {
            "id": archive_id(store.get("id"), "memstore", 0),
            "name": validate_name(store.get("name"), lim),
            "description": validate_description(store.get("description"), lim),
            "metadata": validate_metadata(store.get("metadata"), lim),
            "created_at": archive_time(store.get("created_at"), 0, "created_at"),
            "updated_at": archive_time(store.get("updated_at"), 0, "updated_at"),
            "archived_at": None if store.get("archived_at") is None
            else archive_time(store.get("archived_at"), 0, "archived_at"),
        }
    except InvalidRequest as e:
        raise InvalidArchive(f"the archive's store: {e.message}") from None
    return fields
