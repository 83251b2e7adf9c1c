#!/usr/bin/env python3
"""What a mount's write costs at the store alone, without FUSE: µs per operation.

    .venv/bin/python scripts/bench_store.py [--files 2000] [--repeat 5] [--workdir DIR]

The four calls a mount makes for a create, an overwrite, a rename and an unlink, with their
tool-event pair and the local user as the actor (the phases of ``scripts/bench_frames.py``),
on a store opened as a mount opens it (``synchronous=NORMAL``, the WAL checkpointed in a
thread of its own). Each round is a fresh database with ``--files`` operations a phase; the
figures are the medians over ``--repeat`` rounds of each phase's wall time and of the
process's user and system CPU time (every thread: the checkpointer's too), per operation.

Through a mount the same calls cost more (``scripts/bench_handlers``: Python runs slower
between requests, with its caches cold); this is what a change to the store's write path
alone does, with less of the machine's noise. Compare before and after in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_frames import PHASES, phases  # noqa: E402  (the mount's calls and events)

from memfs.store import open_store  # noqa: E402


def one_round(files: int, workdir: str | None) -> dict[str, dict[str, float]]:
    """One fresh database: each phase's wall, user and system µs per operation."""
    with tempfile.TemporaryDirectory(prefix="memfs-store-", dir=workdir) as d:
        store = open_store(os.path.join(d, "store.db"), create=True, synchronous="NORMAL",
                           checkpoint_pages=16000, checkpoint_behind=True)
        try:
            ops = phases(store, store.stores.create("bench").id, files)
            out = {}
            for name in PHASES:
                op = ops[name]
                t0, c0 = time.perf_counter(), os.times()
                for i in range(files):
                    op(i)
                c1, t1 = os.times(), time.perf_counter()
                out[name] = {"wall": 1e6 * (t1 - t0) / files,
                             "user": 1e6 * (c1.user - c0.user) / files,
                             "sys": 1e6 * (c1.system - c0.system) / files}
            return out
        finally:
            store.close()


def medians(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {name: {k: statistics.median(r[name][k] for r in rounds) for k in rounds[0][name]}
            for name in rounds[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_store.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000,
                    help="operations a phase, at most 2,000 (a store's limit; default 2000)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds; medians (default 5)")
    ap.add_argument("--workdir", default=None, help="where the databases go (default $TMPDIR)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = ap.parse_args(argv)
    if not 1 <= args.files <= 2000 or args.repeat < 1:
        ap.error("--files must be 1 to 2,000 and --repeat at least 1")
    result = medians([one_round(args.files, args.workdir) for _ in range(args.repeat)])
    print(f"µs per operation at the store, medians of {args.repeat} rounds of {args.files} "
          "(the mount's calls and events; CPU of every thread)")
    print("| operation | wall | user | sys |\n|---|---:|---:|---:|")
    for name, row in result.items():
        print(f"| {name} | {row['wall']:.1f} | {row['user']:.1f} | {row['sys']:.1f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
