#!/usr/bin/env python3
"""Where a mutation's wall time goes inside the memfs daemon: handlers, store calls, SQL.

Run it through ``scripts/bench_handlers`` (needs root: it mounts FUSE). It makes a fresh
database in a temporary directory (``memfs stores create bench``, ``MEMFS_EMBEDDINGS=none``:
no recall indexer; never a server named by ``MEMFS_URL``), and runs ``memfs mount`` in a child
Python that first wraps timers around the daemon's layers (the same code, monkeypatched:
nothing in ``memfs/`` knows of it):

* every FUSE handler of :class:`memfs.fuse.ops.Operations` (``create``, ``write``, ``flush``,
  ``release``, ``getattr``, ``getxattr``, ...), by name;
* the store calls the handlers make (``Mount._store_call``: the call itself, on the trio thread
  or in a worker thread), and within them each public :class:`memfs.store.memories.Memories`
  method (``write_path``, ``rename_path``, ``delete_path``, ...; the outermost call only);
* every SQL statement (``execute``/``executemany`` of the daemon's ``sqlite3`` connections),
  by its text: those a handler's store call runs are on the request's path (``BEGIN
  IMMEDIATE`` and ``COMMIT`` are rows of their own); those run elsewhere (the
  ``memfs-checkpoint`` thread's checkpoints, a background task's store call such as the
  watcher's ``check_file``) are reported apart, by where they ran: no request waits for them,
  but they share the CPUs, and a background task the trio thread, with the requests.

The client (this script) then runs four phases, each timed on its own: **create**
(open+write+close of N files of 2,000 bytes in 10 directories), **overwrite** (the same with
``O_TRUNC``), **rename** (each file once, in its directory), **unlink**. At each phase's start
the daemon's timers are reset, and at its end (after 0.3 s for work the phase left behind,
such as the last ``release``) read: SIGUSR1 makes a thread of the daemon, which alone
receives it, write every timer to a JSON file and start them again. Per operation (a phase's
figures ÷ N), it reports in µs: the client's wall time; the handlers' time, each handler's and
how many of each an operation causes; the store calls' and their ``Memories`` methods'; the
SQL statements'; and what is left between the layers: handler time outside the store calls,
store time outside SQL (Python in the store), and wall time outside the handlers (pyfuse3's
loop, the kernel, the client). ``--repeat R`` gives medians of R rounds, each in a fresh
directory of the same mount. ``--json FILE`` writes every figure of every round.

Limits:

* The timers cost time themselves. At its start the daemon measures what each kind adds to
  the time of the layer around it (an empty wrapped call less an empty plain call: a handler's
  or store call's async wrapper, a ``Memories`` method's, an SQL statement's); the report
  states the total per operation, and the residues have the nested timers' share subtracted
  (an estimate: a timer's cost varies with the caches, and the machine). ``--no-timers`` runs
  the daemon without them and reports the wall times alone: the difference is what the timers
  cost in all (on a 2-core VM, about 1 µs a timer, 12-16 µs an operation by the estimate;
  0-10 % of the wall time by the difference, within the noise of a shared machine).
* A handler's time is from its start to its return on the trio thread, so it includes the
  time it waits (for a worker thread, for the mutex): handlers that overlap count twice. The
  client does one operation at a time, so they seldom do.
* An SQL statement's time is its ``execute``: the first row of a ``SELECT`` is stepped there,
  the others in ``fetchall`` (a few µs for the rows a write reads), counted as Python.
* Wall time is noisy on a shared machine: compare runs made at the same time, and read the
  split more than the totals.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import inspect
import json
import logging
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts/bench.py: the memfs target and its guaranteed teardown)
import bench_cost  # noqa: E402  (scripts/bench_cost.py: memfs without its recall indexer)

log = logging.getLogger("bench_handlers")

PHASES = ("create", "overwrite", "rename", "unlink")
DIRS = 10
#: A store's limit: the most files a round can make.
MAX_FILES = 2000
DATA = b"x" * 1999 + b"\n"
AGAIN = b"y" * 1999 + b"\n"
#: The daemon writes its timers here at each SIGUSR1 (set by the client for the child).
SNAPSHOT_ENV = "BENCH_HANDLERS_SNAPSHOT"
#: "0" in the child's environment: no timers (``--no-timers``).
TIMERS_ENV = "BENCH_HANDLERS_TIMERS"
#: Seconds before a phase and after it, for the work the last one left behind.
SETTLE = 0.3
#: How long an SQL statement's label is (its text, whitespace collapsed).
LABEL_CHARS = 64
#: The table's rows for less than this (µs per operation) are summed in one.
SHOWN_US = 0.5

# -- in the daemon: the timers ------------------------------------------------------------------


class Timers:
    """The daemon's accounts: (kind, key) -> [calls, seconds], under one lock (the handlers'
    thread, the worker threads and the checkpointer's add to them; SIGUSR1's thread takes
    them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acc: dict[tuple[str, str], list[float]] = {}
        self.since = time.perf_counter()
        self.serial = 0
        #: The thread the handlers run on (trio's), once one has run.
        self.trio_ident: int | None = None
        self.overhead_us: dict[str, float] = {}

    def add(self, kind: str, key: str, seconds: float) -> None:
        with self.lock:
            a = self.acc.get((kind, key))
            if a is None:
                self.acc[(kind, key)] = [1, seconds]
            else:
                a[0] += 1
                a[1] += seconds

    def take(self) -> dict[str, Any]:
        """Every timer since the last take, and start again."""
        with self.lock:
            acc, self.acc = self.acc, {}
            now, since, self.since = time.perf_counter(), self.since, time.perf_counter()
            self.serial += 1
            serial = self.serial
        return {"serial": serial, "seconds": now - since, "overhead_us": self.overhead_us,
                "timers": [[k, key, int(n), s] for (k, key), (n, s) in sorted(acc.items())]}


#: Set while a FUSE handler runs (trio copies it into the tasks and threads it starts).
_IN_HANDLER: contextvars.ContextVar[bool] = contextvars.ContextVar("in_handler", default=False)
#: Per thread: "request" inside a handler's store call, "background" inside another store
#: call, absent outside any; and how deep in Memories methods.
_local = threading.local()


def wrap_handler(fn: Callable[..., Coroutine[Any, Any, Any]], timers: Timers,
                 name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """A FUSE handler, timed as ("handler", name); one called by another as "nested"."""

    @functools.wraps(fn)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        if _IN_HANDLER.get():
            kind, token = "handler nested", None
        else:
            kind, token = "handler", _IN_HANDLER.set(True)
        timers.trio_ident = threading.get_ident()
        t = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            timers.add(kind, name, time.perf_counter() - t)
            if token is not None:
                _IN_HANDLER.reset(token)

    return timed


def call_label(fn: Callable[..., Any]) -> str:
    """What a store call is called: the function's qualified name, without its partials."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return name.replace(".<locals>", "")


def wrap_store_call(fn: Callable[..., Coroutine[Any, Any, Any]],
                    timers: Timers) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``Mount._store_call(self, deadline, fn, ...)``, timed as ("store", fn's name) when a
    handler makes it, ("store background", ...) when another task does; ``fn`` marks the
    thread it runs on, so that its statements are told apart."""

    @functools.wraps(fn)
    async def timed(mount: Any, deadline: Any, call: Callable[..., Any], *args: Any,
                    **kwargs: Any) -> Any:
        where = "request" if _IN_HANDLER.get() else "background"

        def marked(*a: Any, **k: Any) -> Any:
            outer = getattr(_local, "store", None)
            _local.store = where
            try:
                return call(*a, **k)
            finally:
                _local.store = outer

        t = time.perf_counter()
        try:
            return await fn(mount, deadline, marked, *args, **kwargs)
        finally:
            timers.add("store" if where == "request" else "store background", call_label(call),
                       time.perf_counter() - t)

    return timed


def wrap_method(fn: Callable[..., Any], timers: Timers, name: str) -> Callable[..., Any]:
    """A Memories method, timed when it is the outermost one on its thread: ("memories",
    name) in a handler's store call, ("memories background", name) elsewhere."""

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t
            _local.depth = depth
            if depth == 0:
                where = getattr(_local, "store", None)
                timers.add("memories" if where == "request" else "memories background", name,
                           dt)

    return timed


_labels: dict[tuple[str, bool], str] = {}


def sql_label(sql: str, many: bool = False) -> str:
    """A statement's text on one line, cut at :data:`LABEL_CHARS` (kept: the store's
    statements are the same few strings); ``executemany`` says so first."""
    label = _labels.get((sql, many))
    if label is None:
        label = ("executemany " if many else "") + " ".join(sql.split())
        if len(label) > LABEL_CHARS:
            label = label[:LABEL_CHARS - 1] + "…"
        _labels[(sql, many)] = label
    return label


def thread_label(timers: Timers) -> str:
    """Where a statement outside any store call ran: on the trio thread, in a handler or in a
    background task, or on another thread (its name, without its number)."""
    if threading.get_ident() == timers.trio_ident:
        return "trio thread, in a handler" if _IN_HANDLER.get() else "trio thread, background"
    return threading.current_thread().name.rstrip("0123456789-_ ") or "thread"


def record_sql(timers: Timers, sql: str, seconds: float, many: bool = False) -> None:
    """A statement's time: ("sql", text) in a handler's store call; ("sql elsewhere",
    "where · text") otherwise, where is a background store call or the thread."""
    label = sql_label(sql, many)
    where = getattr(_local, "store", None)
    if where == "request":
        timers.add("sql", label, seconds)
    else:
        origin = "store call outside a handler" if where == "background" else thread_label(timers)
        timers.add("sql elsewhere", f"{origin} · {label}", seconds)


class TimedConnection(sqlite3.Connection):
    """A sqlite3 connection whose statements are timed into :attr:`timers`."""

    timers: Timers

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        t = time.perf_counter()
        try:
            return super().execute(sql, parameters)
        finally:
            record_sql(self.timers, sql, time.perf_counter() - t)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        t = time.perf_counter()
        try:
            return super().executemany(sql, parameters)
        finally:
            record_sql(self.timers, sql, time.perf_counter() - t, many=True)


def _per_call(fn: Callable[[], Any], n: int = 20000) -> float:
    """The least of 7 runs' seconds per call of fn."""
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def _drive(make: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Run a coroutine that never awaits anything to its end."""
    coro = make()
    with contextlib.suppress(StopIteration):
        coro.send(None)


def measure_overhead() -> dict[str, float]:
    """What each kind of timer adds to the layer around it, µs: an empty wrapped call less an
    empty plain one (the wrapped one records into a timers object of its own)."""
    scratch = Timers()

    def nop() -> None:
        pass

    async def anop() -> None:
        pass

    async def plain_store(mount: Any, deadline: Any, call: Callable[[], None]) -> None:
        call()

    handler = wrap_handler(anop, scratch, "nop")
    store = wrap_store_call(plain_store, scratch)
    method = wrap_method(nop, scratch, "nop")
    plain = sqlite3.connect(":memory:")
    timed = sqlite3.connect(":memory:", factory=TimedConnection)
    timed.timers = scratch
    async_plain = _per_call(lambda: _drive(anop))
    out = {
        "handler": _per_call(lambda: _drive(handler)) - async_plain,
        "store": (_per_call(lambda: _drive(lambda: store(None, None, nop)))
                  - _per_call(lambda: _drive(lambda: plain_store(None, None, nop)))),
        "method": _per_call(method) - _per_call(nop),
        "sql": (_per_call(lambda: timed.execute("SELECT 1"), 5000)
                - _per_call(lambda: plain.execute("SELECT 1"), 5000)),
    }
    plain.close()
    timed.close()
    return {k: max(0.0, v * 1e6) for k, v in out.items()}


def install(timers: Timers) -> None:
    """Wrap the timers around the daemon's layers (before the mount starts)."""
    import pyfuse3

    import memfs.fuse.core as core
    import memfs.fuse.ops as ops
    import memfs.store.memories as memories

    connect = sqlite3.connect

    def timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs["factory"] = TimedConnection
        conn: TimedConnection = connect(*args, **kwargs)
        conn.timers = timers
        return conn

    sqlite3.connect = timed_connect  # type: ignore[assignment]
    for name in dir(pyfuse3.Operations):
        fn = getattr(ops.Operations, name, None)
        if not name.startswith("_") and fn is not None and inspect.iscoroutinefunction(fn):
            setattr(ops.Operations, name, wrap_handler(fn, timers, name))
    core.Mount._store_call = wrap_store_call(core.Mount._store_call, timers)  # type: ignore[method-assign]
    for name, fn in list(vars(memories.Memories).items()):
        if not name.startswith("_") and inspect.isfunction(fn):
            setattr(memories.Memories, name, wrap_method(fn, timers, f"Memories.{name}"))


def serve_snapshots(timers: Timers, path: Path) -> None:
    """At each SIGUSR1 (blocked in every other thread), write the timers to ``path`` (whole:
    through a temporary file) and start them again."""
    while True:
        signal.sigwait({signal.SIGUSR1})
        snap = timers.take()
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(snap))
        os.replace(tmp, path)


def daemon(argv: list[str]) -> None:
    """``memfs <argv>`` with the timers (the child the client starts)."""
    timers = Timers()
    if os.environ.get(TIMERS_ENV) == "0":  # --no-timers: the snapshots alone, all empty
        timers.overhead_us = dict.fromkeys(("handler", "store", "method", "sql"), 0.0)
    else:
        timers.overhead_us = measure_overhead()
        install(timers)
    # Blocked before any other thread exists, so that every thread the daemon starts
    # inherits the mask, and SIGUSR1 (whose default would end the process) reaches only
    # the thread that waits for it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    threading.Thread(target=serve_snapshots, args=(timers, Path(os.environ[SNAPSHOT_ENV])),
                     name="bench-handlers-snapshots", daemon=True).start()
    from memfs.cli import main as memfs_main

    sys.argv = ["memfs", *argv]
    memfs_main()


# -- in the client: the figures ---------------------------------------------------------------


def _group(snap: dict[str, Any], kind: str, n: int) -> dict[str, dict[str, float]]:
    """The timers of one kind, per operation: key -> {"us": µs, "calls": calls}."""
    return {key: {"us": s / n * 1e6, "calls": calls / n}
            for k, key, calls, s in snap["timers"] if k == kind}


def _total(group: dict[str, dict[str, float]]) -> tuple[float, float]:
    return (sum(v["us"] for v in group.values()), sum(v["calls"] for v in group.values()))


def figures(snap: dict[str, Any], wall_seconds: float, n: int) -> dict[str, Any]:
    """One phase's figures per operation (µs, calls) from the daemon's timers over it, the
    client's wall time for it, and its number of operations.

    The residues have the share of the timers nested in each layer subtracted: a handler's
    time holds its store calls' timers, a store call's its Memories methods' and its
    statements', and the wall time the handlers' own.
    """
    o = snap["overhead_us"]
    wall = wall_seconds / n * 1e6
    handlers = _group(snap, "handler", n)
    store = _group(snap, "store", n)
    methods = _group(snap, "memories", n)
    sql = _group(snap, "sql", n)
    h_us, h_calls = _total(handlers)
    s_us, s_calls = _total(store)
    m_us, m_calls = _total(methods)
    q_us, q_calls = _total(sql)
    outside = {k: _group(snap, k, n) for k in
               ("handler nested", "store background", "memories background", "sql elsewhere")}
    other_sql_calls = _total(outside["sql elsewhere"])[1]
    overhead = (h_calls * o["handler"] + s_calls * o["store"] + m_calls * o["method"]
                + (q_calls + other_sql_calls) * o["sql"])
    return {
        "ops": n,
        "wall_us": wall,
        "handlers": {"us": h_us, "calls": h_calls, "each": handlers},
        "store": {"us": s_us, "calls": s_calls, "each": store},
        "memories": {"us": m_us, "calls": m_calls, "each": methods},
        "sql": {"us": q_us, "calls": q_calls, "each": sql},
        "elsewhere": outside,
        "residue_us": {
            "outside the handlers": wall - h_us - h_calls * o["handler"],
            "handlers outside the store": h_us - s_us - s_calls * o["store"],
            "store outside SQL": s_us - q_us - q_calls * o["sql"] - m_calls * o["method"],
        },
        "timers_overhead_us": overhead,
        "timer_us": dict(o),
    }


def median_of(rounds: list[Any]) -> Any:
    """The median of each number across rounds, in the rounds' shape (what a round lacks,
    such as a statement only some rounds ran, counts as 0 there)."""
    if any(isinstance(r, dict) for r in rounds):
        keys: dict[str, None] = {}
        for r in rounds:
            keys.update(dict.fromkeys(r or {}))
        return {k: median_of([(r or {}).get(k) for r in rounds]) for k in keys}
    return statistics.median(float(r or 0.0) for r in rounds)


def _calls(calls: float) -> str:
    """Calls per operation: 2 decimals, or 2 significant digits below 0.1 (a checkpoint)."""
    return f"{calls:.2f}" if calls >= 0.1 or calls == 0 else f"{calls:.2g}"


def _rows(each: dict[str, dict[str, float]], prefix: str = "· ") -> list[list[str]]:
    """A row per timer, the longest first; those under :data:`SHOWN_US` in one row."""
    shown = [[prefix + k, f"{v['us']:.1f}", _calls(v["calls"]), ""]
             for k, v in sorted(each.items(), key=lambda kv: -kv[1]["us"])
             if v["us"] >= SHOWN_US]
    if len(shown) < len(each):
        rest = [v for v in each.values() if v["us"] < SHOWN_US]
        shown.append([f"{prefix}{len(rest)} more, each under {SHOWN_US} µs (in --json)",
                      f"{sum(v['us'] for v in rest):.1f}",
                      _calls(sum(v["calls"] for v in rest)), ""])
    return shown


def table(phase: str, f: dict[str, Any]) -> str:
    """One phase's figures as a markdown table, layer by layer, µs per operation."""
    wall = f["wall_us"]
    res = f["residue_us"]

    def share(us: float) -> str:
        return f"{100 * us / wall:.0f} %" if wall else ""

    rows: list[list[str]] = [
        [f"**{phase}: wall time, client**", f"{wall:.1f}", "1", "100 %"],
        ["outside the handlers (pyfuse3's loop, background tasks, the kernel, the client)",
         f"{res['outside the handlers']:.1f}", "", share(res["outside the handlers"])],
        ["**FUSE handlers**", f"{f['handlers']['us']:.1f}", f"{f['handlers']['calls']:.2f}",
         share(f["handlers"]["us"])],
        *_rows(f["handlers"]["each"]),
        ["handlers outside the store calls", f"{res['handlers outside the store']:.1f}", "",
         share(res["handlers outside the store"])],
        ["**store calls**", f"{f['store']['us']:.1f}", f"{f['store']['calls']:.2f}",
         share(f["store"]["us"])],
        *_rows(f["store"]["each"]),
        *_rows(f["memories"]["each"], "· of which "),
        ["store outside SQL (Python)", f"{res['store outside SQL']:.1f}", "",
         share(res["store outside SQL"])],
        ["**SQL in the store calls**", f"{f['sql']['us']:.1f}", f"{f['sql']['calls']:.2f}",
         share(f["sql"]["us"])],
        *_rows(f["sql"]["each"]),
    ]
    away = {k: v for k, v in f["elsewhere"].items() if v}
    if away:
        rows.append(["*outside the handlers' store calls (background tasks, other threads)*",
                     "", "", ""])
        for kind, each in away.items():
            rows += _rows(each, f"· {kind}: ")
    rows.append(["timers' own cost (estimated; taken out of the residues)",
                 f"{f['timers_overhead_us']:.1f}", "", share(f["timers_overhead_us"])])
    lines = ["| where | µs / op | calls / op | of wall |", "|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# -- in the client: the mount and the phases ----------------------------------------------------


class TimedMemfs(bench_cost.QuietMemfs):
    """``memfs mount`` of a fresh store, run by this script's :func:`daemon` (the timers)."""

    @property
    def snapshot_path(self) -> Path:
        return self.dir / "timers.json"

    #: False: the daemon runs without its timers (the wall time they cost).
    timed = True

    def _env(self) -> dict[str, str]:
        env = super()._env()
        env[SNAPSHOT_ENV] = str(self.snapshot_path)
        env[TIMERS_ENV] = "1" if self.timed else "0"
        return env

    def _command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "--daemon", "mount", self.store,
                str(self.root)]

    def snapshot(self, timeout: float = 30.0) -> dict[str, Any]:
        """The daemon's timers since the last snapshot (they start again)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise bench.TargetError(f"the daemon is not running\n{self.log_tail()}")
        self.snapshot_path.unlink(missing_ok=True)
        proc.send_signal(signal.SIGUSR1)
        if not bench._wait_until(self.snapshot_path.exists, timeout):
            raise bench.TargetError(f"no timers from the daemon in {timeout:.0f} s\n"
                                    f"{self.log_tail()}")
        snap: dict[str, Any] = json.loads(self.snapshot_path.read_text())
        return snap


def workload(root: Path, n: int, round_: int) -> tuple[list[Path], dict[str, Callable[[], None]]]:
    """The round's directories, and each phase as a callable doing its N operations."""
    top = root / f"r{round_}"
    dirs = [top / f"d{k}" for k in range(DIRS)]
    names = [dirs[i % DIRS] / f"f{i:05d}.md" for i in range(n)]
    moved = [p.with_name("g" + p.name[1:]) for p in names]

    def write_all(data: bytes) -> None:
        for p in names:
            with open(p, "wb") as f:
                f.write(data)

    def rename() -> None:
        for p, q in zip(names, moved, strict=True):
            os.rename(p, q)

    def unlink() -> None:
        for q in moved:
            os.unlink(q)

    return [top, *dirs], {"create": lambda: write_all(DATA),
                          "overwrite": lambda: write_all(AGAIN),
                          "rename": rename, "unlink": unlink}


def measure(target: TimedMemfs, n: int, rounds: int, settle: float = SETTLE
            ) -> list[dict[str, dict[str, Any]]]:
    """Each round's figures, phase by phase."""
    out = []
    for r in range(rounds):
        dirs, phases = workload(target.root, n, r)
        for d in dirs:
            d.mkdir()
        this: dict[str, dict[str, Any]] = {}
        for phase, fn in phases.items():
            time.sleep(settle)
            target.snapshot()  # the timers start now
            t = time.perf_counter()
            fn()
            wall = time.perf_counter() - t
            time.sleep(settle)  # the last release, and what the phase left behind
            this[phase] = figures(target.snapshot(), wall, n)
            log.debug("round %d %s: %.1f µs an operation", r + 1, phase, this[phase]["wall_us"])
        for d in reversed(dirs):
            d.rmdir()
        out.append(this)
    return out


@contextlib.contextmanager
def mounted(workdir: Path | None, timed: bool = True) -> Iterator[TimedMemfs]:
    """The timed memfs mount in a fresh directory, unmounted and removed whatever happens."""
    memfs_cmd = (str(Path(sys.executable).parent / "memfs")
                 if (Path(sys.executable).parent / "memfs").exists() else "memfs")
    with tempfile.TemporaryDirectory(prefix="memfs-handlers-", dir=workdir) as work:
        opts = bench.Options(workdir=Path(work), drop_caches=False, mount_timeout=30,
                             stop_timeout=10, memfs_cmd=memfs_cmd)
        target = TimedMemfs(opts)
        target.timed = timed
        with target:
            yield target


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--daemon"]:
        daemon(argv[1:])
        return 0
    ap = argparse.ArgumentParser(prog="scripts/bench_handlers",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--files", type=int, default=MAX_FILES,
                    help=f"files per round (default and most: {MAX_FILES})")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; medians (default 1)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the temporary directory goes (default $TMPDIR)")
    ap.add_argument("--settle", type=float, default=SETTLE,
                    help=f"seconds before and after each phase (default {SETTLE})")
    ap.add_argument("--no-timers", action="store_true",
                    help="the daemon without its timers: the wall times alone (what the "
                         "timers cost them is the difference)")
    ap.add_argument("--json", type=Path, help="write every figure of every round here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(name)s: %(message)s")
    if os.geteuid() != 0:
        print("scripts/bench_handlers needs root (it mounts FUSE)", file=sys.stderr)
        return 2
    if args.repeat < 1 or not 1 <= args.files <= MAX_FILES:
        print(f"--repeat must be at least 1, and --files from 1 to {MAX_FILES} (a store "
              "holds that many memories)", file=sys.stderr)
        return 2
    # SIGTERM/SIGHUP unwind like Ctrl-C, so that the mount is unmounted and the daemon stopped.
    signal.signal(signal.SIGTERM, bench._interrupt)
    signal.signal(signal.SIGHUP, bench._interrupt)
    try:
        with mounted(args.workdir, not args.no_timers) as target:
            rounds = measure(target, args.files, args.repeat, args.settle)
    except bench.TargetError as e:
        print(f"scripts/bench_handlers: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scripts/bench_handlers: interrupted (unmounted)", file=sys.stderr)
        return 130
    phases = {p: median_of([r[p] for r in rounds]) for p in PHASES}
    if args.no_timers:
        print(f"wall time per operation without the timers, µs, median of {args.repeat} "
              f"round(s) of {args.files} files of 2,000 bytes: " + ", ".join(
                  f"{p} {phases[p]['wall_us']:.1f}" for p in PHASES))
    else:
        print(f"µs per operation inside the memfs daemon, median of {args.repeat} round(s) "
              f"of {args.files} files of 2,000 bytes\n")
        for p in PHASES:
            print(table(p, phases[p]) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps({"files": args.files, "repeat": args.repeat,
                                         "phases": phases, "rounds": rounds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
