"""A mount daemon's indexer in a process of its own (memfs.recall.supervisor, memfs.recall.worker,
memfs.daemons.indexworker): started when there is work, ended once idle, started again after a
crash, dead with its daemon; the daemon's searches rank by meaning through it, and the daemon
never loads the model. With the local model, on SQLite (the mount daemons' local database)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs import Actor
from memfs.recall import embeddings
from memfs.recall.supervisor import IndexerProcess
from memfs.store import Store
from tests.support import wait_until

ACTOR = Actor.api("apikey_test")
ONCALL = "Nights and weekends: Dana is paged first, then Lee.\n"
#: Shares no word with ONCALL: only meaning finds it.
IN_OTHER_WORDS = "which engineer handles emergencies after hours"


def ask(store: Store, sid: str) -> Any:
    """IN_OTHER_WORDS, every memory ranked (in three, none passes the default threshold)."""
    return store.search.in_store(sid, IN_OTHER_WORDS, threshold=0)
MODEL = embeddings.LocalE5.model


def command(idle: float, *store_ids: str) -> list[str]:
    return [sys.executable, "-P", "-m", "memfs.daemons.indexworker", "--parent", str(os.getpid()),
            "--model", MODEL, "--idle", str(idle), "-v", "--", *store_ids]


def indexer_env(db: str) -> dict[str, str]:
    return {**os.environ, "MEMFS_DB": db, "MEMFS_EMBEDDINGS": "local"}


def dead(pid: int) -> bool:
    """``pid`` has ended (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "memfs.db")
    yield s
    s.close()


def indexed(store: Store, sid: str) -> int:
    return int(store.search.status(sid)["indexed"])


def test_the_indexer_runs_in_a_child_that_ends_once_idle_and_comes_back_for_work(
        store: Store) -> None:
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/oncall.md", ONCALL, actor=ACTOR)
    store.memories.write_path(sid, "/lunch.md", "Friday lunch is at noon, pizza.\n", actor=ACTOR)
    ix = IndexerProcess(store, MODEL, [sid], command(1.0, sid), indexer_env(store.path),
                        poll=0.1, first_look=0.0).start()
    store.search.use_embeddings(ix)
    try:
        wait_until(lambda: indexed(store, sid) == 2, 60, interval=0.05, what="indexed")
        first = ix._child  # noqa: SLF001
        assert first is not None and first.proc.pid != os.getpid()
        # Idle for a second: the child ends by itself, and is reaped.
        wait_until(lambda: ix.pid is None and first.proc.returncode == 0, 30, interval=0.05,
                   what="the idle child ended")
        assert dead(first.proc.pid) and ix.started == 1
        # Something to embed: a child again.
        store.memories.write_path(sid, "/late.md", "The quarterly budget review is on Monday.\n",
                         actor=ACTOR)
        wait_until(lambda: indexed(store, sid) == 3, 60, interval=0.05, what="the new one")
        assert ix.started == 2
        wait_until(lambda: ix.pid is None, 30, interval=0.05, what="idle again")
        # A question while none runs starts one, which ranks by meaning (the first one may
        # find it still starting: words alone answer that one, and the next asks again).
        result = wait_until(lambda: (r := ask(store, sid)).meaning and r, 30, interval=0.05,
                            what="a search by meaning")
        assert [h.path for h in result.hits][0] == "/oncall.md"
        assert result.hits[0].matched == ("meaning",)
        assert ix.started == 3 and ix.pid is not None
        # A long question (over 4 KiB as JSON: accents, escaped) gets its answer, and the
        # next one too.
        assert store.search.in_store(sid, "é" * 200, path_prefix="/" + "é" * 500).meaning
        assert store.search.in_store(sid, IN_OTHER_WORDS, threshold=0).hits[0].path == "/oncall.md"
        child = ix._child  # noqa: SLF001
    finally:
        ix.stop()
    # Ended and reaped at unmount, the thread too.
    assert child is not None and child.proc.returncode is not None and dead(child.proc.pid)
    assert ix.pid is None and not ix._thread.is_alive()  # noqa: SLF001


def test_a_killed_child_is_said_and_started_again_and_searches_go_on(
        store: Store, error_logs: list[logging.LogRecord]) -> None:
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/oncall.md", ONCALL, actor=ACTOR)
    ix = IndexerProcess(store, MODEL, [sid], command(60.0, sid), indexer_env(store.path),
                        poll=0.1, first_look=0.0, backoff=(0.2, 1.0)).start()
    store.search.use_embeddings(ix)
    try:
        wait_until(lambda: indexed(store, sid) == 1, 60, interval=0.05, what="indexed")
        pid = ix.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: ix.crashes.count == 1, 10, interval=0.05, what="the crash seen")
        [said] = [r for r in error_logs if r.name == "memfs.recall.supervisor"]
        assert said.exc_info is not None and "was killed by SIGKILL" in str(said.exc_info[1])
        # The next work starts another (after the backoff), which indexes it.
        store.memories.write_path(sid, "/late.md", "The quarterly budget review is on Monday.\n",
                         actor=ACTOR)
        wait_until(lambda: indexed(store, sid) == 2, 60, interval=0.05, what="indexed again")
        assert ix.started == 2 and ix._thread.is_alive()  # noqa: SLF001
        result = wait_until(lambda: (r := ask(store, sid)).meaning and r, 30, interval=0.05,
                            what="a search by meaning")
        assert result.hits[0].path == "/oncall.md"
    finally:
        ix.stop()


DAEMON = textwrap.dedent("""
    import os, sys, time
    from memfs.recall.supervisor import IndexerProcess
    from memfs.store import Store

    db, sid, model = sys.argv[1:4]
    store = Store(db)
    command = [sys.executable, "-m", "memfs.daemons.indexworker", "--parent", str(os.getpid()),
               "--model", model, "--", sid]
    ix = IndexerProcess(store, model, [sid], command, dict(os.environ, MEMFS_DB=db),
                        poll=0.1, first_look=0.0).start()
    while ix.pid is None:
        time.sleep(0.01)
    print(ix.pid, flush=True)
    time.sleep(600)
""")


def test_the_child_dies_with_its_daemon(store: Store, tmp_path: Path) -> None:
    sid = store.stores.create("s").id
    for i in range(40):  # work for a while, so that it would not end idle meanwhile
        store.memories.write_path(sid, f"/m{i}.md", f"memory number {i}\n", actor=ACTOR)
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, store.path, sid, MODEL],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "MEMFS_EMBEDDINGS": "local"})
    try:
        assert daemon.stdout is not None
        child = int(daemon.stdout.readline())
        assert not dead(child)
        daemon.kill()  # no unmount, no stop(): the kernel's parent-death signal
        daemon.wait()
        wait_until(lambda: dead(child), 15, interval=0.05, what="the child gone")
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        daemon.stdout.close()

