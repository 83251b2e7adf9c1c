"""How many credential look-ups the open live streams of one server cost (issue 22: a stream
opened with a stored key or a session token ends within 1 s of its revocation, so its grant is
looked at again and again).

    .venv/bin/python scripts/bench_grant_checks.py [--sessions 25] [--stores 8] [--keys 0]
                                                    [--server-key] [--seconds 5]
                                                    [--db URL|PATH]

Opens, on an app of its own (in this process, no network: the ASGI calls of a server), a change
stream of each of ``--stores`` stores for each of ``--sessions`` running sessions with the
session's token (what a remote mount of the session holds), and ``--keys`` stored keys with a
stream of each store each; then counts the Store's credential look-ups for ``--seconds``:
:meth:`Store.keys.grant` and :meth:`Store.sessions.grant` (one per stream per recheck, before
the shared watch), or :meth:`Store.keys.refused`, :meth:`Store.sessions.refused_tokens` and
:meth:`Store.keys.ended_signins` (one per kind per interval, with it), whichever the Store has.
Prints the streams, the credentials, the look-ups per second and the CPU the process used
meanwhile (its streams idle: nothing is written).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.api import create_app  # noqa: E402
from memfs.store import Store  # noqa: E402
from tests.support.asgi import LiveRequest  # noqa: E402  (an ASGI stream held open)

KEY = "memfs-bench-grant-checks"
#: The Store methods that look a credential up again for an open stream, old and new.
LOOKUPS = ("keys.grant", "sessions.grant", "keys.refused", "sessions.refused_tokens",
           "keys.ended_signins")


def count_calls(store: Store, counts: dict[str, int]) -> None:
    """Count the calls of :data:`LOOKUPS` on ``store`` (those it has) in ``counts``."""
    for name in LOOKUPS:
        part, attr = name.split(".")
        fn = getattr(getattr(store, part), attr, None)
        if fn is None:
            continue

        def counted(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name,
                    **kwargs: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _fn(*args, **kwargs)

        setattr(getattr(store, part), attr, counted)


async def open_stream(app: Any, path: str, key: str, opened: trio.Semaphore) -> None:
    """One GET of ``path`` with ``key``, kept open until cancelled."""
    stream = LiveRequest(app, path, {"x-api-key": key})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.run)
        await stream.started.wait()
        if stream.status != 200:
            raise SystemExit(f"{path}: {stream.status}")
        opened.release()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=25, help="running sessions (default 25)")
    p.add_argument("--stores", type=int, default=8, help="stores each follows (default 8)")
    p.add_argument("--keys", type=int, default=0, help="stored keys, each following every "
                   "store (default 0)")
    p.add_argument("--server-key", action="store_true", help="open every stream with the "
                   "server's own key instead (no look-up at all: what the streams cost alone)")
    p.add_argument("--seconds", type=float, default=5.0, help="how long to count (default 5)")
    p.add_argument("--db", help="a database (PostgreSQL URL or SQLite path; default: a "
                   "throwaway SQLite file)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.db or str(Path(tmp) / "memfs.db"))
        stores = [store.stores.create(f"bench-{i}").id for i in range(args.stores)]
        creds: list[str] = []
        for _ in range(args.sessions):
            s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}
                                      for sid in stores], status="running")
            creds.append(store.sessions.create_token(s.id).token)
        creds += [store.keys.create(f"bench-{i}").key or "" for i in range(args.keys)]
        counts: dict[str, int] = {}
        app = create_app(store, [KEY], console=False, dreams=False)
        count_calls(store, counts)
        n = len(creds) * len(stores)

        async def run() -> None:
            opened = trio.Semaphore(0, max_value=n)
            async with trio.open_nursery() as nursery:
                for key in creds:
                    for sid in stores:
                        nursery.start_soon(open_stream, app,
                                           f"/v1/memory_stores/{sid}/changes/stream",
                                           KEY if args.server_key else key, opened)
                for _ in range(n):
                    await opened.acquire()
                await trio.sleep(1.0)  # every stream past its first recheck
                counts.clear()
                cpu = time.process_time()
                await trio.sleep(args.seconds)
                got = dict(counts)
                cpu = time.process_time() - cpu
                nursery.cancel_scope.cancel()
            total = sum(got.values())
            print(f"{n} streams of {len(creds)} credentials: {total / args.seconds:.1f} "
                  f"look-ups a second ({', '.join(f'{k} {v}' for k, v in sorted(got.items()))}"
                  f" in {args.seconds:g} s); the process's CPU meanwhile "
                  f"{cpu / args.seconds * 100:.0f}%")

        trio.run(run)
        store.close()


if __name__ == "__main__":
    main()
