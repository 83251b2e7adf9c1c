"""Composition root of ``memfs serve``: the ASGI app of :mod:`memfs.api` under hypercorn on trio.

Security: the API always requires a key. The server's own keys come from ``--api-key``
(repeatable) and ``MEMFS_API_KEYS`` (comma-separated): the default workspace's admins. Keys
kept in the database (``memfs keys create``) are taken too. With no server key and no live
admin key in the database (:meth:`memfs.store.Store.keys.has_live_admin`) the server refuses
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
queued, every second (:func:`start_words`). A third sweeps the expired memories of every store
(:mod:`memfs.daemons.expiry`: at start, then every minute).

Known limitation: a client that never reads a large response holds its connection for as long
as the kernel's buffers keep the write pending (hypercorn shields its writes from timeouts).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import resource
import secrets
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config, Sockets

from .. import errors
from ..api import api_key_id, create_app
from ..api.app import EndpointFactory
from ..api.limits import KeyRates
from ..api.uploads import Uploads
from ..backends import redact_url
from ..store import Store, open_store
from .expiry import start_sweep
from .hypercorn_glue import (
    access_logger_class,
    install_coalesced_responses,
    install_json_protocol_errors,
    worker_serve,
)

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
        return store.keys.has_live_admin()
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
    install_json_protocol_errors()
    install_coalesced_responses()
    store = open_store(db_path, create=True)
    try:
        if not keys and store.keys.has_live_admin():
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
        app = create_app(store, keys, uploads=uploads_for(max_connections), rates=rates,
                         mcp=mcp_endpoint())
        indexer = start_indexer(store)
        words = start_words(store)
        sweep = start_sweep(store, None)
        try:
            trio.run(_run, app, config, sockets, redact_url(store.path), say, max_connections)
        finally:
            if sweep is not None:
                sweep.stop()
            if words is not None:
                words.stop()
            if indexer is not None:
                indexer.stop()
    finally:
        store.close()


def mcp_endpoint() -> EndpointFactory | None:
    """What serves ``/mcp`` (:func:`memfs.mcp.http.endpoint`: the MCP server over Streamable
    HTTP), or None without the ``mcp`` extra (``memfs[mcp]``, the official SDK): then ``/mcp``
    is a path like any other the server does not serve."""
    try:
        from ..mcp.http import endpoint
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] != "mcp":
            raise
        log.info("no /mcp: the mcp extra is not installed (%s)", e)
        return None
    return endpoint


def start_indexer(store: Store) -> BackgroundIndexer | None:
    """Start a :class:`memfs.recall.indexer.BackgroundIndexer` over every store of the
    database (archived ones too: they are searched too), with the store's provider of
    embeddings; None when meaning is off (``--embeddings none``). The indexer's thread
    survives any failure of the provider or the database (it tries again at its next poll).

    :raises errors.InvalidRequest: ``MEMFS_EMBEDDINGS`` names no provider.
    """
    from ..recall.indexer import BackgroundIndexer

    provider = store.search.embeddings
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

    return BackgroundCatchUp(store.search.catch_up_words).start()


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
                indexer = words = sweep = None
                try:
                    app = create_app(store, keys, uploads=uploads_for(max_connections),
                                     rates=rates, mcp=mcp_endpoint())
                    # One indexer for all the workers (the first's): one model in memory.
                    indexer = start_indexer(store) if i == 0 else None
                    words = start_words(store) if i == 0 else None
                    sweep = start_sweep(store, None) if i == 0 else None
                    trio.run(_run, app, config, sockets, store.path,
                             say if i == 0 else (lambda line: None), max_connections)
                finally:
                    if sweep is not None:
                        sweep.stop()
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
            await worker_serve(
                app,
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


async def _wait_for_signal(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: shutting down", signal.Signals(signum).name)
            shutdown.set()
            return

