"""The API of one local session, for its commands: what ``memfs run`` on a local database
serves its agent instead of handing it the database.

An agent is untrusted: it gets its mounts and nothing else. On a server (``memfs run --url``)
the server mints the agent a session token; on a local database the launcher does, and serves
the HTTP API of :mod:`memfs.api` itself, on a unix socket in its state directory that only the
agent's user (and root) may connect to, to holders of that token only (no server key opens
it). So ``memfs`` and the memory tool inside the session work as they do against a server,
limited to the session's attached stores with their access, every change attributed to the
session, and none of it outlives the session: the socket goes when the launcher ends, and the
token is revoked when the session is marked terminated.

The server runs on trio (hypercorn) in a thread of the launcher, which keeps its main thread
for the agent's process and the signals, and it starts only when a command first connects:
most sessions never use it, and its start (its imports, a few hundred ms of CPU) would be
theirs to pay. No console and no dream sweeper: the API only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MemfsError

if TYPE_CHECKING:
    import trio

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs

#: Seconds the server gets to start, and to stop (its streams cut after that).
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
#: Connections at once: the commands of one session.
MAX_CONNECTIONS = 128


class SessionAPI:
    """Serves ``store``'s API on the unix socket ``path`` (made mode 0600, owned by
    ``owner`` = ``(uid, gid)`` when the agent is another user) to the tokens of the session
    ``session_id`` only, from :meth:`listen` and :meth:`serve` to :meth:`stop`. ``url`` is
    what the agent's ``MEMFS_URL`` says: ``unix:PATH``."""

    def __init__(self, store: Any, path: Path, owner: tuple[int, int] | None = None, *,
                 session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.path = path
        self.owner = owner
        self.url = f"unix:{path}"
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        #: Wakes the thread waiting for a first connection (stop).
        self._wake_r, self._wake_w = os.pipe()

    def listen(self) -> None:
        """Make the socket and listen: from now on a command may connect (its connection
        waits in the socket's queue until :meth:`serve` has the server up).

        :raises MemfsError: the socket could not be made.
        """
        self._sock = self._listen()

    def serve(self) -> None:
        """Serve, in a thread, from the first connection on (the launcher calls it once the
        command runs: the server's start never delays the command, and costs nothing to a
        session that never connects)."""
        self._thread = threading.Thread(target=self._run, args=(self._sock,),
                                        name="memfs-session-api", daemon=True)
        self._thread.start()

    def wait_ready(self) -> None:
        """Wait until the server answers (tests: after a first connection).

        :raises MemfsError: the server did not start.
        """
        if not self._ready.wait(START_TIMEOUT):
            raise MemfsError(f"the session API did not start within {START_TIMEOUT:.0f} s")
        if self._error is not None:
            raise MemfsError(f"the session API did not start: {self._error}")

    def _listen(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Made 0600 from the start (no moment where another user could connect), then
            # given to the agent: connecting to a unix socket needs write permission on it.
            old = os.umask(0o177)
            try:
                sock.bind(str(self.path))
            finally:
                os.umask(old)
            if self.owner is not None:
                os.chown(self.path, *self.owner)
            sock.listen(MAX_CONNECTIONS)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            raise MemfsError(f"cannot make the session API socket {self.path}: "
                             f"{e.strerror or e}") from None
        return sock

    def _run(self, sock: socket.socket) -> None:
        try:
            ready, _, _ = select.select([sock.fileno(), self._wake_r], [], [])
            if self._stopping.is_set() or sock.fileno() not in ready:
                return  # stopped before anyone connected
            import trio

            trio.run(self._serve, sock)
        except BaseException as e:
            log.exception("the session API failed")
            if not self._ready.is_set():
                self._error = e
                self._ready.set()
        finally:
            sock.close()  # a command's connection is refused now, never left waiting

    async def _serve(self, sock: socket.socket) -> None:
        import trio
        from hypercorn.config import Config, Sockets

        from ..api import create_app
        from ..daemons.hypercorn_glue import (
            install_coalesced_responses,
            install_json_protocol_errors,
            worker_serve,
        )

        install_json_protocol_errors()
        install_coalesced_responses()
        app: Any = create_app(self.store, [], console=False, dreams=False,
                              only_session=self.session_id)
        config = Config()
        config.graceful_timeout = 0.5
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        sockets = Sockets(secure_sockets=[], insecure_sockets=[sock], quic_sockets=[])
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        if self._stopping.is_set():  # stopped while starting: the command is over already
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(
                worker_serve, app, config, sockets, self._stop.wait, MAX_CONNECTIONS))
            self._ready.set()
            log.info("session API on %s", self.path)

    def stop(self) -> None:
        """Stop serving (open streams are cut) and remove the socket. Idempotent."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is None and self._sock is not None:
            self._sock.close()  # never served
        if thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
            token, stop = self._token, self._stop
            if token is not None and stop is not None:
                import trio

                with contextlib.suppress(trio.RunFinishedError):
                    token.run_sync_soon(stop.set)
            thread.join(STOP_TIMEOUT)
            if thread.is_alive():
                log.warning("the session API did not stop within %.0f s", STOP_TIMEOUT)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
