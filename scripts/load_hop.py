"""The network hop and the locks for ``scripts/load`` (issue 44): the delaying proxy in a process
of its own, a PostgreSQL URL through it, a write transaction held open on one store, and the
tables of ``--matrix`` and ``--held-txn`` (scripts/load.py's docstring tells what they
measure)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SCRIPTS = Path(__file__).resolve().parent


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _ahead() -> None:
    """Run the proxy ahead of the other processes where allowed (root): it stands for the
    network, which a busy CPU does not slow down; it uses a few % of a core."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)


class Proxy:
    """scripts/tcpdelay.py in a process of its own (its CPU is measured apart from the load
    processes', and no fork of this process inherits its sockets)."""

    def __init__(self, host: str, port: int, rtt_ms: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPTS / "tcpdelay.py"), "--target", f"{host}:{port}",
             "--one-way-ms", str(rtt_ms / 2)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ahead)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise SystemExit(f"scripts/tcpdelay.py did not start: {self.proc.stderr.read()}"
                             if self.proc.stderr else "scripts/tcpdelay.py did not start")
        self.port = int(line.rsplit(":", 1)[1])
        self.pid = self.proc.pid
        self.stats: dict[str, Any] = {}

    def stop(self) -> dict[str, Any]:
        """Its statistics (how late it delivered, its CPU seconds)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        with contextlib.suppress(ValueError, IndexError):
            self.stats = json.loads(err.strip().splitlines()[-1])
        return self.stats


def tcp_target(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    if not u.hostname or u.hostname.startswith("/") or "%2f" in u.netloc.lower():
        raise SystemExit("scripts/load: --db-rtt-ms needs a PostgreSQL reached over TCP "
                         "(host:port in the URL, or --postgresql)")
    return u.hostname, u.port or 5432


def via(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    u = urlsplit(url)
    user = u.netloc.rsplit("@", 1)[0] + "@" if "@" in u.netloc else ""
    return urlunsplit((u.scheme, f"{user}127.0.0.1:{port}", u.path, u.query, u.fragment))


def lock_key(scope: str) -> int:
    """The advisory lock key of a scope: memfs.backends.scopes's own where it exists, else
    its design (issue 44): blake2b-8 of the scope string as a signed 64-bit integer."""
    try:
        from memfs.backends.scopes import lock_key as own  # type: ignore[import-not-found]
    except ImportError:
        import hashlib

        digest = hashlib.blake2b(scope.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)
    return int(own(scope))


def hold_store(url: str, store: str, locks: str, begin: float, hold: float) -> dict[str, Any]:
    """Hold a write transaction on ``store`` from just before ``begin`` (a perf_counter time)
    for ``hold`` seconds: the locks a write to it takes (``locks`` "global": the exclusive
    global lock, as every write took before issue 44). Returns when it held them, relative to
    ``begin``."""
    import psycopg

    from memfs.backends.postgresql import WRITE_LOCK_KEY

    with psycopg.connect(url) as conn:
        time.sleep(max(0.0, begin - 0.2 - time.perf_counter()))
        with conn.transaction():
            asked = time.perf_counter()
            if locks == "global":
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
            else:
                conn.execute("SELECT pg_advisory_xact_lock_shared(%s), pg_advisory_xact_lock(%s)",
                             (WRITE_LOCK_KEY, lock_key(f"store:{store}")))
            held = time.perf_counter()
            time.sleep(max(0.0, held + hold - time.perf_counter()))
        released = time.perf_counter()
    return {"asked_s": asked - begin, "held_s": held - begin, "released_s": released - begin}


def matrix_tables(m: dict[str, Any], label: str) -> str:
    out = [label, "",
           "| locks | replicas | stores | creates/s | p50 ms | p99 ms | errors "
           "| server cores busy | proxy cores busy |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in m["cells"]:
        out.append(f"| {c['locks']} | {c['servers']} | {c['stores']} "
                   f"| {c['requests_per_s']:,.0f} | {c['p50_ms']:.1f} | {c['p99_ms']:.1f} "
                   f"| {c['errors']} | {_f(c['server_cpu_cores'])} "
                   f"| {_f(c['proxy_cpu_cores'])} |")
    if m["ratios"]:
        out += ["", "| replicas | stores | global creates/s | store creates/s | store/global "
                "| global p99 ms | store p99 ms |", "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in m["ratios"]:
            out.append(f"| {r['servers']} | {r['stores']} | {r['global_per_s']:,.0f} "
                       f"| {r['store_per_s']:,.0f} | {r['ratio']:.2f} "
                       f"| {r['global_p99_ms']:.1f} | {r['store_p99_ms']:.1f} |")
    return "\n".join(out)


def held_table(rows: list[dict[str, Any]], label: str) -> str:
    out = [label, "",
           "| locks | B creates/s without | B p99 ms without | B creates/s with A held "
           "| B p99 ms with A held | p99 with/without | within +10 % | A's locks held (s) |",
           "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        d = r["with"].get("during") or {}
        held = (f"{d['held_s']:+.2f} to {d['released_s']:+.2f}" if d else "-")
        out.append(f"| {r['locks']} | {r['without']['requests_per_s']:,.0f} "
                   f"| {r['without']['p99_ms']:.1f} | {r['with']['requests_per_s']:,.0f} "
                   f"| {r['with']['p99_ms']:.1f} | {r['p99_ratio']:.2f} "
                   f"| {'yes' if r['p99_ratio'] <= 1.10 else 'no'} | {held} |")
    out += ["", "A's locks held: from and to, in seconds from the start of B's measured window "
            "(of the round shown)."]
    for r in rows:
        if "p99s_ms" in r["without"]:
            out.append(f"{r['locks']}: each round's p99 (ms), without: "
                       + ", ".join(f"{v:.1f}" for v in r["without"]["p99s_ms"])
                       + "; with A held: "
                       + ", ".join(f"{v:.1f}" for v in r["with"]["p99s_ms"]))
    return "\n".join(out)
