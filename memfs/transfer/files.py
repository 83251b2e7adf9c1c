"""Imports of plain files: a directory, or a zip of one (:func:`walk_directory`,
:func:`walk_zip`, :func:`import_files`).

Each file becomes a memory at ``/`` + its relative path, NFC-normalized (file names from
macOS are NFD). Hidden files and directories (a name starting with ``.``: ``.git``,
``.obsidian``, ``.DS_Store``), symbolic links and special files are never imported and are
listed as ``ignored``; every other file either becomes a memory or is listed in ``skipped``
with the store's reason. The files are walked twice, as an archive is read
(:meth:`Store.archive.import_files`: checked all before anything is written, then written in
short transactions), and never held all in memory. Only walking and reading: every rule is
the store's.
"""

from __future__ import annotations

import os
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..errors import InvalidArchive
from ..models import DEFAULT_WORKSPACE
from ..rules import Limits, too_large
from ..store import Store
from .progress import Halves, Progress, no_progress

#: A zip with more entries than this is refused before anything is read (its index alone
#: could be large); the total of the entries read is bounded too (:func:`walk_zip`).
MAX_ZIP_ENTRIES = 20_000

#: An entry of a file walk: (memory path, content, reason it cannot be imported or None).
Entry = tuple[str, bytes | None, str | None]


def _memory_path(parts: list[str]) -> str:
    return "/" + unicodedata.normalize("NFC", "/".join(parts))


def walk_directory(
    root: str, limits: Limits, ignored: list[dict[str, str]]
) -> Iterator[Entry]:
    """The files under ``root`` in path order, each read (at most the content limit + 1
    bytes: a larger file is reported with its size, never read whole). Hidden entries, links and
    special files are appended to ``ignored`` instead."""
    limit = limits.max_content_bytes
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        parts = [] if rel == "." else rel.split(os.sep)
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if d.startswith(".") or os.path.islink(full):
                why = "hidden directory" if d.startswith(".") else "symbolic link"
                ignored.append({"path": _memory_path([*parts, d]) + "/", "reason": why})
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))
        for f in sorted(filenames):
            path = _memory_path([*parts, f])
            full = os.path.join(dirpath, f)
            if f.startswith("."):
                ignored.append({"path": path, "reason": "hidden file"})
                continue
            try:
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError as e:
                if os.path.islink(full):
                    ignored.append({"path": path, "reason": "symbolic link"})
                else:
                    yield path, None, f"cannot read the file: {e.strerror}"
                continue
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode):
                    ignored.append({"path": path, "reason": "not a regular file"})
                    continue
                try:
                    data = fh.read(limit + 1)
                except OSError as e:
                    yield path, None, f"cannot read the file: {e.strerror}"
                    continue
            if len(data) > limit:
                yield path, None, too_large(max(st.st_size, len(data)), limits)
            else:
                yield path, data, None


def walk_zip(
    raw: IO[bytes], limits: Limits, ignored: list[dict[str, str]]
) -> Iterator[Entry]:
    """The files of a zip (seekable ``raw``), like :func:`walk_directory`. Each entry is
    decompressed to at most the content limit + 1 bytes, and all of them to at most twice
    what a full store holds, whatever sizes the zip declares: a zip bomb costs no more than
    an honest zip.

    :raises InvalidArchive: not a zip, a damaged index, or more than
        :data:`MAX_ZIP_ENTRIES` entries (before the first entry is yielded).
    """
    try:
        zf = zipfile.ZipFile(raw)
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as e:
        raise InvalidArchive(f"not a readable zip file ({e})") from None
    if len(infos) > MAX_ZIP_ENTRIES:
        raise InvalidArchive(f"the zip has {len(infos)} entries; at most {MAX_ZIP_ENTRIES} "
                             "are read")
    return _zip_entries(zf, infos, limits, ignored)


def _zip_entries(
    zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], limits: Limits,
    ignored: list[dict[str, str]],
) -> Iterator[Entry]:
    limit = limits.max_content_bytes
    max_total = 2 * limits.max_memories * limit
    total = 0
    hidden: set[str] = set()
    with zf:
        for info in sorted(infos, key=lambda i: i.filename):
            name = info.filename
            if info.is_dir():
                continue
            parts = name.split("/")
            path = _memory_path(parts)
            if parts[0] == "__MACOSX":
                continue  # the resource forks macOS adds to its zips
            dot = next((i for i, p in enumerate(parts)
                        if p.startswith(".") and p not in (".", "..")), None)
            if dot is not None:
                if dot < len(parts) - 1:
                    top = _memory_path(parts[:dot + 1]) + "/"
                    if top not in hidden:
                        hidden.add(top)
                        ignored.append({"path": top, "reason": "hidden directory"})
                else:
                    ignored.append({"path": path, "reason": "hidden file"})
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                ignored.append({"path": path, "reason": "symbolic link"})
                continue
            if info.file_size > limit:
                yield path, None, too_large(info.file_size, limits)
                continue
            if total >= max_total:
                yield path, None, "not read: the zip holds more data than a store can"
                continue
            try:
                with zf.open(info) as f:
                    data = f.read(limit + 1)
            except (zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError,
                    EOFError, OSError, ValueError) as e:
                yield path, None, f"cannot read the zip entry: {e}"
                continue
            total += len(data)
            if len(data) > limit:
                yield path, None, f"content is over {limit} bytes (the zip said "\
                    f"{info.file_size}); the limit is {limit} bytes"
            else:
                yield path, data, None


def import_files(
    store: Store, walk: Callable[[list[dict[str, str]]], Iterator[Entry]], *,
    name: str | None = None, into: str | None = None, partial: bool = False,
    actor: Any = None, progress: Progress = no_progress, workspace: str = DEFAULT_WORKSPACE,
) -> dict[str, Any]:
    """Import walked files (``walk(ignored)``: :func:`walk_directory` or :func:`walk_zip` of
    the source, appending what it ignores to ``ignored``; called once per pass over the
    files: :meth:`Store.archive.import_files` checks them all before it writes). The summary is
    :func:`~memfs.transfer.archive.import_archive`'s, plus ``ignored``.

    :raises ImportRejected, InvalidArchive, InvalidRequest, NotFound, StoreArchived:
    """
    ignored: list[dict[str, str]] = []
    passes = 0
    halves = Halves(progress)

    def files() -> Iterator[Entry]:
        nonlocal passes
        passes += 1
        for e in walk(ignored if passes == 1 else []):
            halves(1)  # each file, once in each of the two passes
            yield e

    summary = store.archive.import_files(files, name=name, into=into, partial=partial, actor=actor,
                                 workspace=workspace)
    return {"type": "memfs_import", "source": "files", "history": False, **summary,
            "ignored": ignored}

