"""What a write reads before it writes (memfs.store.look): one statement, which looks for
the memories blocking a path only when the write can need them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from memfs import Actor
from memfs.store import Limits, Store
from memfs.store.look import look_in

ACTOR = Actor.api("apikey_look")


@pytest.fixture
def overlapping(db_path: str) -> Iterator[tuple[sqlite3.Connection, str, str]]:
    """A store holding /a/b.md and, against the overlap rule (by hand, as no write can),
    a memory at /a: the blocker every path below /a meets. Yields a connection, the store
    and the id of /a."""
    store = Store(db_path, limits=Limits())
    sid = store.stores.create("look").id
    store.memories.create(sid, "/a/b.md", "b", actor=ACTOR)
    store.close()
    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    cols = [r[1] for r in conn.execute("PRAGMA table_info(memories)")]
    picked = ", ".join("'mem_overlap'" if c == "id" else "'/a'" if c == "path" else c
                       for c in cols)
    with conn:
        conn.execute(f"INSERT INTO memories ({', '.join(cols)}) "
                     f"SELECT {picked} FROM memories WHERE path = '/a/b.md'")
    try:
        yield conn, sid, "mem_overlap"
    finally:
        conn.close()


def test_an_overwrite_does_not_look_for_blockers(overlapping) -> None:
    """The memory at the very path asked about is found: nothing can block that path (no
    two memories overlap), so the statement does not look (an overwrite reads what an
    unlink reads); the blocker made by hand shows that it did not."""
    conn, sid, _ = overlapping
    look = look_in(conn, sid, memory=("path", "/a/b.md"), free="/a/b.md")
    assert look.memory is not None and look.memory["path"] == "/a/b.md"
    assert look.blocker is None


@pytest.mark.parametrize("memory", [("path", "/a/c.md"), ("path", "/a/b.md"), None])
def test_a_create_or_a_move_still_finds_its_blocker(overlapping, memory) -> None:
    """A create (no memory at the path), a move (another path asked about) and a look for a
    path alone still find what blocks it."""
    conn, sid, blocker = overlapping
    free = "/a/c.md" if memory != ("path", "/a/b.md") else "/a/x.md"
    look = look_in(conn, sid, memory=memory, free=free)
    assert look.blocker == (blocker, "/a")
