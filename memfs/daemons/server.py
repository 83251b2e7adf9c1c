"""Composition root of ``memfs serve``: the ASGI app of :mod:`memfs.api` under hypercorn on trio.

Security: the API always requires a key. The server's own keys come from ``--api-key``
(repeatable) and ``MEMFS_API_KEYS`` (comma-separated): the default workspace's admins. Keys
kept in the database (``memfs keys create``) are taken too. With no server key and no live
admin key in the database (:meth:`memfs.store.Store.has_live_admin_key`) the server refuses
to listen anywhere but loopback; on loopback it generates a key for this run and prints it
once on stderr, the way Jupyter prints its token, so ``memfs serve`` works at once without
ever serving an open API. Each stored key and session token may send ``--key-rate``
requests a second (:class:`memfs.api.limits.KeyRates`).

Hostile or broken clients (issues 8 and 19): every connection is bounded. A request body has
:data:`memfs.api.body.BODY_IDLE_SECONDS` between bytes, and past its first
:data:`~memfs.api.body.BODY_GRACE_SECONDS` must average :data:`~memfs.api.body.MIN_BODY_RATE`
bytes/s (then 408, connection closed); at most half the connections may be reading a body at
once, and one client address or API key only a few of them (:mod:`memfs.api.uploads`: 429, or
503, at once, the body unread), so slow uploads never take the connections new clients need; a
connection without a request in progress, or still sending its headers, is closed after
:data:`KEEP_ALIVE_SECONDS`; headers are at most :data:`MAX_HEADER_BYTES` (431). The server raises
its file-descriptor limit to the hard limit and accepts at most that many connections less
:data:`FD_RESERVE` (kept for the database and worker threads): past it, new clients wait in the
listen queue instead of failing every accept. Errors the HTTP layer answers itself (431, a
malformed request line, bytes that are not allowed in a URL, both Transfer-Encoding and
Content-Length) carry the JSON envelope too.

Recall: the server keeps every store of its database indexed by meaning, in a background
thread at the lowest CPU priority (:func:`start_indexer`), with the provider that
``MEMFS_EMBEDDINGS`` (``memfs --embeddings``) names; a provider that fails or hangs costs that
thread its time, never a request or the server. Another thread indexes the words that writes
queued, every second (:func:`start_words`).

Known limitation: a client that never reads a large response holds its connection for as long
as the kernel's buffers keep the write pending (hypercorn shields its writes from timeouts).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import logging
import os
import resource
import secrets
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
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

from .. import errors
from ..api import api_key_id, create_app
from ..api.limits import KeyRates
from ..api.uploads import Uploads
from ..backends import redact_url
from ..store import Store, open_store
from .logs import access_logger_class

if TYPE_CHECKING:
    from ..recall.indexer import BackgroundIndexer
    from ..recall.wordsqueue import BackgroundCatchUp

log = logging.getLogger("memfs.server")  # the name its lines carried before it moved

#: Seconds open connections (SSE streams) get to finish when the server stops.
GRACEFUL_SECONDS = 2.0
#: Seconds a connection may sit without a request in progress (idle keep-alive, or headers
#: still arriving) before the server closes it.
KEEP_ALIVE_SECONDS = 5.0
#: Largest request head (request line and headers); more is answered 431.
MAX_HEADER_BYTES = 16 * 1024
#: Connections waiting in the kernel for the server to accept them.
BACKLOG = 1024
#: File descriptors kept free of connections: the database, its WAL, worker threads, logs.
FD_RESERVE = 256
#: Seconds between two warnings that accepting a connection failed for lack of resources.
ACCEPT_WARNING_SECONDS = 10.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def api_keys_from(options: Sequence[str], environ: dict[str, str] | None = None) -> list[str]:
    """The serving keys: ``--api-key`` values, then ``MEMFS_API_KEYS`` (comma-separated);
    blanks dropped, order kept, duplicates removed."""
    env = os.environ if environ is None else environ
    keys = list(options) + env.get("MEMFS_API_KEYS", "").split(",")
    return list(dict.fromkeys(k.strip() for k in keys if k.strip()))


#: The fewest characters of a server key on an address other than loopback (issue 38 S4: a
#: one-character key was taken, and guessed in at most a few hundred tries).
MIN_SERVER_KEY_CHARS = 16


def check_bind(host: str, keys: Sequence[str], stored_admin: bool = False) -> None:
    """:raises errors.InvalidRequest: a non-loopback ``host`` without any server key, and no
    live admin key in the database (``stored_admin``) either; or with a server key shorter
    than :data:`MIN_SERVER_KEY_CHARS` (named by its id, never itself)."""
    if is_loopback(host):
        return
    short = [api_key_id(k) for k in keys if len(k) < MIN_SERVER_KEY_CHARS]
    if short:
        raise errors.InvalidRequest(
            f"refusing to listen on {host} with a server key shorter than "
            f"{MIN_SERVER_KEY_CHARS} characters ({', '.join(short)}): off loopback a key must "
            "not be guessable; make one with `python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(24))'`")
    if not keys and not stored_admin:
        raise errors.InvalidRequest(
            f"refusing to listen on {host} without API keys: pass --api-key or set "
            "MEMFS_API_KEYS, or make an admin key with `memfs keys create NAME --role admin`"
        )


def _stored_admin(db_path: str | os.PathLike[str] | None) -> bool:
    """Does the database hold a live admin key? A missing database holds none (and is not
    made for a server that will not start)."""
    try:
        store = open_store(db_path, create=False)
    except errors.DatabaseUnavailable:
        return False
    try:
        return store.has_live_admin_key()
    finally:
        store.close()


def key_rates(rate: float | None) -> KeyRates:
    """Each key's request rate: ``rate`` requests a second (``--key-rate``), else
    ``MEMFS_KEY_RATE``'s, else :data:`memfs.api.limits.RATE`.

    :raises errors.InvalidRequest: not a number above 0.
    """
    try:
        return KeyRates(rate) if rate is not None else KeyRates.from_env()
    except ValueError as e:
        where = "" if rate is not None else " (MEMFS_KEY_RATE)"
        raise errors.InvalidRequest(f"invalid key rate{where}: {e}") from None


def generate_key() -> str:
    return "memfs-" + secrets.token_urlsafe(24)


def serve(
    db_path: str | os.PathLike[str] | None,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_keys: Sequence[str] = (),
    *,
    echo: Callable[[str], None] | None = None,
    workers: int = 1,
    key_rate: float | None = None,
) -> None:
    """Serve the API on ``host:port`` until SIGINT or SIGTERM.

    ``port`` 0 picks a free port; the address actually bound is announced through ``echo``
    (default: stderr) as ``memfs: serving http://HOST:PORT``.

    ``workers`` > 1: that many processes serve the same port (SO_REUSEPORT: the kernel spreads
    new connections over them) and share the database, each with its own connections and
    group commit (SQLite's write lock orders their commits). One process runs Python on one
    core at a time; more use the other cores. The first process announces the address; if
    one ends, the others are stopped too.

    Without ``api_keys`` the keys kept in the database are the only ones if it holds a live
    admin key; else, on loopback, a key is generated for this run. ``key_rate``: requests a
    second each stored key or session token may send (:func:`key_rates`).

    :raises errors.InvalidRequest: no keys on a non-loopback address; a bad ``key_rate``.
    :raises OSError: the address cannot be bound.
    """
    say = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    keys = list(api_keys)
    rates = key_rates(key_rate)
    if not is_loopback(host):
        check_bind(host, keys, not keys and _stored_admin(db_path))
    max_connections = max(16, raise_fd_limit() - FD_RESERVE)
    _install_json_protocol_errors()
    _install_coalesced_responses()
    store = open_store(db_path, create=True)
    try:
        if not keys and store.has_live_admin_key():
            say("memfs: no --api-key: the keys kept in the database are the only ones "
                "(memfs keys list)")
        elif not keys:
            keys = [generate_key()]
            say(f"memfs: no API key configured; this run accepts the generated key {keys[0]}")
            say("memfs: (choose your own with --api-key KEY or MEMFS_API_KEYS, or make "
                "keys with memfs keys create)")
        config = Config()
        config.bind = [f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"]
        config.graceful_timeout = GRACEFUL_SECONDS
        config.keep_alive_timeout = KEEP_ALIVE_SECONDS
        config.h11_max_incomplete_size = MAX_HEADER_BYTES
        config.backlog = BACKLOG
        config.accesslog = logging.getLogger("memfs.access")
        config.logger_class = access_logger_class()
        config.errorlog = logging.getLogger("hypercorn.error")
        config.workers = workers  # > 1: SO_REUSEPORT on the sockets
        # Bind before trio starts, so that a taken port is a plain OSError for the caller.
        sockets = config.create_sockets()
        if workers > 1:
            path = store.path
            store.close()  # every worker opens its own (no SQLite connection crosses a fork)
            _serve_workers(workers, path, keys, config, sockets, say, max_connections, rates)
            return
        app = create_app(store, keys, uploads=uploads_for(max_connections), rates=rates)
        indexer = start_indexer(store)
        words = start_words(store)
        try:
            trio.run(_run, app, config, sockets, redact_url(store.path), say, max_connections)
        finally:
            if words is not None:
                words.stop()
            if indexer is not None:
                indexer.stop()
    finally:
        store.close()


def start_indexer(store: Store) -> BackgroundIndexer | None:
    """Start a :class:`memfs.recall.indexer.BackgroundIndexer` over every store of the
    database (archived ones too: they are searched too), with the store's provider of
    embeddings; None when meaning is off (``--embeddings none``). The indexer's thread
    survives any failure of the provider or the database (it tries again at its next poll).

    :raises errors.InvalidRequest: ``MEMFS_EMBEDDINGS`` names no provider.
    """
    from ..recall.indexer import BackgroundIndexer

    provider = store.embeddings
    if provider is None:
        return None

    def every_store() -> list[str]:
        return [str(r[0]) for r in store.database.all("SELECT id FROM stores ORDER BY id")]

    log.info("indexing every store by meaning with %s", provider.model)
    return BackgroundIndexer(store, provider, every_store).start()


def start_words(store: Store) -> BackgroundCatchUp:
    """Start the thread that indexes the words the writes queued, of every store, every
    second (:mod:`memfs.recall.wordsqueue`): searches then find little left to index."""
    from ..recall.wordsqueue import BackgroundCatchUp

    return BackgroundCatchUp(store.catch_up_words).start()


def _serve_workers(
    n: int, db: str, keys: list[str], config: Config, first: Sockets,
    say: Callable[[str], None], max_connections: int, rates: KeyRates,
) -> None:
    """``n`` worker processes, each serving its own socket bound to the same address."""
    port = first.insecure_sockets[0].getsockname()[1]
    host = config.bind[0].rsplit(":", 1)[0]
    config.bind = [f"{host}:{port}"]  # port 0 was chosen once: the others bind the same
    all_sockets = [first] + [config.create_sockets() for _ in range(n - 1)]
    pids = []
    for i, sockets in enumerate(all_sockets):
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                for other in all_sockets:
                    if other is not sockets:
                        for sock in other.insecure_sockets:
                            sock.close()
                store = open_store(db, create=False)
                indexer = words = None
                try:
                    app = create_app(store, keys, uploads=uploads_for(max_connections),
                                     rates=rates)
                    # One indexer for all the workers (the first's): one model in memory.
                    indexer = start_indexer(store) if i == 0 else None
                    words = start_words(store) if i == 0 else None
                    trio.run(_run, app, config, sockets, store.path,
                             say if i == 0 else (lambda line: None), max_connections)
                finally:
                    if words is not None:
                        words.stop()
                    if indexer is not None:
                        indexer.stop()
                    store.close()
            except BaseException:
                log.exception("worker %d failed", i)
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    for sockets in all_sockets:  # the workers' now; a socket left open here would stay
        for sock in sockets.insecure_sockets:
            sock.close()
    _supervise(pids)


def _supervise(pids: list[int]) -> None:
    """Forward SIGINT/SIGTERM to the workers; when one ends, stop the others; wait for all."""
    alive = set(pids)

    def forward(signum: int, frame: Any) -> None:
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    old = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while alive:
            pid, _ = os.wait()
            if pid in alive:
                alive.discard(pid)
                forward(signal.SIGTERM, None)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def uploads_for(max_connections: int) -> Uploads:
    """The request bodies a server of ``max_connections`` reads at once: half of them, so
    that slow uploads leave the other half to new clients (:mod:`memfs.api.uploads`)."""
    return Uploads(total=max(8, max_connections // 2))


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the file descriptor limit from %d to %d", soft, target)
    return soft


async def _run(
    app: Any, config: Config, sockets: Sockets, db: str, say: Callable[[str], None],
    max_connections: int,
) -> None:
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_for_signal, shutdown)

        async def serve_then_stop(task_status: trio.TaskStatus[list[str]]) -> None:
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
            await _worker_serve(
                wrap_app(app, config.wsgi_max_body_size, "asgi"),
                config,
                sockets,
                shutdown.wait,
                max_connections,
                task_status=task_status,
            )
            nursery.cancel_scope.cancel()

        binds = await nursery.start(serve_then_stop)
        for bind in binds:
            say(f"memfs: serving {bind} (database {db})")


async def _worker_serve(
    app: Any,
    config: Config,
    sockets: Sockets,
    shutdown_trigger: Callable[[], Awaitable[Any]],
    max_connections: int,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """hypercorn's ``trio.run.worker_serve`` for our sockets (plain HTTP), with our own accept
    loop: at most ``max_connections`` at once, and no error log every 0.1 s when the process
    runs out of file descriptors (trio's ``serve_listeners`` logs a traceback per retry)."""
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


def _install_json_protocol_errors() -> None:
    """Make the errors hypercorn's HTTP/1.1 layer answers before any app sees the request
    (431 headers too large, 400 a malformed request or URL) carry the JSON envelope of
    API.md §1.6 instead of an empty body. hypercorn has no setting for it, so its one method
    that writes them is replaced (idempotent)."""
    H11Protocol._send_error_response = _send_json_error  # type: ignore[method-assign]
    if not getattr(H11Protocol._create_stream, "_memfs", False):
        H11Protocol._create_stream = _refuse_ambiguous_framing(  # type: ignore[method-assign,assignment]
            H11Protocol._create_stream)


def _refuse_ambiguous_framing(
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
            await _send_json_error(self, 400, _AMBIGUOUS_FRAMING)
            await self.send(Closed())
            return
        await create_stream(self, request)

    create._memfs = True  # type: ignore[attr-defined]
    return create


def _install_coalesced_responses() -> None:
    """Send a response's head and body in one write when its length is known: hypercorn
    writes the head, the body and an empty end of message each on its own (three trips
    through trio and up to two send(2) calls per answer, for a 1 kB JSON body). A streamed
    response (no content-length: SSE, exports) still gets its head at once. Idempotent."""
    H11Protocol._send_h11_event = _send_h11_event_coalesced  # type: ignore[method-assign]


async def _send_h11_event_coalesced(self: H11Protocol, event: Any) -> None:
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
_PROTOCOL_ERRORS = {
    431: ("request_header_fields_too_large",
          f"the request head is over {MAX_HEADER_BYTES} bytes"),
    505: ("http_version_not_supported", "HTTP version not supported; use HTTP/1.1"),
}
#: What :func:`_refuse_ambiguous_framing` answers (with 400).
_AMBIGUOUS_FRAMING = ("ambiguous_body_length", "a request may carry Transfer-Encoding or "
                      "Content-Length, not both (request smuggling)")


async def _send_json_error(self: H11Protocol, status_code: int,
                           error: tuple[str, str] | None = None) -> None:
    """The JSON envelope of a protocol error: ``error`` (code, message), else the status's
    from :data:`_PROTOCOL_ERRORS` (hypercorn passes the status only)."""
    code, message = error or _PROTOCOL_ERRORS.get(status_code, (
        "malformed_request",
        "malformed HTTP request (a bad request line, header or URL: a URL must be ASCII, "
        "anything else percent-encoded)",
    ))
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


async def _wait_for_signal(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: shutting down", signal.Signals(signum).name)
            shutdown.set()
            return

