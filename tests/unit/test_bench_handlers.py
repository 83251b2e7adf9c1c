"""scripts/bench_handlers.py without a mount (issue 45): the figures a phase's timers give, the
medians of rounds, the table, and the daemon's timers telling a request's store calls and
statements from the others."""

from __future__ import annotations

import functools
import sqlite3
import threading
from typing import Any

import pytest
import trio

from tests.support.repo import load_script

bh = load_script("bench_handlers")

#: What the daemon wrote at the end of a phase of 10 creates (the timers' format).
SNAPSHOT: dict[str, Any] = {
    "serial": 7,
    "seconds": 0.32,
    "overhead_us": {"handler": 1.0, "store": 2.0, "method": 0.5, "sql": 1.5},
    "timers": [
        ["handler", "create", 10, 0.000600],
        ["handler", "write", 10, 0.000200],
        ["handler", "flush", 10, 0.004000],
        ["handler", "getattr", 5, 0.000050],
        ["store", "Buffers._write_all.write", 10, 0.003000],
        ["memories", "Memories.write_path", 10, 0.002900],
        ["sql", "BEGIN IMMEDIATE", 10, 0.000100],
        ["sql", "INSERT INTO versions (id) VALUES (?)", 10, 0.000300],
        ["sql", "COMMIT", 10, 0.000500],
        ["store background", "Core.check_file", 2, 0.000010],
        ["sql elsewhere", "memfs-checkpoint · PRAGMA wal_checkpoint(PASSIVE)", 1, 0.002000],
    ],
}


def test_a_phase_is_split_layer_by_layer_per_operation() -> None:
    f = bh.figures(SNAPSHOT, wall_seconds=0.010, n=10)
    assert f["wall_us"] == pytest.approx(1000.0)
    assert f["handlers"]["us"] == pytest.approx(60 + 20 + 400 + 5)
    assert f["handlers"]["calls"] == pytest.approx(3.5)
    assert f["handlers"]["each"]["getattr"] == pytest.approx({"us": 5.0, "calls": 0.5})
    assert f["store"]["us"] == pytest.approx(300.0)
    assert f["memories"]["each"]["Memories.write_path"]["us"] == pytest.approx(290.0)
    assert f["sql"]["us"] == pytest.approx(10 + 30 + 50)
    assert f["sql"]["calls"] == pytest.approx(3.0)
    assert f["sql"]["each"]["COMMIT"] == pytest.approx({"us": 50.0, "calls": 1.0})
    # What runs outside the handlers' store calls is apart, never in the layers above.
    assert f["elsewhere"]["sql elsewhere"] == {
        "memfs-checkpoint · PRAGMA wal_checkpoint(PASSIVE)": pytest.approx(
            {"us": 200.0, "calls": 0.1})}
    assert f["elsewhere"]["store background"]["Core.check_file"]["calls"] == pytest.approx(0.2)
    # Each residue is a layer less the one inside it, less the timers nested in it.
    res = f["residue_us"]
    assert res["outside the handlers"] == pytest.approx(1000 - 485 - 3.5 * 1.0)
    assert res["handlers outside the store"] == pytest.approx(485 - 300 - 1 * 2.0)
    assert res["store outside SQL"] == pytest.approx(300 - 90 - 3 * 1.5 - 1 * 0.5)
    assert f["timers_overhead_us"] == pytest.approx(3.5 * 1.0 + 2.0 + 0.5 + (3 + 0.1) * 1.5)


def test_the_rounds_give_medians_a_key_missing_from_a_round_counting_zero() -> None:
    rounds = [{"wall_us": 3.0, "each": {"a": 1.0, "b": 5.0}},
              {"wall_us": 1.0, "each": {"a": 3.0}},
              {"wall_us": 2.0, "each": {"a": 2.0, "b": 4.0}}]
    assert bh.median_of(rounds) == {"wall_us": 2.0, "each": {"a": 2.0, "b": 4.0}}


def test_the_medians_take_a_statement_only_some_rounds_ran() -> None:
    """A checkpoint runs in some rounds only: its {us, calls} is missing from the others."""
    rounds = [{"each": {"COMMIT": {"us": 50.0, "calls": 1.0}}},
              {"each": {"COMMIT": {"us": 40.0, "calls": 1.0},
                        "PRAGMA wal_checkpoint(PASSIVE)": {"us": 9.0, "calls": 0.5}}},
              {"each": {"COMMIT": {"us": 60.0, "calls": 1.0}}}]
    assert bh.median_of(rounds) == {"each": {
        "COMMIT": {"us": 50.0, "calls": 1.0},
        "PRAGMA wal_checkpoint(PASSIVE)": {"us": 0.0, "calls": 0.0}}}


def test_the_table_has_every_layer_handler_and_statement() -> None:
    text = bh.table("create", bh.figures(SNAPSHOT, wall_seconds=0.010, n=10))
    lines = text.splitlines()
    assert lines[0].startswith("| where | µs / op | calls / op |")
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines[2:])
    assert "| **create: wall time, client** | 1000.0 | 1 | 100 % |" in lines
    assert "| · flush | 400.0 | 1.00 |  |" in lines
    assert "| · COMMIT | 50.0 | 1.00 |  |" in lines
    assert "| · of which Memories.write_path | 290.0 | 1.00 |  |" in lines
    assert any("store outside SQL (Python) | 205.0 |" in line for line in lines)
    # The checkpointer's statements are listed, after the request's.
    checkpoint = next(i for i, line in enumerate(lines) if "wal_checkpoint" in line)
    assert checkpoint > lines.index("| · COMMIT | 50.0 | 1.00 |  |")


class Memories:
    """A store part of one method, as memfs.store.memories.Memories is."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def write_path(self, sql: str) -> sqlite3.Cursor:
        return self.conn.execute(sql)


def test_the_daemon_timers_tell_a_requests_statements_from_the_others() -> None:
    """A handler's store call, inline or in a worker thread, and its statements count as the
    request's; a store call from another task, and a statement on another thread, apart."""
    timers = bh.Timers()
    conn = sqlite3.connect(":memory:", factory=bh.TimedConnection, check_same_thread=False)
    conn.timers = timers

    async def store_call(mount: object, deadline: object, fn: Any, *args: Any) -> Any:
        return fn(*args)  # as Mount._store_call does at once (nowait)

    async def in_thread(mount: object, deadline: object, fn: Any, *args: Any) -> Any:
        return await trio.to_thread.run_sync(fn, *args)  # as it does when a lock is held

    inline = bh.wrap_store_call(store_call, timers)
    threaded = bh.wrap_store_call(in_thread, timers)
    memories = Memories(conn)
    memories.write_path = bh.wrap_method(  # type: ignore[method-assign]
        memories.write_path, timers, "Memories.write_path")
    write = functools.partial(memories.write_path)

    async def flush() -> None:
        await inline(None, None, write, "SELECT 1")
        await threaded(None, None, write, "SELECT 2")
        conn.execute("SELECT 3")  # in the handler, outside its store calls

    handler = bh.wrap_handler(flush, timers, "flush")

    async def run() -> None:
        await handler()
        await inline(None, None, conn.execute, "SELECT 4")  # a background task's

    trio.run(run)
    other = threading.Thread(target=conn.execute, args=("SELECT 5",), name="memfs-checkpoint")
    other.start()
    other.join()
    conn.close()
    got = {(kind, key): calls for kind, key, calls, _ in timers.take()["timers"]}
    assert got == {
        ("handler", "flush"): 1,
        ("store", "Memories.write_path"): 2,  # its partials unwrapped, <locals> left out
        ("memories", "Memories.write_path"): 2,
        ("sql", "SELECT 1"): 1,
        ("sql", "SELECT 2"): 1,
        ("sql elsewhere", "trio thread, in a handler · SELECT 3"): 1,
        ("store background", "TimedConnection.execute"): 1,
        ("sql elsewhere", "store call outside a handler · SELECT 4"): 1,
        ("sql elsewhere", "memfs-checkpoint · SELECT 5"): 1,
    }
    assert timers.take()["timers"] == []  # taken: they start again


def test_a_statement_is_labelled_by_its_text_on_one_line_and_cut() -> None:
    assert bh.sql_label("SELECT a,\n       b\n  FROM t") == "SELECT a, b FROM t"
    assert bh.sql_label("INSERT INTO t VALUES (?)", many=True) == (
        "executemany INSERT INTO t VALUES (?)")
    long = bh.sql_label("SELECT " + ", ".join(f"column{i}" for i in range(40)) + " FROM t")
    assert len(long) == bh.LABEL_CHARS and long.endswith("…")
