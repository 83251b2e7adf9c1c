"""Composition root of ``memfs serve``: the ASGI app of :mod:`memfs.api` under hypercorn on trio.

Security: the API always requires a key. Keys come from ``--api-key`` (repeatable) and
``MEMFS_API_KEYS`` (comma-separated). With none configured the server refuses to listen
anywhere but loopback; on loopback it generates a key for this run and prints it once on
stderr, the way Jupyter prints its token, so ``memfs serve`` works at once without ever
serving an open API.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import trio
from hypercorn.config import Config, Sockets

# worker_serve is hypercorn.trio.serve minus the socket creation: it takes sockets we bound
# ourselves, so a taken port fails before trio starts, and port 0 can be reported.
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from . import errors
from .api import create_app
from .store import open_store

log = logging.getLogger(__name__)

#: Seconds open connections (SSE streams) get to finish when the server stops.
GRACEFUL_SECONDS = 2.0


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


def check_bind(host: str, keys: Sequence[str]) -> None:
    """:raises errors.InvalidRequest: a non-loopback ``host`` without any key."""
    if not keys and not is_loopback(host):
        raise errors.InvalidRequest(
            f"refusing to listen on {host} without API keys: pass --api-key or set "
            "MEMFS_API_KEYS"
        )


def generate_key() -> str:
    return "memfs-" + secrets.token_urlsafe(24)


def serve(
    db_path: str | os.PathLike[str] | None,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_keys: Sequence[str] = (),
    *,
    echo: Callable[[str], None] | None = None,
) -> None:
    """Serve the API on ``host:port`` until SIGINT or SIGTERM.

    ``port`` 0 picks a free port; the address actually bound is announced through ``echo``
    (default: stderr) as ``memfs: serving http://HOST:PORT``.

    :raises errors.InvalidRequest: no keys on a non-loopback address.
    :raises OSError: the address cannot be bound.
    """
    say = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    keys = list(api_keys)
    check_bind(host, keys)
    if not keys:
        keys = [generate_key()]
        say(f"memfs: no API key configured; this run accepts the generated key {keys[0]}")
        say("memfs: (choose your own with --api-key KEY or MEMFS_API_KEYS)")
    store = open_store(db_path, create=True)
    try:
        config = Config()
        config.bind = [f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"]
        config.graceful_timeout = GRACEFUL_SECONDS
        config.accesslog = logging.getLogger("memfs.access")
        config.errorlog = logging.getLogger("hypercorn.error")
        # Bind before trio starts, so that a taken port is a plain OSError for the caller.
        sockets = config.create_sockets()
        app = create_app(store, keys)
        trio.run(_run, app, config, sockets, store.path, say)
    finally:
        store.close()


async def _run(
    app: Any, config: Config, sockets: Sockets, db: str, say: Callable[[str], None]
) -> None:
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_for_signal, shutdown)

        async def serve_then_stop(task_status: trio.TaskStatus[list[str]]) -> None:
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
            await worker_serve(
                wrap_app(app, config.wsgi_max_body_size, "asgi"),
                config,
                sockets=sockets,
                shutdown_trigger=shutdown.wait,
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

