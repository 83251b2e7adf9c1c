"""memfs extensions: import and export (:mod:`memfs.transfer`; README "Import and export"),
and the bounds of an import's upload (tests patch them here)."""

from __future__ import annotations

import tempfile
from typing import IO, TYPE_CHECKING, Any

from starlette.requests import Request

from .. import errors, transfer
from ..rules import slugify
from .body import body_chunks

if TYPE_CHECKING:
    from .call import Call


#: Largest archive or zip ``POST /v1/memfs/import`` accepts (spooled to a temporary file past
#: :data:`IMPORT_SPOOL_BYTES`), and the seconds its upload may take in all.
MAX_IMPORT_BYTES = 512 * 1024 * 1024
IMPORT_SPOOL_BYTES = 1024 * 1024
IMPORT_TOTAL_SECONDS = 600.0


async def export_store(c: Call) -> Any:
    """The archive, streamed: gzip chunks made a page of memories at a time in a worker
    thread, so memory stays flat whatever the store's size; one snapshot of the store,
    released when the response ends (a client gone mid-download included)."""
    store = await c.run(c.store.stores.get, c.p["memory_store_id"])  # 404 before streaming
    history = c.q.flag("history", False)
    chunks = transfer.export_archive(c.store, store.id, history=history)
    name = f"{slugify(store.name) or store.id}{'-history' if history else ''}.memfs.gz"
    return transfer.ClosingStreamingResponse(chunks, media_type="application/gzip", headers={
        "content-disposition": f'attachment; filename="{name}"'})


async def import_store(c: Call) -> Any:
    q = c.q
    name, into, partial = q.text("name"), q.text("into"), q.flag("partial", False)
    with tempfile.SpooledTemporaryFile(max_size=IMPORT_SPOOL_BYTES) as spool:
        await _spool_body(c.request, spool)
        spool.seek(0)
        if into is not None:
            into = (await c.run(c.store.stores.resolve, into, workspace=c.workspace)).id
        return await c.run(transfer.import_upload, c.store, spool, name=name, into=into,
                           partial=partial, actor=c.actor, workspace=c.workspace)


async def _spool_body(request: Request, out: IO[bytes]) -> None:
    """Copy the body to ``out``: at most :data:`MAX_IMPORT_BYTES`, within
    :data:`IMPORT_TOTAL_SECONDS`.

    :raises RequestTooLarge, RequestTimeout, ClientGone, InvalidRequest: (an empty body)
    """
    size = 0
    async for chunk in body_chunks(request, MAX_IMPORT_BYTES, IMPORT_TOTAL_SECONDS, "import"):
        size += len(chunk)
        out.write(chunk)
    if size == 0:
        raise errors.InvalidRequest("the body is empty: send an archive (memfs export) or a "
                                    "zip of text files")
