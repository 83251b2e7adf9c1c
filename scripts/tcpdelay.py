#!/usr/bin/env python3
"""A TCP proxy on loopback that adds a fixed one-way delay to each direction (issue 44).

    .venv/bin/python scripts/tcpdelay.py --target 127.0.0.1:5432 --one-way-ms 1 [--port 0]

It stands in for the network hop between ``memfs serve`` replicas and their PostgreSQL:
every chunk read from one side is written to the other ``one_way`` seconds after it arrived
(a round trip through it takes twice that), in the order it arrived, with no bandwidth limit
(what is due at once leaves in one write). Each connection accepted is paired with a new
connection to the target; a half-close is passed on, delayed like the data before it.

Timed delivery, not a sleep per chunk: each direction keeps a queue of (due, bytes) and one
timer for its head, so a burst of chunks is delivered at each chunk's own arrival + delay
whatever the load. One thread runs every connection (an asyncio loop on ``select``, whose
timeout has microsecond resolution: ``epoll``'s is a millisecond, as much as the delay
itself). It reports how late deliveries were against their due time, so that a measurement
can tell the proxy's own lag from the database's.

Importable: ``DelayProxy(target_host, target_port, one_way_s)`` with :meth:`start`,
:meth:`stop`, :attr:`port` and :meth:`stats`. Run alone, it prints ``listening on
127.0.0.1:PORT`` once it accepts connections, and its statistics as JSON on stderr when it
ends (SIGTERM or SIGINT).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import selectors
import signal
import socket
import sys
import threading
import time
from typing import Any

#: Lateness samples kept for the statistics (the first ones; enough for a p99).
MAX_SAMPLES = 200_000
#: Bytes queued towards one side before the other side's reading is paused (memory bound
#: only: far above what the delay's worth of any real traffic here needs).
HIGH_WATER = 64 * 1024 * 1024


class _Direction:
    """One direction of one connection: chunks read from ``src``, each written to ``dst`` at
    its arrival + delay, in order."""

    def __init__(self, proxy: DelayProxy, pair: _Pair) -> None:
        self.proxy = proxy
        self.pair = pair
        self.queue: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.queued = 0
        self.src: asyncio.Transport | None = None
        self.dst: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.done = False  # the end of the stream was delivered

    def arrive(self, data: bytes | None) -> None:
        """``data`` (None: the end of the stream) arrived now."""
        if self.pair.closed:
            return
        loop = self.proxy.loop
        self.queue.append((loop.time() + self.proxy.one_way_s, data))
        if data is not None:
            self.queued += len(data)
            if self.queued > HIGH_WATER and self.src is not None:
                self.src.pause_reading()
        if self.timer is None and self.dst is not None:
            self.timer = loop.call_at(self.queue[0][0], self.flush)

    def flush(self) -> None:
        """Write whatever is due, then wait for the next chunk's due time."""
        self.timer = None
        if self.dst is None or self.done:
            return
        loop = self.proxy.loop
        now = loop.time()
        if self.queue:
            self.proxy.late(now - self.queue[0][0])
        out: list[bytes] = []
        end = False
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            if data is None:
                end = True
                break
            out.append(data)
        if out:
            payload = b"".join(out) if len(out) > 1 else out[0]
            self.queued -= len(payload)
            self.proxy.count(len(payload))
            self.dst.write(payload)
            if self.queued <= HIGH_WATER and self.src is not None:
                self.src.resume_reading()
        if end:
            self.done = True
            if self.dst.can_write_eof():
                self.dst.write_eof()
            self.pair.direction_done()
        elif self.queue:
            self.timer = loop.call_at(self.queue[0][0], self.flush)

    def connected(self) -> None:
        """Both ends exist: deliver what arrived meanwhile."""
        if self.queue and self.timer is None:
            self.timer = self.proxy.loop.call_at(self.queue[0][0], self.flush)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class _End(asyncio.Protocol):
    """One socket of a pair: what it reads goes into ``incoming``."""

    def __init__(self, incoming: _Direction, pair: _Pair) -> None:
        self.incoming = incoming
        self.pair = pair
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.incoming.arrive(data)

    def eof_received(self) -> bool:
        self.incoming.arrive(None)
        return True  # keep the socket open for the other direction (a half-close)

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # reset: nothing more can be delivered either way
            self.pair.close()
        elif not self.incoming.done:
            self.incoming.arrive(None)


class _Pair:
    """An accepted connection and its connection to the target."""

    def __init__(self, proxy: DelayProxy) -> None:
        self.proxy = proxy
        self.up = _Direction(proxy, self)  # client -> target
        self.down = _Direction(proxy, self)  # target -> client
        self.client = _End(self.up, self)
        self.server: _End | None = None
        self.finished = 0
        self.closed = False

    def client_protocol(self) -> _End:
        self.proxy.pairs.add(self)
        self.connecting = self.proxy.loop.create_task(self._connect())
        return self.client

    async def _connect(self) -> None:
        loop = self.proxy.loop
        try:
            _, proto = await loop.create_connection(
                lambda: _End(self.down, self), self.proxy.target_host, self.proxy.target_port)
        except OSError:
            self.close()
            return
        self.server = proto
        if self.closed:
            self.close()
            return
        assert self.client.transport is not None and proto.transport is not None
        self.up.src, self.up.dst = self.client.transport, proto.transport
        self.down.src, self.down.dst = proto.transport, self.client.transport
        self.up.connected()
        self.down.connected()

    def direction_done(self) -> None:
        self.finished += 1
        if self.finished == 2:
            self.close()

    def close(self) -> None:
        self.closed = True
        self.up.cancel()
        self.down.cancel()
        for end in (self.client, self.server):
            if end is not None and end.transport is not None:
                end.transport.close()
        self.proxy.pairs.discard(self)


class DelayProxy:
    """Listens on 127.0.0.1 (``port`` 0: any free port) and forwards each connection to
    ``target_host:target_port`` with ``one_way_s`` seconds of delay in each direction."""

    def __init__(self, target_host: str, target_port: int, one_way_s: float,
                 port: int = 0) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.one_way_s = one_way_s
        self.port = port
        self.loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
        self.pairs: set[_Pair] = set()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._lateness: list[float] = []
        self._deliveries = 0
        self._bytes = 0
        self._cpu = 0.0

    # -- statistics (read in the loop's thread, or after stop) --

    def late(self, seconds: float) -> None:
        self._deliveries += 1
        if len(self._lateness) < MAX_SAMPLES:
            self._lateness.append(max(0.0, seconds))

    def count(self, n: int) -> None:
        self._bytes += n

    def stats(self) -> dict[str, Any]:
        """Deliveries made, bytes forwarded, how late deliveries were (ms: p50, p99, max),
        and the CPU seconds of the proxy's thread."""
        lat = sorted(self._lateness)

        def pct(q: float) -> float:
            return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else 0.0

        cpu = self._cpu
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            box: list[float] = []
            self.loop.call_soon_threadsafe(lambda: (box.append(time.thread_time()), done.set()))
            done.wait(5)
            cpu = box[0] if box else cpu
        return {"one_way_ms": self.one_way_s * 1000, "deliveries": self._deliveries,
                "bytes": self._bytes, "late_p50_ms": pct(0.50), "late_p99_ms": pct(0.99),
                "late_max_ms": lat[-1] * 1000 if lat else 0.0, "cpu_s": cpu}

    # -- running --

    async def _listen(self) -> None:
        self._server = await self.loop.create_server(
            lambda: _Pair(self).client_protocol(), "127.0.0.1", self.port,
            family=socket.AF_INET, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self) -> DelayProxy:
        """Listen and run in a thread of this process (a daemon: it ends with the process)."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self._listen())
            except BaseException as e:  # noqa: BLE001 (handed to start's caller)
                failed.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self._cpu = time.thread_time()

        self._thread = threading.Thread(target=run, name="tcpdelay", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            raise failed[0]
        return self

    def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in list(self.pairs):
            pair.close()
        self.loop.call_soon(self.loop.stop)

    def stop(self) -> None:
        """Close the listener and every connection, and end the thread."""
        if self._thread is None:
            return
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._shutdown)
            self._thread.join(10)
        self._thread = None
        self.loop.close()

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tcpdelay", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, metavar="HOST:PORT")
    p.add_argument("--one-way-ms", type=float, required=True,
                   help="delay added to each direction (a round trip gains twice this)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    a = p.parse_args(argv)
    host, _, port = a.target.rpartition(":")
    if not host or not port.isdigit() or a.one_way_ms < 0:
        p.error("--target is HOST:PORT and --one-way-ms is at least 0")
    proxy = DelayProxy(host, int(port), a.one_way_ms / 1000, a.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    proxy.start()
    print(f"listening on 127.0.0.1:{proxy.port}", flush=True)
    while not stop.wait(3600):
        pass
    stats = proxy.stats()
    proxy.stop()
    print(json.dumps(stats), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
