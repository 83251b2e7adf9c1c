"""The archive format (``docs/EXPORT-FORMAT.md``), both ways: a store written as an archive
(:func:`export_archive`, :func:`write_archive`), and an archive read, checked and restored
(:class:`ArchiveReader`, :func:`import_archive`). Only reading and writing: every rule is the
store's.

An **archive** is gzip-compressed JSON Lines:

1. a header ``{"format": "memfs-export", "version": 1, "exported_at", "history", "store"}``;
2. the memories, grouped by memory in ascending memory id: each memory's versions oldest first
   (``{"type": "version", ...}``), then the memory itself if it is live
   (``{"type": "memory", ...}``, whose content is its head version's, not repeated); without
   ``history`` only the version that holds each live memory's content;
3. a trailer ``{"type": "end", "memories", "versions", "redacted", "lines", "sha256"}``, the
   digest covering every line before it, so that an archive cut short or altered is refused.

Why this shape: gzip and JSON Lines stream both ways in constant memory with nothing but the
standard library (a zip or tar needs its index at the end or seeks), one line per version
keeps any line under a few hundred kB (a memory is at most 102,400 bytes), and any tool reads
it (``zcat | jq``). Grouping by memory lets the importer check each memory against its own
versions with a small, bounded state.

Exports read the store a page at a time (:meth:`Store.archive.export_memory`), every page in one
snapshot taken when the export begins (:meth:`Store.archive.export_snapshot`): the archive is the
store at that moment, whatever agents write while it is made, so an exact restore takes it
(read page by page in separate snapshots, a memory deleted and another created at its path
meanwhile could both be in it). Writers never wait for an export; its snapshot is closed
when the export ends, fails, or is closed unfinished (a download cut short: the API and the
Console stream it with :class:`~memfs.transfer.response.ClosingStreamingResponse`, which
closes it).

An archive is read twice, as a stream each time (:meth:`Store.archive.import_archive`): once
to check it whole, its trailer included, before anything is written, and once to write it in
short transactions, so that the write lock is never held for long, whatever the archive's
size. Neither an export nor an import ever holds the whole store or the whole archive in
memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Generator, Iterator
from contextlib import closing
from datetime import UTC, datetime
from typing import IO, Any, cast

from ..errors import InvalidArchive
from ..models import DEFAULT_WORKSPACE, Memory, MemoryVersion
from ..rules import format_time
from ..store import Store
from .progress import Halves, Progress, no_progress

#: The archive's format name and the versions this module reads (it writes the last).
FORMAT = "memfs-export"
VERSION = 1
READABLE_VERSIONS = (1,)
#: Memories asked for per page, and versions per page of a memory, when exporting.
_ID_PAGE = 200
_VERSION_PAGE = 20


# --------------------------------------------------------------------------------------------
# export


def _version_record(v: MemoryVersion) -> dict[str, Any]:
    return {
        "type": "version",
        "id": v.id,
        "memory_id": v.memory_id,
        "operation": v.operation,
        "created_at": v.created_at,
        "created_by": v.created_by.to_dict() if v.created_by else None,
        "path": v.path,
        "content": v.content,
        "content_sha256": v.content_sha256,
        "content_size_bytes": v.content_size_bytes,
        "redacted_at": v.redacted_at,
        "redacted_by": v.redacted_by.to_dict() if v.redacted_by else None,
    }


def _memory_record(m: Memory) -> dict[str, Any]:
    # No content: it is the head version's, just before (an archive holds it once).
    return {
        "type": "memory",
        "id": m.id,
        "path": m.path,
        "content_sha256": m.content_sha256,
        "content_size_bytes": m.content_size_bytes,
        "memory_version_id": m.memory_version_id,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
    }


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def export_lines(
    store: Store, store_id: str, *, history: bool, progress: Progress = no_progress,
    stats: dict[str, Any] | None = None,
) -> Generator[bytes, None, None]:
    """The archive's lines, uncompressed, one by one: the store as it was at the first line
    (one snapshot, see the module's doc), read a page at a time. ``progress(1)`` after each
    memory; ``stats``, if given, receives the trailer's counts at the end.

    The snapshot is held from the first line until the generator ends, raises, or is closed
    (or dropped) unfinished: iterate it to the end or close it. Any thread may take each
    step, one at a time.

    :raises NotFound: unknown store (before the first line).
    """
    with store.archive.export_snapshot(store_id) as snap:
        digest = hashlib.sha256()
        header = {"format": FORMAT, "version": VERSION,
                  "exported_at": format_time(datetime.now(UTC)), "history": history,
                  "store": snap.store.to_dict()}
        counts = {"memories": 0, "versions": 0, "redacted": 0, "lines": 1}
        line = _line(header)
        digest.update(line)
        yield line
        after = ""
        while ids := store.archive.export_memory_ids(store_id, history=history, after=after,
                                             limit=_ID_PAGE, snapshot=snap):
            for memory_id in ids:
                page_after: tuple[str, str] | None = None
                while True:
                    versions, done, memory = store.archive.export_memory(
                        store_id, memory_id, history=history, after=page_after,
                        limit=_VERSION_PAGE, snapshot=snap)
                    records = [_version_record(v) for v in versions]
                    counts["versions"] += len(versions)
                    counts["redacted"] += sum(v.redacted_at is not None for v in versions)
                    if versions:
                        page_after = (versions[-1].created_at, versions[-1].id)
                    if done and memory is not None:
                        records.append(_memory_record(memory))
                        counts["memories"] += 1
                    for r in records:
                        line = _line(r)
                        digest.update(line)
                        counts["lines"] += 1
                        yield line
                    if done:
                        break
                progress(1)
            after = ids[-1]
    if stats is not None:
        stats.update(counts)
    yield _line({"type": "end", **counts, "sha256": digest.hexdigest()})


def export_archive(
    store: Store, store_id: str, *, history: bool, progress: Progress = no_progress,
    stats: dict[str, Any] | None = None,
) -> Iterator[bytes]:
    """The archive as gzip chunks (of about 64 kB), ready to write or to send: one snapshot
    of the store, held until the generator ends, raises or is closed (:func:`export_lines`).

    :raises NotFound: unknown store (before the first chunk).
    """
    lines = export_lines(store, store_id, history=history, progress=progress, stats=stats)
    # Closed with this generator, whichever way it ends, so the snapshot is never left open
    # (not even until garbage collection) when a download is cut short.
    with closing(lines):
        first = next(lines)  # the store is looked up here, before anything is sent
        # Level 3: within a few % of level 6 on text, twice as fast (the export's main cost).
        gz = zlib.compressobj(3, zlib.DEFLATED, 31)  # wbits 31: a gzip member
        buf = [gz.compress(first)]
        size = len(buf[0])
        for line in lines:
            chunk = gz.compress(line)
            if chunk:
                buf.append(chunk)
                size += len(chunk)
            if size >= 65536:
                yield b"".join(buf)
                buf, size = [], 0
        buf.append(gz.flush())
        yield b"".join(buf)


def write_archive(
    store: Store, store_id: str, out: IO[bytes], *, history: bool,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Write the archive to ``out``; returns the trailer's counts and ``bytes``, its size."""
    size = 0
    stats: dict[str, Any] = {}
    for chunk in export_archive(store, store_id, history=history, progress=progress,
                                stats=stats):
        out.write(chunk)
        size += len(chunk)
    return {**stats, "bytes": size}


# --------------------------------------------------------------------------------------------
# reading an archive


class _Counting(io.RawIOBase):
    """A read-only stream over ``raw`` that reports each read's size to ``progress``."""

    def __init__(self, raw: IO[bytes], progress: Progress) -> None:
        self.raw, self.progress = raw, progress

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.raw.read(len(b))
        n = len(data)
        b[:n] = data
        self.progress(n)
        return n


def _max_line(store: Store) -> int:
    """The longest line a valid archive can hold: a version's content fully escaped (``\\u0001``
    is six bytes for one) plus its path and fields."""
    lim = store.limits
    return 6 * (lim.max_content_bytes + lim.max_path_bytes) + 16384


class ArchiveReader:
    """The header and the records of an archive, read as a stream, checked line by line:
    the format and its version first (:attr:`header`), then every record, and at the end the
    trailer's counts and digest. Any damage raises :class:`InvalidArchive` when it is met:
    in the pass of :meth:`Store.archive.import_archive` that checks the archive before it writes."""

    def __init__(self, raw: IO[bytes], max_line: int, progress: Progress = no_progress):
        self._gz = gzip.GzipFile(fileobj=io.BufferedReader(_Counting(raw, progress)), mode="rb")
        self._max_line = max_line
        self._digest = hashlib.sha256()
        self._n = 0
        self.counts = {"memories": 0, "versions": 0, "redacted": 0}
        first = self._readline()
        if first is None:
            raise InvalidArchive("the archive is empty")
        try:
            header = json.loads(first)
        except (ValueError, RecursionError):
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise InvalidArchive(f"not a memfs archive: the first line is not a {FORMAT} header")
        version = header.get("version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise InvalidArchive(
                f"archive format version {version!r} is not one this memfs reads "
                f"({', '.join(map(str, READABLE_VERSIONS))}): "
                + ("upgrade memfs" if isinstance(version, int) and version > VERSION
                   else "the archive is damaged"))
        self.header: dict[str, Any] = header
        self._digest.update(first)

    def _readline(self) -> bytes | None:
        try:
            line = self._gz.readline(self._max_line + 1)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            raise InvalidArchive(f"the archive is damaged or truncated ({e})") from None
        if not line:
            return None
        self._n += 1
        if not line.endswith(b"\n"):
            if len(line) > self._max_line:
                raise InvalidArchive(f"line {self._n} of the archive is too long")
            raise InvalidArchive(f"the archive is truncated (line {self._n} is incomplete)")
        return line

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record, then the trailer is checked (counts, digest, nothing after it)."""
        while True:
            line = self._readline()
            if line is None:
                raise InvalidArchive("the archive is truncated (no end record)")
            try:
                rec = json.loads(line, parse_constant=_no_constant)
            except (ValueError, RecursionError):
                raise InvalidArchive(f"line {self._n} of the archive is not JSON") from None
            if not isinstance(rec, dict):
                raise InvalidArchive(f"line {self._n} of the archive is not a JSON object")
            if rec.get("type") == "end":
                self._check_end(rec)
                return
            self._digest.update(line)
            if rec.get("type") == "version":
                self.counts["versions"] += 1
                self.counts["redacted"] += rec.get("redacted_at") is not None
            elif rec.get("type") == "memory":
                self.counts["memories"] += 1
            yield rec

    def _check_end(self, end: dict[str, Any]) -> None:
        expected = {**self.counts, "lines": self._n - 1, "sha256": self._digest.hexdigest()}
        got = {k: end.get(k) for k in expected}
        if got != expected:
            wrong = ", ".join(k for k in expected if got[k] != expected[k])
            raise InvalidArchive(f"the archive is damaged: its end record does not match "
                                 f"its content ({wrong})")
        if self._readline() is not None:
            raise InvalidArchive("the archive has data after its end record")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def import_archive(
    store: Store, raw: IO[bytes], *, name: str | None = None, into: str | None = None,
    partial: bool = False, progress: Progress = no_progress, workspace: str = DEFAULT_WORKSPACE,
) -> dict[str, Any]:
    """Restore the archive read from ``raw``, seekable: it is read twice, checked whole
    before anything is written (see :meth:`Store.archive.import_archive` for that and for ``name``,
    ``into`` and ``partial``). Returns the summary: ``store`` (the store imported into),
    ``ids`` (``kept`` or ``new``), ``created_store``, counts of ``memories``, ``versions``
    and ``redacted`` versions, ``skipped`` (``{path, memory_id, reason}``), ``history``.

    :raises InvalidArchive: damaged, truncated, not an archive, or an unknown version.
    :raises Conflict, ImportRejected, InvalidRequest, NotFound, StoreArchived:
    """
    start = raw.tell()
    halves = Halves(progress)  # two passes over the archive: half the progress each
    header = ArchiveReader(raw, _max_line(store), halves).header

    def records() -> Iterator[dict[str, Any]]:
        raw.seek(start)
        return ArchiveReader(raw, _max_line(store), halves).records()

    # The header's store object is any JSON value (or missing): Store.archive.import_archive checks
    # it (restore.store_fields), though its signature says the dict it accepts.
    src = cast("dict[str, Any]", header.get("store"))
    summary = store.archive.import_archive(src, records, name=name, into=into, partial=partial,
                                   workspace=workspace)
    return {"type": "memfs_import", "source": "archive",
            "history": bool(header.get("history")), **summary, "ignored": []}

