"""Everything of memfs that depends on hypercorn's internals, in one place: what
:mod:`memfs.daemons.server` (``memfs serve``) and the launcher's session API
(:mod:`memfs.launcher.sessionapi`) need that hypercorn has no setting or public API for.

- :func:`worker_serve`: a copy of hypercorn's ``trio.run.worker_serve`` with our own accept
  loop (a bound on connections, one warning when out of file descriptors);
- :func:`install_json_protocol_errors`: ``H11Protocol._send_error_response`` replaced (the
  JSON envelope for the errors h11 answers itself) and ``H11Protocol._create_stream`` wrapped
  (a request with both ``Transfer-Encoding`` and ``Content-Length`` refused);
- :func:`install_coalesced_responses`: ``H11Protocol._send_h11_event`` replaced (a response's
  head and body in one write);
- :func:`access_logger_class`: hypercorn's ``Logger`` with our own ``access``.

An upgrade of hypercorn can change any of these without notice: pyproject.toml pins it below
the next version nobody checked, and tests/unit/daemons/test_hypercorn_glue.py fails when an
attribute used here is gone, takes other arguments, or (for what is copied or replaced) has
other code than the one this module was written against.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

import h11
import trio
from hypercorn.config import Config, Sockets
from hypercorn.events import Closed, RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import ShutdownError, raise_shutdown, repr_socket_addr, wrap_app

from . import logs

if TYPE_CHECKING:
    from hypercorn.logging import Logger

log = logging.getLogger("memfs.server")  # the server's lines, as before this module was cut out

#: Seconds between two warnings that accepting a connection failed for lack of resources.
ACCEPT_WARNING_SECONDS = 10.0


async def worker_serve(
    app: Any,
    config: Config,
    sockets: Sockets,
    shutdown_trigger: Callable[[], Awaitable[Any]],
    max_connections: int,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """hypercorn's ``trio.run.worker_serve`` for our sockets (plain HTTP) and an ASGI ``app``,
    with our own accept loop: at most ``max_connections`` at once, and no error log every 0.1 s
    when the process runs out of file descriptors (trio's ``serve_listeners`` logs a traceback
    per retry)."""
    app = wrap_app(app, config.wsgi_max_body_size, "asgi")
    lifespan_state: dict[str, Any] = {}
    lifespan = Lifespan(app, config, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(sock))
                         for sock in sockets.insecure_sockets]
            binds = ["http://" + repr_socket_addr(sock.family, sock.getsockname())
                     for sock in sockets.insecure_sockets]
            handler = partial(TCPServer, app, config, context,
                              ConnectionState(lifespan_state.copy()))
            slots = trio.Semaphore(max_connections)
            task_status.started(binds)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(raise_shutdown, shutdown_trigger)
                    nursery.start_soon(raise_shutdown, context.terminate.wait)
                    for listener in listeners:
                        nursery.start_soon(_accept, listener, slots, server_nursery, handler)
            except BaseExceptionGroup as error:
                _, other_errors = error.split((ShutdownError, KeyboardInterrupt))
                if other_errors is not None:
                    raise other_errors from None
            finally:
                await context.terminated.set()
                server_nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


#: accept(2) errors that say the process or system is out of resources, not the listener.
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


async def _accept(
    listener: trio.SocketListener,
    slots: trio.Semaphore,
    nursery: trio.Nursery,
    handler: Callable[[trio.SocketStream], Awaitable[Any]],
) -> None:
    """Accept connections while a slot is free; each connection holds its slot until it
    closes. Out of file descriptors: one warning per :data:`ACCEPT_WARNING_SECONDS`."""
    warned_at = -ACCEPT_WARNING_SECONDS
    async with listener:
        while True:
            await slots.acquire()
            try:
                stream = await listener.accept()
            except OSError as e:
                slots.release()
                if e.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                if trio.current_time() - warned_at >= ACCEPT_WARNING_SECONDS:
                    warned_at = trio.current_time()
                    log.warning("cannot accept connections: %s; retrying",
                                os.strerror(e.errno))
                await trio.sleep(0.1)
                continue
            nursery.start_soon(_connection, stream, slots, handler)


async def _connection(
    stream: trio.SocketStream,
    slots: trio.Semaphore,
    handler: Callable[[trio.SocketStream], Awaitable[Any]],
) -> None:
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)
        slots.release()


def install_json_protocol_errors() -> None:
    """Make the errors hypercorn's HTTP/1.1 layer answers before any app sees the request
    (431 headers too large, 400 a malformed request or URL) carry the JSON envelope of
    API.md §1.6 instead of an empty body. hypercorn has no setting for it, so its one method
    that writes them is replaced (idempotent)."""
    H11Protocol._send_error_response = send_json_error  # type: ignore[method-assign]
    if not getattr(H11Protocol._create_stream, "_memfs", False):
        H11Protocol._create_stream = refuse_ambiguous_framing(  # type: ignore[method-assign,assignment]
            H11Protocol._create_stream)


def refuse_ambiguous_framing(
    create_stream: Callable[[H11Protocol, h11.Request], Coroutine[Any, Any, None]],
) -> Callable[[H11Protocol, h11.Request], Coroutine[Any, Any, None]]:
    """A request with both ``Transfer-Encoding`` and ``Content-Length`` is answered 400 and
    its connection closed, never passed to the app: h11 frames its body by the former (RFC
    9112 §6.3), a proxy in front may frame it by the latter, and the bytes they disagree
    about would be read as the next request (request smuggling). RFC 9112 §6.1 lets a
    server refuse it; a server behind a proxy must."""

    async def create(self: H11Protocol, request: h11.Request) -> None:
        names = {name.lower() for name, _ in request.headers}
        if b"transfer-encoding" in names and b"content-length" in names:
            await send_json_error(self, 400, AMBIGUOUS_FRAMING)
            await self.send(Closed())
            return
        await create_stream(self, request)

    create._memfs = True  # type: ignore[attr-defined]
    return create


def install_coalesced_responses() -> None:
    """Send a response's head and body in one write when its length is known: hypercorn
    writes the head, the body and an empty end of message each on its own (three trips
    through trio and up to two send(2) calls per answer, for a 1 kB JSON body). A streamed
    response (no content-length: SSE, exports) still gets its head at once. Idempotent."""
    H11Protocol._send_h11_event = send_h11_event_coalesced  # type: ignore[method-assign]


async def send_h11_event_coalesced(self: H11Protocol, event: Any) -> None:
    try:
        data = self.connection.send(event)
    except h11.LocalProtocolError:
        if self.connection.their_state != h11.ERROR:
            raise
        return
    held: bytes = getattr(self, "_memfs_head", b"")
    if isinstance(event, h11.Response) and any(
            name == b"content-length" for name, _ in event.headers):
        self._memfs_head = held + data  # type: ignore[attr-defined]
        return
    if held:
        data, self._memfs_head = held + data, b""  # type: ignore[attr-defined]
    if data:
        await self.send(RawData(data=data))


#: Messages for the statuses h11 hints at when it rejects a request.
PROTOCOL_ERRORS = {
    431: ("request_header_fields_too_large", "the request head is over {max_head} bytes"),
    505: ("http_version_not_supported", "HTTP version not supported; use HTTP/1.1"),
}
#: What :func:`refuse_ambiguous_framing` answers (with 400).
AMBIGUOUS_FRAMING = ("ambiguous_body_length", "a request may carry Transfer-Encoding or "
                      "Content-Length, not both (request smuggling)")


async def send_json_error(self: H11Protocol, status_code: int,
                           error: tuple[str, str] | None = None) -> None:
    """The JSON envelope of a protocol error: ``error`` (code, message), else the status's
    from :data:`PROTOCOL_ERRORS` (hypercorn passes the status only)."""
    code, message = error or PROTOCOL_ERRORS.get(status_code, (
        "malformed_request",
        "malformed HTTP request (a bad request line, header or URL: a URL must be ASCII, "
        "anything else percent-encoded)",
    ))
    message = message.replace("{max_head}", str(self.config.h11_max_incomplete_size))
    request_id = "req_" + secrets.token_hex(12)
    body = json.dumps({
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message,
                  "details": {"error_code": code}},
        "request_id": request_id,
    }).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (b"request-id", request_id.encode()),
        (b"x-should-retry", b"false"),
        *self.config.response_headers("h11"),
    ]
    try:
        await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())
    except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError,
            h11.LocalProtocolError) as e:
        # The peer is gone, or a response (the app's 408) is being sent on this connection
        # already: nobody to tell. Raising here would end the whole server.
        log.debug("protocol error response %d not sent: %r", status_code, e)


def access_logger_class() -> type[Logger]:
    """hypercorn's Logger with a cheap, structured :meth:`access` (hypercorn's own copies
    every request header and the whole environment into a dict per request, even when the
    line is not logged)."""
    from hypercorn.logging import Logger

    class AccessLogger(Logger):
        async def access(self, request: Any, response: Any, request_time: float) -> None:
            logger = self.access_logger
            if logger is None or not logger.isEnabledFor(logging.INFO):
                return
            f = logs.access_fields(request, response, request_time)
            logger.info('%s "%s %s" %s %.1f ms %s B %s', f["client"] or "-", f["method"],
                        f["path"], f["status"] or "-", f["duration_ms"],
                        "-" if f["bytes"] is None else f["bytes"], f["request_id"] or "-",
                        extra={"fields": f})

    return AccessLogger
