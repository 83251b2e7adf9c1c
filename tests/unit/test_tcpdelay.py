"""scripts/tcpdelay.py (issue 44): the loopback proxy ``scripts/load --db-rtt-ms`` puts between
the replicas and PostgreSQL. Bytes pass intact and in order both ways, a round trip takes at
least twice the one-way delay, a half-close is passed on, and the delay of chunks sent one
after another does not add up (each is due at its own arrival + delay)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.repo import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tcpdelay.py"


tcpdelay = load_script("tcpdelay")


@pytest.fixture
def echo() -> Iterator[int]:
    """An echo server on loopback: it sends back what it reads, and half-closes after the
    client's half-close. Yields its port."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)  # a close does not wake an accept() in another thread: a poll
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(5)
    srv.close()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _read_all(s: socket.socket, into: bytearray) -> None:
    while data := s.recv(1 << 20):
        into += data


def test_bytes_arrive_intact_and_in_order_both_ways_and_the_half_close_passes(
        echo: int) -> None:
    sent = os.urandom(3_000_000)
    got = bytearray()
    with tcpdelay.DelayProxy("127.0.0.1", echo, 0.002) as proxy, _connect(proxy.port) as s:
        reader = threading.Thread(target=_read_all, args=(s, got))
        reader.start()
        # Chunks of many sizes, some sent back to back, some after a pause.
        i = 0
        for n, size in enumerate([1, 7, 1000, 65536, 200_000] * 40):
            s.sendall(sent[i:i + size])
            i += size
            if n % 17 == 0:
                time.sleep(0.003)
        s.sendall(sent[i:])
        s.shutdown(socket.SHUT_WR)
        reader.join(60)
        assert not reader.is_alive(), "the echo's half-close never came back through the proxy"
        stats = proxy.stats()
    assert bytes(got) == sent
    assert stats["bytes"] == 2 * len(sent)


def test_a_round_trip_takes_at_least_twice_the_one_way_delay(echo: int) -> None:
    one_way = 0.05
    with tcpdelay.DelayProxy("127.0.0.1", echo, one_way) as proxy, _connect(proxy.port) as s:
        for _ in range(5):
            t0 = time.monotonic()
            s.sendall(b"ping")
            assert s.recv(16) == b"ping"
            assert time.monotonic() - t0 >= 2 * one_way


def test_each_chunk_is_due_at_its_own_arrival_plus_the_delay(echo: int) -> None:
    """20 chunks, 20 ms apart, through 0.2 s each way: delivered on their own schedule, the
    last is back about 0.4 s after it was sent (0.8 s in all); a proxy that slept the delay
    per chunk would take 20 x 0.4 = 8 s. The bound, 4 s, leaves a busy machine room."""
    one_way = 0.2
    with tcpdelay.DelayProxy("127.0.0.1", echo, one_way) as proxy, _connect(proxy.port) as s:
        got = bytearray()
        reader = threading.Thread(target=_read_all, args=(s, got))
        reader.start()
        t0 = time.monotonic()
        for i in range(20):
            s.sendall(bytes([i]) * 100)
            time.sleep(0.02)
        s.shutdown(socket.SHUT_WR)
        reader.join(30)
        elapsed = time.monotonic() - t0
    assert bytes(got) == b"".join(bytes([i]) * 100 for i in range(20))
    assert 2 * one_way <= elapsed < 4.0


def test_it_runs_alone_and_reports_its_statistics_when_stopped(echo: int) -> None:
    import json
    import signal
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--target", f"127.0.0.1:{echo}", "--one-way-ms", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:")
        with _connect(int(line.rsplit(":", 1)[1])) as s:
            s.sendall(b"hello")
            assert s.recv(16) == b"hello"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    stats = json.loads(err.strip().splitlines()[-1])
    assert stats["bytes"] == 10 and stats["one_way_ms"] == 1.0
