"""Typed memories through :class:`memfs.client.Client` and :class:`~memfs.client.AsyncClient`
(issue 41 §5), against the real app in-process, on SQLite and PostgreSQL: ``client.typed``
answers what ``store.typed`` answers (so that the CLI works the same over either), the
listing's filters, ``memfs_meta`` decoded, and the store's refusals raised as the same
classes."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import AsyncClient, Client
from memfs.models import Actor, Memory, MemoryMeta
from tests.support.asgi import through

KEY = "client-typed-test-key"
API = Actor.api("apikey_test")
EXPIRED = "---\nexpires: 2001-01-01\ntags: [old]\n---\nyesterday's plan\n"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def tc(store):
    with TestClient(create_app(store, [KEY])) as tc:
        yield tc


@pytest.fixture
def remote(tc):
    with Client("http://memfs", KEY, transport=through(tc)) as c:
        yield c


@pytest.fixture
def sid(store) -> str:
    s = store.stores.create("notes").id
    store.memories.create(s, "/preferences/tea.md",
                          "---\ntags: [drinks, morning]\n---\ngreen tea", actor=API)
    store.memories.create(s, "/context/today.md", "the sprint goal", actor=API)
    store.memories.create(s, "/context/old.md", EXPIRED, actor=API)
    store.memories.create(s, "/misc.md", "no type here", actor=API)
    return s


def _without_at(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "at"}


def test_the_typed_part_has_the_store_s_names_and_parameters(store):
    """What the CLI calls on ``store.typed`` it calls on ``client.typed`` with the same
    arguments (the store's ``now`` and ``batch``, for tests and the sweeping daemon, aside;
    ``actor`` may be left out: the server attributes a write to the caller)."""
    for client in (Client("http://srv", KEY), AsyncClient("http://srv", KEY)):
        for name in ("describe", "sweep", "clear_type"):
            ours = inspect.signature(getattr(client.typed, name)).parameters
            theirs = inspect.signature(getattr(store.typed, name)).parameters
            assert set(theirs) - {"now", "batch"} == set(ours), name
            for p in ours:
                assert ours[p].kind == theirs[p].kind, (name, p)
                if p not in ("store_id", "actor"):
                    assert ours[p].default == theirs[p].default, (name, p)


def test_describe_answers_as_the_store_does(remote, store, sid):
    assert _without_at(remote.typed.describe(sid)) == _without_at(store.typed.describe(sid))
    with pytest.raises(errors.NotFound):
        remote.typed.describe("memstore_nope")


def test_sweep_answers_as_the_store_does(remote, store, sid):
    dry = remote.typed.sweep(sid, dry_run=True)
    assert dry == store.typed.sweep(sid, dry_run=True)
    assert dry["type"] == "memfs_expiry_sweep" and [x["path"] for x in dry["deleted"]] == [
        "/context/old.md"]
    done = remote.typed.sweep(sid)
    assert [x["path"] for x in done["deleted"]] == ["/context/old.md"] and done["reverts"]
    assert store.memories.count(sid) == 3
    assert remote.typed.sweep(sid)["deleted"] == []
    with pytest.raises(errors.NotFound):
        remote.typed.sweep("memstore_nope")


def test_clear_type_answers_as_the_store_does(remote, store, sid):
    dry = remote.typed.clear_type(sid, "context", dry_run=True)
    assert dry == store.typed.clear_type(sid, "context", actor=API, dry_run=True)
    done = remote.typed.clear_type(sid, "context", actor=Actor.user("user_ignored"))
    assert done["deleted"] == ["/context/old.md", "/context/today.md"]
    assert done["revert_id"].startswith("memrevert_")
    # the server attributes it to the caller's key, whatever actor the client names
    gone = store.versions.list(sid, operation="deleted").data
    assert {v.created_by.type for v in gone} == {"api_actor"}  # type: ignore[union-attr]
    assert remote.undo.revert(done["revert_id"])["complete"] is True
    assert store.memories.count(sid) == 4
    with pytest.raises(errors.InvalidRequest, match="not a type of"):
        remote.typed.clear_type(sid, "nosuchtype")
    with pytest.raises(errors.InvalidRequest):
        remote.typed.clear_type(sid, "")
    with pytest.raises(errors.NotFound):
        remote.typed.clear_type("memstore_nope", "context")


def test_listing_by_type_and_tag_and_memfs_meta_decoded(remote, sid):
    page = remote.memories.list(sid, memory_type="context")
    assert [m.path for m in page.data] == ["/context/old.md", "/context/today.md"]
    assert [m.path for m in remote.memories.list(sid, tag="morning").data] == [
        "/preferences/tea.md"]
    assert remote.memories.list(sid, memory_type="context", tag="old").data[0].path == (
        "/context/old.md")
    first = remote.memories.list(sid, memory_type="context", limit=1)
    rest = remote.memories.list(sid, memory_type="context", limit=1, page=first.next_page)
    assert [m.path for m in rest.data] == ["/context/today.md"]
    with pytest.raises(errors.InvalidRequest, match="depth must be 0"):
        remote.memories.list(sid, memory_type="context", depth=1)
    with pytest.raises(errors.InvalidRequest, match="1 to 64"):
        remote.memories.list(sid, tag="t" * 65)
    for empty in ({"memory_type": ""}, {"tag": ""}):  # never read as "no filter"
        with pytest.raises(errors.InvalidRequest, match="is empty"):
            remote.memories.list(sid, **empty)
    tea = remote.memories.list(sid, tag="drinks", view="full").data[0]
    assert isinstance(tea, Memory) and tea.memfs_meta == MemoryMeta(
        type="preference", importance=0.8, tags=("drinks", "morning"))
    got = remote.memories.get(sid, tea.id)
    assert got.memfs_meta == tea.memfs_meta
    assert remote.memories.tree(sid)[0].memfs_meta is not None


def test_bad_typed_metadata_is_invalid_metadata(remote, sid):
    with pytest.raises(errors.InvalidMetadata, match="memfs_types"):
        remote.stores.create("t", metadata={"memfs_types": "bogus"})
    with pytest.raises(errors.InvalidMetadata, match="memfs_expiry"):
        remote.stores.update(sid, metadata={"memfs_expiry": "later"})


def test_a_session_token_client_may_not_sweep(store, tc, sid):
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}],
                              status="running")
    token = store.sessions.create_token(s.id).token
    with Client("http://memfs", token, transport=through(tc)) as agent:
        assert agent.typed.describe(sid)["memories"] == 3
        with pytest.raises(errors.Forbidden):
            agent.typed.sweep(sid, dry_run=True)
        assert agent.typed.clear_type(sid, "context", dry_run=True)["deleted"]
    assert store.memories.count(sid) == 4


async def test_the_async_client_has_the_same_part(store, sid):
    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with AsyncClient("http://memfs", KEY, transport=transport) as c:
        assert _without_at(await c.typed.describe(sid)) == _without_at(
            store.typed.describe(sid))
        assert (await c.typed.sweep(sid, dry_run=True))["deleted"]
        assert (await c.typed.clear_type(sid, "preference"))["deleted"] == [
            "/preferences/tea.md"]
        page = await c.memories.list(sid, memory_type="context", tag="old")
        assert [m.path for m in page.data] == ["/context/old.md"]
