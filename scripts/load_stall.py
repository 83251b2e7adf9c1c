#!/usr/bin/env python3
"""Measure what hostile-but-idle clients cost a real ``memfs serve`` (issue 8, finding 14).

    .venv/bin/python scripts/load_stall.py [--stalled 1100] [--nofile 1024] [--streams 100]

Starts ``memfs serve`` on 127.0.0.1 (port 0, a temporary database), then:

1. stall: opens ``--stalled`` connections that each send an authenticated POST's headers with
   a ``content-length`` and then nothing, times a normal ``GET /v1/memory_stores`` made while
   they are open, and reports how long the stalled connections stay open and how many lines
   the server logged. The server runs with RLIMIT_NOFILE ``--nofile`` (soft and hard), as in
   the report.
2. streams: opens ``--streams`` idle ``sessions.events.stream`` connections (one session each)
   and reports the server's CPU time (utime + stime from /proc) over ``--seconds``.

Everything is bounded in time and stops by itself; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

KEY = "load-stall-key"


def start(tmp: Path, nofile: int | None) -> tuple[subprocess.Popen[bytes], str, Path]:
    def limit() -> None:
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    err = tmp / "serve.err"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "--db", str(tmp / "m.db"), "serve", "--port", "0",
         "--api-key", KEY],
        stdout=subprocess.DEVNULL, stderr=err.open("wb"), preexec_fn=limit,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"serving (http://\S+)", err.read_text())
        if m:
            return proc, m.group(1), err
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"memfs serve did not start: {err.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_stalled(addr: tuple[str, int], n: int, connect_wait: float) -> list[socket.socket]:
    """``n`` connections, each sending a POST's headers as soon as it is established; a
    connection the server has not let in after ``connect_wait`` seconds stays half-open."""
    request = (f"POST /v1/memory_stores HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\n"
               "content-type: application/json\r\ncontent-length: 1000\r\n\r\n").encode()
    socks, pending = [], {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(addr)
        socks.append(s)
        pending[s.fileno()] = s
    deadline = time.monotonic() + connect_wait
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLOUT)
    while pending and time.monotonic() < deadline:
        for fd, _ in poller.poll(100):
            s = pending.pop(fd)
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                with contextlib.suppress(OSError):
                    s.send(request)
    return socks


def count_open(socks: list[socket.socket]) -> int:
    """Connections the server has not closed yet (no EOF, no reset)."""
    n = 0
    for s in socks:
        try:
            data = s.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            n += 1  # nothing yet: still held open
            continue
        except OSError:
            continue
        if data and not data.startswith(b"HTTP/"):
            n += 1
    return n


def stall(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, err = start(Path(tmp), args.nofile)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        try:
            t0 = time.monotonic()
            socks = open_stalled((host, int(port)), args.stalled, 3.0)
            print(f"stall: {len(socks)} connections opened in {time.monotonic() - t0:.1f} s "
                  f"(server RLIMIT_NOFILE {args.nofile or 'inherited'})")
            t = time.monotonic()
            try:
                r = httpx.get(url + "/v1/memory_stores", headers={"x-api-key": KEY},
                              timeout=args.timeout)
                print(f"stall: normal GET answered {r.status_code} after "
                      f"{time.monotonic() - t:.1f} s")
            except httpx.HTTPError as e:
                print(f"stall: normal GET failed after {time.monotonic() - t:.1f} s: {e!r}")
            for wait in (5, 15, 30, 60, 150):
                now = time.monotonic() - t0
                if now < wait:
                    time.sleep(wait - now)
                still = count_open(socks)
                print(f"stall: {still} stalled connections still open after "
                      f"{time.monotonic() - t0:.0f} s")
                if still == 0:
                    break
            for s in socks:
                s.close()
        finally:
            stop(proc)
        log = err.read_text()
        print(f"stall: server log {log.count(chr(10))} lines, {log.count('Traceback')} "
              f"tracebacks, {log.count('EMFILE')} mention EMFILE")
        kinds: dict[str, int] = {}
        for line in log.splitlines():
            m = re.search(r"(ERROR|WARNING):? (.{0,60})", line)
            if m:
                kind = re.sub(r"\d+", "N", m.group(0))
                kinds[kind] = kinds.get(kind, 0) + 1
        for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            print(f"stall:   {n} x {kind}")


def streams(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, _ = start(Path(tmp), None)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        socks = []
        try:
            h = {"x-api-key": KEY}
            ids = [httpx.post(url + "/v1/sessions", json={}, headers=h).json()["id"]
                   for _ in range(args.streams)]
            for sid in ids:
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(f"GET /v1/sessions/{sid}/events/stream HTTP/1.1\r\nhost: x\r\n"
                          f"x-api-key: {KEY}\r\naccept: text/event-stream\r\n\r\n".encode())
                assert s.recv(65536).startswith(b"HTTP/1.1 200"), "stream refused"
                socks.append(s)
            time.sleep(1)
            before = cpu_seconds(proc.pid)
            time.sleep(args.seconds)
            used = cpu_seconds(proc.pid) - before
            print(f"streams: {len(socks)} idle event streams cost {used:.2f} s CPU in "
                  f"{args.seconds:g} s ({100 * used / args.seconds:.1f} % of a core)")
        finally:
            for s in socks:
                s.close()
            stop(proc)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stalled", type=int, default=1100)
    p.add_argument("--nofile", type=int, default=1024, help="0: inherit the limit")
    p.add_argument("--timeout", type=float, default=60.0, help="of the normal GET")
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--only", choices=("stall", "streams"))
    args = p.parse_args()
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < args.stalled + 200:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.stalled + 200), hard))
    if args.only != "streams":
        stall(args)
    if args.only != "stall":
        streams(args)


if __name__ == "__main__":
    main()
