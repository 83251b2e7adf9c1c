"""The HTTP response that streams an export (:class:`ClosingStreamingResponse`), and closes it
however the download ends: the API's and the Console's downloads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class ClosingStreamingResponse(StreamingResponse):
    """A stream of a sync iterator (each step in a worker thread) that closes the iterator
    when the response ends, however it ends. Starlette stops iterating when the client goes
    away (``http.disconnect``, a failed send) but leaves the iterator suspended until garbage
    collection, and an export holds a database snapshot until its iterator is closed
    (:func:`export_lines`). Used by the API's and the Console's downloads."""

    def __init__(self, content: Iterable[bytes], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._source = content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # No step is running now: a step in a worker thread is waited for even when
            # the stream is cancelled (anyio does not abandon the thread).
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

