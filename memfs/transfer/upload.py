"""What a path or an upload is, an archive or a zip (:func:`sniff`, from its first bytes),
and its import, whichever it is (:func:`import_upload`: the API's, the Console's and the
CLI's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from ..errors import InvalidArchive, InvalidRequest
from ..models import DEFAULT_WORKSPACE
from ..store import Store
from .archive import import_archive
from .files import Entry, import_files, walk_zip
from .progress import Progress, no_progress

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def sniff(head: bytes) -> str:
    """``archive``, ``zip``, or :raises InvalidArchive: neither (from the first 4 bytes)."""
    if head.startswith(GZIP_MAGIC):
        return "archive"
    if head[:4] in ZIP_MAGICS:
        return "zip"
    raise InvalidArchive("not a memfs archive (gzip) nor a zip file")


def import_upload(
    store: Store, raw: IO[bytes], *, name: str | None = None, into: str | None = None,
    partial: bool = False, actor: Any = None, progress: Progress = no_progress,
    workspace: str = DEFAULT_WORKSPACE,
) -> dict[str, Any]:
    """Import an archive or a zip from a seekable stream, whichever it is (into a new store
    of ``workspace``, or ``into`` one).

    :raises InvalidArchive, InvalidRequest, ...: see :func:`~.archive.import_archive`,
        :func:`~.files.import_files`.
    """
    kind = sniff(raw.read(4))
    raw.seek(0)
    if kind == "archive":
        return import_archive(store, raw, name=name, into=into, partial=partial,
                              progress=progress, workspace=workspace)
    if name is None and into is None:
        raise InvalidRequest("a zip of files needs a new store name (name) or a store to "
                             "import into (into)")
    start = raw.tell()

    def walk(ignored: list[dict[str, str]]) -> Iterator[Entry]:
        raw.seek(start)
        return walk_zip(raw, store.limits, ignored)

    walk([])  # a zip that is not one is refused here, before the store is asked anything
    return import_files(store, walk, name=name, into=into, partial=partial, actor=actor,
                        progress=progress, workspace=workspace)
