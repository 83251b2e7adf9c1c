"""``.sessions/`` without a kernel (memfs.fuse.sessionlog): which sessions a mount shows, by
whom it acts for and the store's ``memfs_sessions_visibility``; folder names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memfs.errors import NotFound
from memfs.fuse import sessionlog
from memfs.fuse.sessionlog import SessionLog, folder_name, session_of
from memfs.fuse.tree import Tree
from memfs.rules import sessions_visibility
from memfs.store import Store
from tests.support.storekit import API


async def _direct(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def _attach(store: Store, *store_ids: str) -> str:
    return store.sessions.create([{"type": "memory_store", "memory_store_id": i}
                                  for i in store_ids]).id


def _log(store: Store, store_id: str, viewer: str | None) -> SessionLog:
    return SessionLog(Tree(), store, store_id, _direct, viewer)


async def test_whose_sessions_a_mount_shows(store: Store) -> None:
    a = store.stores.create("a").id
    b = store.stores.create("b").id
    old, new = _attach(store, a), _attach(store, a, b)
    _attach(store, b)  # another store's session: never in a's
    assert [s.id for s in await _log(store, a, old).sessions()] == [old]
    assert [s.id for s in await _log(store, a, None).sessions()] == [new, old]
    store.stores.update(a, metadata={"memfs_sessions_visibility": "workspace"})
    assert [s.id for s in await _log(store, a, old).sessions()] == [new, old]
    assert [s.id for s in await _log(store, b, new).sessions()] == [new]  # b: session only


async def test_a_folder_is_found_by_its_name_only_while_shown(store: Store) -> None:
    a = store.stores.create("a").id
    mine, theirs = _attach(store, a), _attach(store, a)
    log = _log(store, a, mine)
    own = folder_name(store.sessions.get(mine))
    assert await log.lookup(log.root, own) is not None
    assert await log.lookup(log.root, folder_name(store.sessions.get(theirs))) is None
    assert await log.lookup(log.root, "sesn_x") is None
    assert await log.lookup(log.root, own.replace("Z-", "Y-")) is None  # not its start time


async def test_a_node_found_in_the_wider_view_reads_nothing_once_narrowed(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 43, finding 6: a kept node (a descriptor's, a directory handle's) is asked again
    whether its session is shown, as a lookup is."""
    monkeypatch.setattr(sessionlog, "REUSE_SECONDS", 0.0)  # each request reads the setting
    a = store.stores.create("a", metadata={"memfs_sessions_visibility": "workspace"}).id
    mine, theirs = _attach(store, a), _attach(store, a)
    log = _log(store, a, mine)
    folder = await log.lookup(log.root, folder_name(store.sessions.get(theirs)))
    assert folder is not None
    file = await log.lookup(folder, sessionlog.EVENTS_FILE)
    assert file is not None
    store.stores.update(a, metadata={"memfs_sessions_visibility": "session"})
    with pytest.raises(NotFound, match="no longer shown"):
        await log.content(file)
    with pytest.raises(NotFound, match="no longer shown"):
        await log.listing(folder)
    own = await log.lookup(log.root, folder_name(store.sessions.get(mine)))
    assert own is not None and len(await log.listing(own)) == len(log.files)


def test_names_and_the_setting() -> None:
    assert session_of("20261206T153906Z-sesn_01abc") == "sesn_01abc"
    assert session_of("20261206T153906Z") is None and session_of("x-y") is None
    assert sessions_visibility({}) == "session"
    assert sessions_visibility({"memfs_sessions_visibility": "workspace"}) == "workspace"
    assert sessions_visibility({"memfs_sessions_visibility": "bogus"}) == "session"


def test_a_resumed_sessions_prompt_with_pinned_memories_is_what_its_agent_saw(store: Store) -> None:
    # A resumed session's prompt ends with the old session's messages, and its stores' pinned
    # memories follow their notes, both read through a store: .sessions/'s prompt.md asked for
    # them without one, which raised instead of showing them.
    from memfs.fuse.sessionlog import PROMPT_FILE
    from memfs.launcher.pinned import version_reader
    from memfs.launcher.plan import Resume
    from memfs.launcher.prompt import render_memory_prompt
    from memfs.launcher.resume import prepare

    a = store.stores.create("a").id
    old = _attach(store, a)
    store.events.add(old, [{"type": "user.message",
                            "content": [{"type": "text", "text": "tea, black"}]}])
    store.sessions.set_status(old, "terminated")
    store.memories.create(a, "/pinned/me.md", "I am Ada.\n", actor=API)  # in its prompt too
    _, attachments, metadata = prepare(store, Resume(old, 10, 8000), [])
    new = store.sessions.create([{"type": "memory_store", "memory_store_id": x.ref,
                                  "access": x.access} for x in attachments],
                                metadata=metadata).id
    shown, _ = _log(store, a, new)._read(new, PROMPT_FILE)
    assert shown.decode() == render_memory_prompt(store.sessions.get(new), version_reader(store),
                                                  history=store)
    assert "I am Ada." in shown.decode() and "tea, black" in shown.decode()
