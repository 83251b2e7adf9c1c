"""The mount's handlers (:class:`memfs.fuse.ops.Operations`) driven in-process, without a
kernel: a duck-typed request context, handlers over a store with an event sink, and the
create-write-close and open-read-release a kernel would send."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pyfuse3
import pytest
from pyfuse3 import FUSEError

from memfs import Actor
from memfs.fuse.ops import Operations
from memfs.fuse.toolevents import EventSink
from memfs.store import Limits, Store

ROOT = pyfuse3.ROOT_INODE
ACTOR = Actor.user("user_test")


class Ctx:
    """What pyfuse3 passes as ``ctx``: the caller's ids."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.uid = os.getuid()
        self.gid = os.getgid()
        self.umask = 0o022


CTX = Ctx()


class _Closer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def close(self) -> None:
        self.store.close()


class Fields:
    def __init__(self, **kw: bool) -> None:
        for f in ("atime", "mtime", "ctime", "mode", "uid", "gid", "size"):
            setattr(self, f"update_{f}", kw.get(f, False))


#: The event sinks (and second stores) of the handlers made by a test, closed at its end.
SINKS: list[Any] = []


@pytest.fixture(autouse=True)
def _close_sinks(store: Store) -> Iterator[None]:
    """Close the test's sinks before its store (a module using :func:`make_ops` imports this
    autouse fixture)."""
    yield
    while SINKS:
        SINKS.pop().close()


def make_ops(store: Store, tmp_path, **kw) -> tuple[Operations, str]:
    s = store.stores.create("fs-test")
    sink = EventSink(store, s.id, None, tmp_path / f"events-{s.id}.jsonl")
    SINKS.append(sink)
    ops = Operations(store, s.id, actor=ACTOR, events=sink, display_root="/mnt/memory/t", **kw)
    ops.load()
    return ops, s.id


def make_limited_ops(store: Store, tmp_path, **limits: int) -> tuple[Operations, str, Store]:
    """Operations over a second Store of the same database with other limits (closed at
    teardown, after the sinks)."""
    limited = Store(store.path, limits=Limits(**limits))
    SINKS.insert(0, _Closer(limited))
    ops, sid = make_ops(limited, tmp_path)
    return ops, sid, limited


def events(ops: Operations) -> list[dict]:
    ops.events.flush()
    with open(ops.events._file.name) as f:  # type: ignore[union-attr]
        return [json.loads(line) for line in f]


def versions(store: Store, sid: str) -> list:
    return list(reversed(store.versions.list(sid, limit=100).data))


async def write_file(ops: Operations, parent: int, name: bytes, data: bytes) -> int:
    info, attrs = await ops.create(parent, name, 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, data)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    return attrs.st_ino


async def read_file(ops: Operations, ino: int) -> bytes:
    info = await ops.open(ino, os.O_RDONLY, CTX)
    data = await ops.read(info.fh, 0, 1 << 20)
    await ops.release(info.fh)
    return data


async def raises(errno_: int, coro) -> None:
    with pytest.raises(FUSEError) as e:
        await coro
    assert e.value.errno == errno_, os.strerror(e.value.errno)


def replies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, Any]]:
    """What pyfuse3.readdir_reply is handed from now on: (name, attributes)."""
    seen: list[tuple[bytes, Any]] = []

    def reply(token: Any, name: bytes, attr: Any, next_id: int) -> bool:
        seen.append((bytes(name), attr))
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)
    return seen


async def listdir(ops: Operations, ino: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names a directory lists (opendir, readdir, releasedir), without . and .."""
    seen = replies(monkeypatch)
    fh = await ops.opendir(ino, CTX)
    await ops.readdir(fh, 0, None)
    await ops.releasedir(fh)
    return [n.decode() for n, _ in seen if n not in (b".", b"..")]
