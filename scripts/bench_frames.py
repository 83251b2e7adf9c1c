#!/usr/bin/env python3
"""The pages a write appends to SQLite's WAL, by b-tree (issue 45): a count, not a timing.

    .venv/bin/python scripts/bench_frames.py [--memories 1500] [--files 500] [--json FILE]

A commit appends every page it dirtied to the WAL as one *frame* (SQLite writes each frame's
header and its page apart: two ``pwrite64`` calls), and the checkpoint copies each page again
into the database file. Frames are most of what a commit costs (``COMMIT`` is the largest
statement of a write, see ``scripts/bench_handlers``), and unlike a time they do not depend on
what else the machine does, so a lever that writes fewer pages shows here exactly.

The store is opened as a mount opens it (``synchronous=NORMAL``, 1 KiB pages), and each
operation is the call a mount makes, with its tool-event pair and the local user as the actor
(``Store.memories.write_path`` / ``rename_path`` / ``delete_path``). A store of ``--memories``
memories of 2,000 bytes in 10 directories is made first (each then overwritten once, so it has
a history), then four phases run on ``--files`` other files: create, overwrite, rename,
unlink. Before each phase the WAL is emptied (a TRUNCATE checkpoint); after it, every frame
in the WAL is read (its page number from its header) and the page is named by the b-tree
that holds it now (SQLite's ``dbstat``; a page no b-tree holds is a free page, and a page
written twice in the phase counts twice, as it was appended twice).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.fuse.toolevents import new_tool_pair  # noqa: E402
from memfs.models import Actor  # noqa: E402
from memfs.store import Store, open_store  # noqa: E402

ACTOR = Actor.user("user_bench")
DATA = "x" * 1999 + "\n"
PHASES = ("create", "overwrite", "rename", "unlink")
#: What a page that no b-tree holds after the phase is counted as.
FREE = "(free pages)"


def wal_pages(wal: str) -> list[int]:
    """The page number of each frame in the WAL file ``wal``, in order (a frame is a 24-byte
    header, whose first 4 bytes are the page number, then the page; the file starts with a
    32-byte header giving the page size)."""
    data = Path(wal).read_bytes()
    if len(data) < 32:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    pages = []
    at = 32
    while at + 24 + page_size <= len(data):
        pages.append(struct.unpack(">I", data[at:at + 4])[0])
        at += 24 + page_size
    return pages


def btree_of_pages(path: str) -> dict[int, str]:
    """Page number -> the table or index holding it, as the database is now."""
    conn = sqlite3.connect(path)
    try:
        return {int(n): str(name) for name, n in conn.execute("SELECT name, pageno FROM dbstat")}
    finally:
        conn.close()


def phases(store: Store, store_id: str, n: int) -> dict[str, Callable[[int], object]]:
    """Each phase's operation on file ``i`` of ``n`` (the mount's calls and events)."""
    mem = store.memories
    paths = [f"/new/d{i % 10}/f{i:05d}.md" for i in range(n)]

    def create(i: int) -> object:
        return mem.write_path(store_id, paths[i], DATA, actor=ACTOR,
                              events=new_tool_pair("bench", 1, "write", paths[i], text="wrote"))

    def overwrite(i: int) -> object:
        return mem.write_path(store_id, paths[i], DATA[::-1], actor=ACTOR,
                              events=new_tool_pair("bench", 1, "write", paths[i], text="wrote"))

    def rename(i: int) -> object:
        new = paths[i] + ".txt"
        return mem.rename_path(store_id, paths[i], new, actor=ACTOR, events=new_tool_pair(
            "bench", 1, "rename", paths[i], new_path=new, text="renamed"))

    def unlink(i: int) -> object:
        gone = paths[i] + ".txt"
        return mem.delete_path(store_id, gone, actor=ACTOR,
                               events=new_tool_pair("bench", 1, "delete", gone, text="deleted"))

    return {"create": create, "overwrite": overwrite, "rename": rename, "unlink": unlink}


def measure(memories: int, files: int, workdir: str | None = None) -> dict[str, dict[str, float]]:
    """Frames per operation of each phase: ``{phase: {b-tree: frames, "total": …}}``."""
    with tempfile.TemporaryDirectory(prefix="memfs-frames-", dir=workdir) as d:
        path = os.path.join(d, "frames.db")
        # No checkpoint but ours: the WAL holds exactly what the phase appended.
        store = open_store(path, create=True, synchronous="NORMAL",
                           checkpoint_pages=1_000_000_000)
        try:
            store_id = store.stores.create("bench").id
            for i in range(memories):
                p = f"/d{i % 10}/m{i:05d}.md"
                for text in (DATA, DATA[::-1]):
                    store.memories.write_path(store_id, p, text, actor=ACTOR, events=new_tool_pair(
                        "bench", 1, "write", p, text="wrote"))
            out: dict[str, dict[str, float]] = {}
            for name, op in phases(store, store_id, files).items():
                store.database.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                for i in range(files):
                    op(i)
                pages = wal_pages(path + "-wal")
                names = btree_of_pages(path)
                counts = collections.Counter(names.get(p, FREE) for p in pages)
                row = {k: v / files for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}
                row["total"] = len(pages) / files
                out[name] = row
            return out
        finally:
            store.close()


def table(result: dict[str, dict[str, float]]) -> str:
    """A markdown table: one row per b-tree, one column per phase."""
    trees = sorted({t for row in result.values() for t in row if t != "total"},
                   key=lambda t: -sum(row.get(t, 0.0) for row in result.values()))
    lines = ["| b-tree | " + " | ".join(result) + " |", "|---|" + "---:|" * len(result)]
    for t in trees:
        lines.append(f"| `{t}` | " + " | ".join(f"{row.get(t, 0.0):.2f}" for row in
                                                 result.values()) + " |")
    lines.append("| **frames in all** | " + " | ".join(f"**{row['total']:.1f}**" for row in
                                                       result.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_frames.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=1500,
                    help="memories in the store before the phases (default 1500; with "
                         "--files, at most a store's 2,000)")
    ap.add_argument("--files", type=int, default=500,
                    help="operations per phase (default 500)")
    ap.add_argument("--workdir", default=None, help="where the database goes (default $TMPDIR)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.files < 1 or args.memories < 0 or args.memories + args.files > 2000:
        ap.error("--files must be at least 1, --memories at least 0, and the two at most "
                 "2,000 together (a store's limit)")
    result = measure(args.memories, args.files, args.workdir)
    print(f"WAL frames (1 KiB pages) per operation, by b-tree: a store of {args.memories} "
          f"memories, {args.files} operations a phase, the mount's calls and events")
    print(table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
