"""The expiry sweep of the processes that keep a database's indexes (SPEC §8,
memfs.daemons.expiry): ``memfs serve`` sweeps every store, a local mount daemon its own, at
start and then every so often; a store whose expiry is ``on`` loses its expired memories as
``deleted`` versions by the expiry actor, one that only reports keeps them; a failed round never
ends the sweep; a remote or snapshot store is never swept."""

from __future__ import annotations

import logging

import pytest

from memfs import errors
from memfs.background import Every
from memfs.daemons import expiry
from memfs.daemons.expiry import start_sweep
from memfs.store import Store, local_user_actor
from memfs.store.typed import EXPIRY_ACTOR
from tests.support import wait_until
from tests.support.mount import Mount, require_fuse
from tests.support.server import start_server, stop_server

#: A memory that expired long ago (its front matter says so).
OLD = "---\nexpires: 2020-01-01\n---\nthe old plan\n"


def two_stores(store: Store) -> tuple[str, str]:
    """A store whose expiry is on (a new store) and one that only reports, each with an expired
    memory at /old.md."""
    on = store.stores.create("on").id
    report = store.stores.create("report", metadata={"memfs_expiry": "report"}).id
    for sid in (on, report):
        store.memories.create(sid, "/old.md", OLD, actor=local_user_actor())
    return on, report


def paths(store: Store, sid: str) -> list[str]:
    return [m.path for m in store.memories.list(sid, limit=100).data]


def swept_by_the_expiry_actor(store: Store, sid: str, path: str) -> bool:
    return any(v.operation == "deleted" and v.path == path and v.created_by == EXPIRY_ACTOR
               for v in store.versions.list(sid, limit=100).data)


def test_the_sweep_deletes_an_on_stores_expired_memories_and_reports_the_others(store, caplog):
    caplog.set_level(logging.INFO, logger=expiry.log.name)
    on, report = two_stores(store)
    sweep = start_sweep(store, None, every=0.05)
    assert sweep is not None
    try:
        wait_until(lambda: paths(store, on) == [], 30, what="the expired memory swept")
        assert swept_by_the_expiry_actor(store, on, "/old.md")
        # Every round, not only the first: one that expires later goes too.
        store.memories.create(on, "/later.md", OLD, actor=local_user_actor())
        wait_until(lambda: paths(store, on) == [], 30, what="the later memory swept")
        assert paths(store, report) == ["/old.md"]  # only reported, every round
        said = [r.getMessage() for r in caplog.records if "only reported" in r.getMessage()]
        assert len(said) == 1 and report in said[0]  # once, not each round
    finally:
        sweep.stop()


def test_a_mount_sweeps_only_its_own_stores(store):
    on, _ = two_stores(store)
    other = store.stores.create("other").id
    store.memories.create(other, "/old.md", OLD, actor=local_user_actor())
    sweep = start_sweep(store, [other], every=0.05)
    assert sweep is not None
    try:
        wait_until(lambda: paths(store, other) == [], 30, what="its store swept")
        sweep.stop()
        assert paths(store, on) == ["/old.md"]
    finally:
        sweep.stop()


@pytest.mark.allow_error_logs
def test_a_failed_round_is_said_and_tried_again(store, caplog, monkeypatch):
    on, _ = two_stores(store)
    real = store.typed.sweep
    calls = []

    def failing_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise errors.StorageError("the database cannot be reached")
        return real(*args, **kwargs)

    monkeypatch.setattr(store.typed, "sweep", failing_once)
    caplog.set_level(logging.INFO, logger=expiry.log.name)
    sweep = start_sweep(store, None, every=0.05)
    assert sweep is not None
    try:
        wait_until(lambda: paths(store, on) == [], 30, what="swept after the failure")
    finally:
        sweep.stop()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == expiry.log.name]
    assert ("WARNING", "the expiry sweep waits: the database cannot be reached; trying again "
            "in 0.05 s") in said


def test_what_is_never_swept(store, monkeypatch, caplog):
    sid = store.stores.create("s").id
    assert start_sweep(object(), None) is None  # a server's client, a snapshot
    assert start_sweep(store, []) is None  # no live store
    monkeypatch.setenv("MEMFS_EXPIRY_INTERVAL", "0")
    assert start_sweep(store, [sid]) is None  # turned off
    monkeypatch.setenv("MEMFS_EXPIRY_INTERVAL", "soon")
    assert expiry.interval() == expiry.INTERVAL
    assert "is no number of seconds" in caplog.text
    monkeypatch.setenv("MEMFS_EXPIRY_INTERVAL", "2.5")
    assert expiry.interval() == 2.5


@pytest.mark.allow_error_logs
def test_every_runs_at_once_and_a_bug_does_not_end_it(caplog):
    log = logging.getLogger("memfs.test.every")
    done: list[int] = []

    def step() -> None:
        done.append(1)
        if len(done) == 2:
            raise RuntimeError("a bug")

    with caplog.at_level(logging.ERROR, logger=log.name):
        every = Every("the thing", step, 0.02, log, thread="test-every").start()
        try:
            wait_until(lambda: every.rounds >= 3, 30)
        finally:
            every.stop()
    assert [r.getMessage() for r in caplog.records if r.name == log.name] == [
        "the thing failed; trying again in 0.02 s"]


def test_memfs_serve_sweeps_every_store(tmp_path):
    db = tmp_path / "memfs.db"
    store = Store(db)
    try:
        on, report = two_stores(store)
        server = start_server(tmp_path, db=str(db), env={"MEMFS_EXPIRY_INTERVAL": "0.2"})
        try:
            wait_until(lambda: paths(store, on) == [], 30, what="swept by the server")
            assert swept_by_the_expiry_actor(store, on, "/old.md")
            store.memories.create(on, "/later.md", OLD, actor=local_user_actor())
            wait_until(lambda: paths(store, on) == [], 30, what="swept again by the server")
            assert paths(store, report) == ["/old.md"]
        finally:
            assert stop_server(server) == 0
        assert "Traceback" not in server.stderr.read_text()
    finally:
        store.close()


def test_a_local_mount_sweeps_its_store(tmp_path):
    require_fuse()
    db = tmp_path / "memfs.db"
    store = Store(db)
    try:
        on, report = two_stores(store)
        mount = Mount(db, on, tmp_path / "mnt", [], env={"MEMFS_EXPIRY_INTERVAL": "0.2"})
        try:
            mount.wait_mounted()
            wait_until(lambda: paths(store, on) == [], 30, what="swept by the mount")
            assert swept_by_the_expiry_actor(store, on, "/old.md")
            wait_until(lambda: not (tmp_path / "mnt" / "old.md").exists(), 30,
                       what="gone from the mount too")
        finally:
            mount.stop()
        assert paths(store, report) == ["/old.md"]  # not its store
    finally:
        store.close()
