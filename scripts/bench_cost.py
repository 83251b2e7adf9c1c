#!/usr/bin/env python3
"""Where a file operation's time goes: FUSE requests and daemon CPU per operation.

Run it through ``scripts/bench_cost`` (needs root: it mounts FUSE filesystems). It mounts the
three FUSE targets of ``scripts/bench`` (the *floor*, a pyfuse3 passthrough over tmpfs; the
*ceiling*, a pyfuse3 filesystem doing no work; ``memfs mount`` of a fresh store) and, on each,
runs N operations of each kind (create+write+close of 2,000 bytes, overwrite, rename, unlink,
warm read of every file) and reports per operation:

* **daemon CPU** (µs): user+system time of the daemon process (every thread) from
  ``/proc/PID/stat``, around the N operations; the medians of ``--repeat`` rounds. Unlike wall
  time it hardly depends on what else the machine does.
* **FUSE requests**: the replies the daemon writes to ``/dev/fuse`` (``writev`` calls, counted
  by ``strace -c`` in a separate round, since tracing slows the daemon down): requests that
  need no reply (FORGET) are not counted. The same round counts the daemon's file writes
  (``pwrite64``: SQLite's WAL pages, and the database's when a checkpoint runs) and syncs
  (``fdatasync``/``fsync``) per operation.
* memfs runs without its recall indexer (``--indexer`` keeps it): embedding what the
  creates wrote would otherwise be counted against the operations after them.
* with ``--profile DIR``, a ``py-spy record --native`` flame graph of the memfs daemon during
  the creates (``--profile-op`` names another operation; ``--profile-format raw``: collapsed
  stacks, to read with grep; needs ``py-spy``: ``.venv/bin/pip install py-spy``).

The ratios say how many times more CPU memfs spends than the ceiling, whose per-request cost
(pyfuse3 and trio) memfs pays too. ``--json FILE`` writes every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts/bench.py: the targets and their guaranteed teardown)
from load import cpu_seconds  # noqa: E402  (scripts/load.py: utime + stime from /proc)

DATA = b"x" * 1999 + b"\n"
#: ``--front-matter``: the front matter a typed memory has (SPEC §8), then text, the same
#: 2,000 bytes in all: what reading it costs a write is the difference.
FRONT_MATTER = (b"---\ntype: decision\nimportance: high\ntags: [api, versioning]\n"
                b"description: How we version the public API\n---\n")
OPS = ("create", "overwrite", "rename", "warm read", "unlink")


def workload(root: Path, n: int, round_: int, head: bytes = b"") -> dict[str, Callable[[], None]]:
    """The operations, each a callable doing all N of them (in the order of OPS); ``head``
    starts every file's content (front matter), the rest is filler to 2,000 bytes."""
    d = root / f"r{round_}"
    names = [d / f"f{i:05d}.md" for i in range(n)]

    def content(i: int, again: bool) -> bytes:
        """File ``i``'s 2,000 bytes: its own front matter (nothing a cache could keep)."""
        own = head.replace(b"\n---\n", b" n%d r%d\n---\n" % (i, again), 1) if head else b""
        body = DATA[len(own):]
        return own + (body[::-1] if again else body)

    data = [content(i, False) for i in range(n)]
    again = [content(i, True) for i in range(n)]

    def create() -> None:
        d.mkdir()
        for p, b in zip(names, data, strict=True):
            with open(p, "wb") as f:
                f.write(b)

    def overwrite() -> None:
        for p, b in zip(names, again, strict=True):
            with open(p, "wb") as f:
                f.write(b)

    def rename() -> None:
        for p in names:
            os.rename(p, p.with_suffix(".txt"))
        for p in names:  # back, untimed in effect: counted as a second rename each
            os.rename(p.with_suffix(".txt"), p)

    def warm_read() -> None:
        for p in names:  # the first pass makes it warm
            p.read_bytes()
        for p in names:
            p.read_bytes()

    def unlink() -> None:
        for p in names:
            os.unlink(p)
        d.rmdir()

    return {"create": create, "overwrite": overwrite, "rename": rename,
            "warm read": warm_read, "unlink": unlink}


#: How many operations each callable does per file (rename: there and back; warm read: the
#: untimed warm-up pass is in the same window, so the per-op figure is per read of 2).
PER_FILE = {"create": 1, "overwrite": 1, "rename": 2, "warm read": 2, "unlink": 1}


class QuietMemfs(bench.MemfsTarget):
    """``memfs mount`` without the recall indexer (``MEMFS_EMBEDDINGS=none``): embedding what
    the creates wrote takes seconds of CPU in the same daemon and would be counted against
    the operations that follow (``scripts/bench_recall`` measures the indexer)."""

    def _env(self) -> dict[str, str]:
        env = super()._env()
        env["MEMFS_EMBEDDINGS"] = "none"
        return env


def measure(target: bench.FuseTarget, n: int, rounds: int,
            head: bytes = b"") -> dict[str, float]:
    """Median daemon CPU per operation, in µs."""
    assert target._proc is not None
    pid = target._proc.pid
    samples: dict[str, list[float]] = {op: [] for op in OPS}
    for r in range(rounds):
        for op, fn in workload(target.root, n, r, head).items():
            time.sleep(0.3)  # the daemon's background work for the last phase settles
            before = cpu_seconds([pid])
            fn()
            time.sleep(0.3)  # work the operations left behind (event flush, feed) counts
            samples[op].append((cpu_seconds([pid]) - before) / (n * PER_FILE[op]) * 1e6)
    return {op: statistics.median(v) for op, v in samples.items()}


def count_requests(target: bench.FuseTarget, n: int) -> dict[str, dict[str, float]]:
    """Per operation, counted by strace in one round: FUSE replies (``writev``), writes to
    files (``pwrite64``: SQLite's WAL pages and, at a checkpoint, the database's) and syncs
    (``fdatasync``/``fsync``)."""
    assert target._proc is not None
    strace = shutil.which("strace")
    if strace is None:
        return {}
    out: dict[str, dict[str, float]] = {k: {} for k in SYSCALLS}
    for op, fn in workload(target.root, n, 99).items():
        with tempfile.NamedTemporaryFile(suffix=".strace") as log:
            tracer = subprocess.Popen(
                [strace, "-f", "-c", "-e", "trace=" + ",".join(SYSCALLS_TRACED), "-o",
                 log.name, "-p", str(target._proc.pid)],
                stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attached to every thread
            fn()
            time.sleep(0.3)
            tracer.send_signal(2)
            tracer.wait(timeout=30)
            text = Path(log.name).read_text()
            for key, calls in SYSCALLS.items():
                count = 0
                for call in calls:
                    m = re.search(rf"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?{call}$",
                                  text, re.M)
                    count += int(m.group(1)) if m else 0
                out[key][op] = count / (n * PER_FILE[op])
    return out


#: What count_requests reports -> the system calls it counts.
SYSCALLS = {"requests": ("writev",), "pwrite": ("pwrite64",), "sync": ("fdatasync", "fsync")}
SYSCALLS_TRACED = [c for calls in SYSCALLS.values() for c in calls]


def profile(target: bench.FuseTarget, n: int, outdir: Path, fmt: str = "flamegraph",
            op: str = "create") -> Path | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(spy, os.X_OK):
        print("py-spy not found: no profile", file=sys.stderr)
        return None
    assert target._proc is not None
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / (f"memfs-{op}.svg" if fmt == "flamegraph" else f"memfs-{op}.{fmt}.txt")
    ops = workload(target.root, n, 98)
    before = list(OPS[:OPS.index(op)])  # what the profiled operation needs done first
    for name in before:
        ops[name]()
    rec = subprocess.Popen([spy, "record", "--native", "--idle", "-r", "500", "-o", str(out),
                            "--format", fmt,
                            "-p", str(target._proc.pid)], stderr=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    ops[op]()
    time.sleep(0.3)
    rec.send_signal(2)
    rec.wait(timeout=60)
    if op != "unlink":
        ops["unlink"]()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_cost", description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=500, help="files per round (default 500)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians (default 3)")
    ap.add_argument("--targets", default="ceiling,floor,memfs")
    ap.add_argument("--no-requests", action="store_true", help="skip the strace round")
    ap.add_argument("--profile", type=Path, help="write a py-spy flame graph of memfs here")
    ap.add_argument("--profile-op", default="create", choices=OPS,
                    help="the operation --profile records (default create)")
    ap.add_argument("--profile-format", default="flamegraph",
                    choices=("flamegraph", "raw", "speedscope"),
                    help="py-spy's output: raw is collapsed stacks, one per line, for grep")
    ap.add_argument("--indexer", action="store_true",
                    help="keep memfs's recall indexer on (its CPU then counts too)")
    ap.add_argument("--front-matter", action="store_true",
                    help="measure memfs a second time with front matter in every file "
                         "(memfs+fm), beside memfs without (--targets memfs+fm,memfs: that "
                         "order)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    targets = args.targets.split(",")
    if args.front_matter and "memfs" in targets and "memfs+fm" not in targets:
        targets.insert(targets.index("memfs") + 1, "memfs+fm")  # or in the order given
    if os.geteuid() != 0:
        print("scripts/bench_cost needs root (it mounts FUSE filesystems)", file=sys.stderr)
        return 2
    memfs_cmd = shutil.which("memfs", path=str(Path(sys.executable).parent)) or "memfs"
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="memfs-cost-") as work:
        opts = bench.Options(workdir=Path(work), drop_caches=False, mount_timeout=30,
                             stop_timeout=10, memfs_cmd=memfs_cmd)
        for name in targets:
            kind = "memfs" if name == "memfs+fm" else name
            cls = (QuietMemfs if kind == "memfs" and not args.indexer
                   else bench.TARGET_CLASSES[kind])
            head = FRONT_MATTER if name == "memfs+fm" else b""
            # Each run in a directory of its own (memfs and memfs+fm are both "memfs").
            own = dataclasses.replace(opts, workdir=Path(work) / name.replace("+", "-"))
            own.workdir.mkdir()
            with contextlib.ExitStack() as stack:
                target = stack.enter_context(cls(own))
                assert isinstance(target, bench.FuseTarget)
                cpu = measure(target, args.files, args.repeat, head)
                calls = {} if args.no_requests else count_requests(target, args.files)
                if name == "memfs" and args.profile is not None:
                    svg = profile(target, args.files, args.profile, args.profile_format,
                                  args.profile_op)
                    if svg is not None:
                        print(f"profile: {svg}")
                results[name] = {"cpu_us": cpu, "requests": calls.get("requests", {}),
                                 "pwrite": calls.get("pwrite", {}), "sync": calls.get("sync", {})}
    ceiling = results.get("ceiling", {}).get("cpu_us", {})
    print(f"daemon CPU per operation (µs, median of {args.repeat} rounds of {args.files} files)"
          " and FUSE replies per operation")
    head = "| operation | " + " | ".join(f"{t} CPU | {t} req" for t in results)
    if "memfs" in results and ceiling:
        head += " | memfs / ceiling CPU"
    print(head + " |")
    print("|" + "---|" * (1 + 2 * len(results) + (1 if "memfs" in results and ceiling else 0)))
    for op in OPS:
        row = [op]
        for t in results.values():
            row.append(f"{t['cpu_us'][op]:.0f}")
            req = t["requests"].get(op)
            row.append("" if req is None else f"{req:.1f}")
        if "memfs" in results and ceiling:
            # Under one clock tick (10 ms) in all: too few files to tell.
            row.append(f"{results['memfs']['cpu_us'][op] / ceiling[op]:.1f}×"
                       if ceiling[op] else "")
        print("| " + " | ".join(row) + " |")
    wrote = {t: r for t, r in results.items() if r.get("pwrite")}
    if wrote:
        print("\nfile writes (pwrite64: WAL pages, and the database's at a checkpoint) and "
              "syncs per operation")
        print("| operation | " + " | ".join(f"{t} pwrite | {t} sync" for t in wrote) + " |")
        print("|" + "---|" * (1 + 2 * len(wrote)))
        for op in OPS:
            print("| " + " | ".join([op] + [f"{r['pwrite'][op]:.1f} | {r['sync'][op]:.2f}"
                                           for r in wrote.values()]) + " |")
    if "memfs+fm" in results and "memfs" in results:
        plain, typed = results["memfs"]["cpu_us"], results["memfs+fm"]["cpu_us"]
        print("\nfront matter's cost: memfs+fm / memfs daemon CPU: " + ", ".join(
            f"{op} {typed[op] / plain[op]:.2f}×" for op in OPS if plain[op]))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
