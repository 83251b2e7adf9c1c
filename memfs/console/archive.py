"""Export and import in the Console: download a store's archive, upload an archive or a zip of
text files (:mod:`memfs.transfer` reads and writes them; the store applies every rule), into a
new store of the signed-in key's workspace or one of its stores."""

from __future__ import annotations

import shutil
import tempfile

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors, transfer
from ..rules import slugify
from .stores import namesakes_note
from .web import Console, form, page, upload

#: Largest upload (the API's import limit).
MAX_UPLOAD_BYTES = 512 * 1024 * 1024


async def store_export(console: Console, request: Request) -> Response:
    store = console.store
    current = await console.run(store.stores.get, request.path_params["store_id"])
    history = request.query_params.get("history") == "1"
    # A plain iterator: Starlette runs each step in a worker thread, a page of memories
    # at a time, so memory stays flat whatever the store's size. Closed when the response
    # ends, a download cut short included, so the export's snapshot is let go at once.
    chunks = transfer.export_archive(store, current.id, history=history)
    name = f"{slugify(current.name) or current.id}{'-history' if history else ''}.memfs.gz"
    return transfer.ClosingStreamingResponse(chunks, media_type="application/gzip", headers={
        "content-disposition": f'attachment; filename="{name}"'})


async def store_import(console: Console, request: Request) -> Response:
    store = console.store
    user = request.state.user
    into_id = request.query_params.get("into") or None
    if into_id:
        await console.check_store(user, into_id)
    into = await console.run(store.stores.get, into_id) if into_id else None
    if request.method == "GET":
        return console.render(request, "import.html", into=into, form={}, error=None,
                              entries=[], result=None)
    fields = await form(request)
    file = await upload(request, "file")
    name = fields.get("name", "").strip() or None
    partial = fields.get("partial") == "1"
    error, entries, result, status = None, [], None, 200
    if file is None:
        error, status = ("choose a file: an archive made by memfs export, or a zip of "
                         "text files"), 400
    else:
        with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as spool:
            await console.run(shutil.copyfileobj, file.file, spool)
            spool.seek(0)
            try:
                result = await console.run(
                    transfer.import_upload, store, spool, name=name,
                    into=into.id if into else None, partial=partial,
                    actor=user.actor, workspace=user.workspace)
            except errors.ImportRejected as e:  # every entry that broke a rule
                error, entries, status = e.message, e.entries, console.error_status(e)
            except (errors.InvalidRequest, errors.Conflict) as e:  # archive, name, ids
                error, status = e.message, console.error_status(e)
    note = ""
    if result is not None and result.get("created_store"):
        made = result["store"]
        note = namesakes_note(made["name"], await console.run(store.stores.namesakes, made["id"]))
    return console.render(request, "import.html", status=status, into=into, form=fields,
                          error=error, entries=entries, result=result, note=note)


routes: list[BaseRoute] = [
    page("/stores/{store_id}/export", store_export),
    page("/import", store_import, ("GET", "POST"), upload_bytes=MAX_UPLOAD_BYTES,
         right="manage", form_page=True),
]
