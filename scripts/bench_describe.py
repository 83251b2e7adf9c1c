"""How long a store's description takes (issue 41: ``.describe``, ``memfs stores describe
--json`` and the API must agree on a store of 2,000 memories, and each answer in 100 ms), and
that the four agree.

Builds a store of N typed memories (every type, by directory and by front matter, tags, some
expiring, some with warnings) in a new SQLite database, then times, medians of ``--repeat``:

- ``store``: ``store.typed.describe`` in this process (what each of the others runs);
- ``api``: ``GET /v1/memory_stores/{id}/memfs/describe`` of a ``memfs serve`` on loopback;
- ``mount``: a read of ``<mount>/.describe`` on a ``memfs mount`` (needs root and FUSE);
- ``cli``: ``memfs stores describe STORE --json``, a whole process, beside ``memfs --version``
  (the interpreter's and memfs's start, which every command pays) in the same run.

    .venv/bin/python scripts/bench_describe.py [--memories 2000] [--repeat 9] [--no-mount]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.models import Actor  # noqa: E402
from memfs.store import Store  # noqa: E402

KEY = "sk-bench-describe"
MEMFS = [sys.executable, "-m", "memfs"]


def build(store: Store, n: int) -> str:
    sid = store.stores.create("described").id
    actor = Actor.user("user_bench")
    dirs = ["/preferences/", "/context/", "/knowledge/", "/decisions/", "/notes/"]
    writes = []
    for i in range(n):
        tags = f"[t{i % 7}, team{i % 3}]"
        head = {0: "", 1: f"---\ntags: {tags}\n---\n",
                2: f"---\ntype: decision\nimportance: high\ntags: {tags}\n"
                   f"description: memory {i}\n---\n",
                3: f"---\nexpires: {1 + i % 20}d\n---\n",
                4: "---\nimportance: urgent\n---\n"}[i % 5]
        writes.append(partial(store.memories.write_path, sid, f"{dirs[i % 5]}m{i:05d}.md",
                              head + f"memory {i}: " + "words " * 40, actor=actor))
    for start in range(0, n, 500):
        store.batch(writes[start:start + 500])
    return sid


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out = fn()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two descriptions agree: everything but the moment each was made (``at``)."""
    return {k: v for k, v in a.items() if k != "at"} == {k: v for k, v in b.items() if k != "at"}


def serve(db: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    err = tmp / "serve.err"
    with err.open("wb") as f:
        proc = subprocess.Popen([*MEMFS, "--db", str(db), "serve", "--port", "0",
                                 "--api-key", KEY], stdout=subprocess.DEVNULL, stderr=f,
                                env={**os.environ, "MEMFS_EMBEDDINGS": "none"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"serving (http://\S+)", err.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"memfs serve did not start: {err.read_text()}")


def mount(db: Path, sid: str, root: Path) -> subprocess.Popen[bytes]:
    root.mkdir()
    proc = subprocess.Popen([*MEMFS, "--db", str(db), "mount", sid, str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "MEMFS_EMBEDDINGS": "none"})
    deadline = time.monotonic() + 30
    while not os.path.ismount(root):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("memfs mount did not mount")
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--no-mount", action="store_true", help="skip the mount (no root, no FUSE)")
    args = p.parse_args()
    import httpx

    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="memfs-describe-") as work:
        tmp = Path(work)
        db = tmp / "memfs.db"
        with Store(db) as store:
            t = time.perf_counter()
            sid = build(store, args.memories)
            print(f"built {args.memories} memories in {time.perf_counter() - t:.1f} s")
            ms, ref = median_ms(lambda: store.typed.describe(sid), args.repeat)
            rows.append(("store.typed.describe", ms, "the reference"))
        print(json.dumps({k: ref[k] for k in ("memories", "by_type", "expired",
                                              "expiring_soon")})[:400])

        proc, url = serve(db, tmp)
        try:
            with httpx.Client(base_url=url, headers={"x-api-key": KEY}) as http:
                def get() -> dict[str, Any]:
                    r = http.get(f"/v1/memory_stores/{sid}/memfs/describe")
                    r.raise_for_status()
                    out: dict[str, Any] = r.json()
                    return out

                ms, got = median_ms(get, args.repeat)
                rows.append(("API GET .../memfs/describe", ms,
                             "agrees" if same(got, ref) else "DIFFERS"))
        finally:
            stop(proc)

        if not args.no_mount:
            root = tmp / "mnt"
            proc = mount(db, sid, root)
            try:
                def read() -> dict[str, Any]:
                    out: dict[str, Any] = json.loads((root / ".describe").read_text())
                    return out

                ms, got = median_ms(read, args.repeat)
                rows.append(("mount: read .describe", ms,
                             "agrees" if same(got, ref) else "DIFFERS"))
            finally:
                stop(proc)

        def cli() -> dict[str, Any]:
            out = subprocess.run([*MEMFS, "--db", str(db), "stores", "describe", sid, "--json"],
                                 check=True, capture_output=True).stdout
            got: dict[str, Any] = json.loads(out)
            return got

        def start() -> None:
            subprocess.run([*MEMFS, "--version"], check=True, capture_output=True)

        ms, got = median_ms(cli, args.repeat)
        base, _ = median_ms(start, args.repeat)
        rows.append(("CLI memfs stores describe --json", ms,
                     ("agrees" if same(got, ref) else "DIFFERS")
                     + f"; memfs --version alone {base:.0f} ms, the rest {ms - base:.0f} ms"))

    print(f"\nmedian of {args.repeat}, {args.memories} memories:")
    print("| answer | ms | |\n|---|---|---|")
    for name, ms, note in rows:
        print(f"| {name} | {ms:.1f} | {note} |")
    return 1 if any("DIFFERS" in note for _, _, note in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
