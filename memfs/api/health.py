"""Health endpoints of ``memfs serve``, for load balancers and orchestrators (no API key):

* ``GET /healthz`` — liveness: the process serves HTTP. Always 200 while it does.
* ``GET /readyz`` — readiness: the database answers a query within :data:`READY_TIMEOUT`
  seconds (200), or not (503, with the reason). A proxy takes a replica out of rotation while
  its database is unreachable and puts it back when it answers again.

Both answer ``HEAD`` too, and say nothing a caller without a key should not know: no store,
no key, no path of the database.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .. import errors

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from ..store import Store

log = logging.getLogger("memfs.health")  # the name its lines carried before it moved

PATHS = frozenset({"/healthz", "/readyz"})

#: Seconds a readiness probe waits for the database.
READY_TIMEOUT = 2.0


class Health:
    """The ASGI app answering :data:`PATHS`."""

    def __init__(self, store: Store, timeout: float = READY_TIMEOUT) -> None:
        self.store = store
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, scope, 405, {"status": "error", "error": "use GET or HEAD"},
                        [(b"allow", b"GET, HEAD")])
        elif scope["path"] == "/healthz":
            await _send(send, scope, 200, {"status": "ok"})
        else:
            problem = await self._problem()
            if problem is None:
                await _send(send, scope, 200, {"status": "ready", "database": "ok"})
            else:
                await _send(send, scope, 503, {"status": "unavailable", "database": problem})

    async def _problem(self) -> str | None:
        """None if the database answers in time, else why not (one line)."""
        # The thread is abandoned, not killed, on a timeout: a hung database must not hang
        # the probe too.
        with anyio.move_on_after(self.timeout):
            try:
                await anyio.to_thread.run_sync(self.store.ping, abandon_on_cancel=True)
            except Exception as e:  # a driver's own error too: still an answer, not a 500
                # The details (the database's path, say) are for the server's log only.
                log.warning("readiness: the database fails: %s",
                            e.message if isinstance(e, errors.MemfsError) else repr(e))
                return f"{type(e).__name__} (details in the server's log)"
            return None
        log.warning("readiness: the database did not answer within %g s", self.timeout)
        return f"no answer within {self.timeout:g} s"


async def _send(send: Send, scope: Scope, status: int, body: dict[str, str],
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode() + b"\n"
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
               (b"cache-control", b"no-store"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body",
                "body": b"" if scope["method"] == "HEAD" else data})
