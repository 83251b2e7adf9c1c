"""Pages per write (issue 45): the WAL frames a mount's create, overwrite, rename and unlink
append, counted by scripts/bench_frames.py (each frame is a page the commit wrote and the
checkpoint copies again). Counts, not timings: a change that makes a write touch another
b-tree, or a wider index, fails here with the frames of every b-tree.

The budgets are today's counts, rounded up: lower them when a change makes a write cheaper.
"""

from __future__ import annotations

import json
import math

from tests.support.repo import load_script

frames = load_script("bench_frames")

#: phase -> WAL frames (1 KiB pages) per operation, at most, in a store of 300 memories.
BUDGETS = {"create": 34, "overwrite": 26, "rename": 27, "unlink": 31}


def test_each_write_appends_no_more_pages_than_its_budget(tmp_path):
    result = frames.measure(memories=300, files=100, workdir=str(tmp_path))
    over = {op: row["total"] for op, row in result.items() if row["total"] > BUDGETS[op]}
    assert not over, f"frames per operation over budget {over}:\n{frames.table(result)}"
    # The count is real: every write appends its version, its memory, its change and the
    # event pair, so none of these b-trees can be missing from a phase.
    for op, row in result.items():
        for tree in ("versions", "events", "changes"):
            assert row.get(tree, 0) >= 1, (op, tree, row)
        assert math.isclose(sum(v for k, v in row.items() if k != "total"), row["total"])


def test_a_frame_is_read_from_the_wal_as_sqlite_wrote_it(tmp_path):
    """wal_pages reads the page numbers SQLite wrote: one frame per page a commit changed."""
    import sqlite3

    path = str(tmp_path / "t.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size = 1024")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("INSERT INTO t VALUES (1)")  # the table's one page
    assert frames.wal_pages(path + "-wal") == [2]
    conn.execute("INSERT INTO t VALUES (?)", ("y" * 3000,))  # its page, and overflow pages
    pages = frames.wal_pages(path + "-wal")
    assert pages[0] == 2 and len(pages) >= 4, pages
    conn.close()


def test_the_store_bench_times_each_phase(tmp_path, capsys):
    """scripts/bench_store.py (the same calls, timed): a row per phase, every figure there."""
    bench_store = load_script("bench_store")
    assert bench_store.main(["--files", "20", "--repeat", "1", "--workdir", str(tmp_path),
                             "--json", str(tmp_path / "out.json")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0][2:] for r in rows[1:]] == list(frames.PHASES)
    result = json.loads((tmp_path / "out.json").read_text())
    assert all(result[p]["wall"] > 0 for p in frames.PHASES)
