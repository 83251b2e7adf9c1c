"""Pinned memories (SPEC §9, issue 43) in the store: which memories are pinned (front matter's
``pinned: true``, or under the store's prefix, ``memfs_pinned_prefix``; never an expired one),
in which order (most important, then newest), what fits the budgets (each whole or not at all:
one exactly at the budget, one over, many small ones, the session's budget across stores), and
what a session records of them, from which its prompt renders again byte for byte after the
memories change; a version redacted since is listed as not shown, with why. On SQLite and on
PostgreSQL."""

from __future__ import annotations

import pytest

from memfs import InvalidRequest
from memfs.launcher.pinned import FRAMING, version_reader
from memfs.launcher.prompt import render_memory_prompt
from memfs.models import Session, SessionResource
from memfs.rules import pinned_cost
from memfs.store import Store
from tests.support.backend import Backend
from tests.support.storekit import API


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def attach(store: Store, *store_ids: str, budgets: dict[str, int] | None = None,
           metadata: dict[str, str] | None = None) -> Session:
    res = [{"type": "memory_store", "memory_store_id": s,
            **({"memfs_pinned_budget": budgets[s]} if budgets and s in budgets else {})}
           for s in store_ids]
    return store.sessions.create(res, metadata=metadata)


def shown(r: SessionResource) -> list[str]:
    return [e.path for e in r.memfs_pinned if e.shown]


def listed(r: SessionResource) -> list[tuple[str, int, str | None]]:
    return [(e.path, e.size, e.reason) for e in r.memfs_pinned if not e.shown]


def test_pinned_by_front_matter_or_prefix_most_important_then_newest(store: Store) -> None:
    sid = store.stores.create("notes").id
    w = store.memories.write_path
    w(sid, "/pinned/low.md", "---\nimportance: low\n---\nlow", actor=API)
    w(sid, "/pinned/plain.md", "plain", actor=API)
    w(sid, "/pinned/newer.md", "newer", actor=API)
    w(sid, "/people/ada.md", "---\npinned: true\nimportance: high\n---\nAda", actor=API)
    w(sid, "/people/bob.md", "Bob, not pinned", actor=API)
    w(sid, "/pinned/old.md", "---\nexpires: 2020-01-01\n---\nexpired", actor=API)
    w(sid, "/pinnedx.md", "not under /pinned/", actor=API)
    r = attach(store, sid).resources[0]
    assert r.memfs_pinned_budget == 4000
    assert shown(r) == ["/people/ada.md", "/pinned/newer.md", "/pinned/plain.md",
                        "/pinned/low.md"]
    assert listed(r) == []


def test_the_prefix_is_the_stores_metadata_and_off_turns_it_off(store: Store) -> None:
    sid = store.stores.create("notes", metadata={"memfs_pinned_prefix": "working"}).id
    w = store.memories.write_path
    w(sid, "/working/profile.md", "profile", actor=API)
    w(sid, "/pinned/a.md", "a", actor=API)
    w(sid, "/b.md", "---\npinned: true\n---\nb", actor=API)
    assert sorted(shown(attach(store, sid).resources[0])) == ["/b.md", "/working/profile.md"]
    store.stores.update(sid, metadata={"memfs_pinned_prefix": "off"})
    assert shown(attach(store, sid).resources[0]) == ["/b.md"]


def test_budget_edges_exactly_at_over_and_many_small(store: Store) -> None:
    sid = store.stores.create("notes").id
    w = store.memories.write_path
    high = "---\nimportance: high\n---\n"
    exact = 4000 - pinned_cost("/pinned/exact.md", 0)  # its heading counts too
    w(sid, "/pinned/exact.md", high + "x" * (exact - len(high)), actor=API)
    r = attach(store, sid).resources[0]
    assert [(e.path, e.size, e.shown) for e in r.memfs_pinned] == [
        ("/pinned/exact.md", exact, True)]
    w(sid, "/pinned/exact.md", high + "x" * (exact + 1 - len(high)), actor=API)
    r = attach(store, sid).resources[0]
    assert listed(r) == [("/pinned/exact.md", exact + 1,
                          "over this store's budget of 4,000 characters")]
    # Many small ones after the one over: each whole, until the budget is spent.
    for i in range(30):
        w(sid, f"/pinned/small-{i:02}.md", "s" * 150, actor=API)
    r = attach(store, sid).resources[0]
    assert len(shown(r)) == 21  # 21 × (150 + 38 of heading) = 3,948; a 22nd would be 4,136
    assert [p for p, _, _ in listed(r)][0] == "/pinned/exact.md"
    assert len(listed(r)) == 10
    assert sum(pinned_cost(e.path, e.size) for e in r.memfs_pinned if e.shown) <= 4000


def test_the_sessions_budget_spans_its_stores_and_a_budget_is_per_attachment(
        store: Store) -> None:
    ids = [store.stores.create(f"s{i}").id for i in range(5)]
    for s in ids:
        store.memories.write_path(s, "/pinned/p.md", "p" * 3500, actor=API)
    rs = attach(store, *ids).resources
    assert [len(shown(r)) for r in rs] == [1, 1, 1, 1, 0]  # 4 × 3,500 = 14,000 of 16,000
    assert listed(rs[4]) == [("/pinned/p.md", 3500,
                              "over the session's budget of 16,000 characters")]
    rs = attach(store, *ids[:2], budgets={ids[0]: 3000, ids[1]: 8000}).resources
    assert [len(shown(r)) for r in rs] == [0, 1]
    assert rs[0].memfs_pinned_budget == 3000
    with pytest.raises(InvalidRequest, match="memfs_pinned_budget"):
        attach(store, ids[0], budgets={ids[0]: 16_001})
    with pytest.raises(InvalidRequest, match="memfs_pinned_budget"):
        attach(store, ids[0], budgets={ids[0]: -1})


def test_the_prompt_renders_again_from_the_recorded_versions(store: Store) -> None:
    sid = store.stores.create("Profile").id
    w = store.memories.write_path
    w(sid, "/pinned/profile.md", "Name: Ada\nPrefers: short answers\n", actor=API)
    w(sid, "/pinned/big.md", "b" * 5000, actor=API)
    session = attach(store, sid)
    read = version_reader(store)
    first = render_memory_prompt(session, read)
    assert FRAMING in first
    assert "#### `/pinned/profile.md`\n\n```\nName: Ada\nPrefers: short answers\n```" in first
    assert "- `/pinned/big.md` (5,000 characters): over this store's budget of 4,000" in first
    # The pinned memories change: the session's prompt is still what it was.
    w(sid, "/pinned/profile.md", "Name: Ada\nPrefers: long answers\n", actor=API)
    w(sid, "/pinned/new.md", "new", actor=API)
    store.memories.delete_path(sid, "/pinned/big.md", actor=API)
    again = store.sessions.get(session.id)
    assert render_memory_prompt(again, read) == first
    # A version redacted since cannot be shown: it is listed, with why.
    old = next(e.memory_version_id for e in session.resources[0].memfs_pinned
               if e.path == "/pinned/profile.md")
    store.versions.redact(sid, old, actor=API)
    redacted = render_memory_prompt(store.sessions.get(session.id), read)
    assert "Name: Ada" not in redacted
    assert ("- `/pinned/profile.md` (33 characters): its version was redacted or deleted since"
            in redacted)


def test_a_store_without_pinned_memories_adds_nothing(store: Store) -> None:
    sid = store.stores.create("notes").id
    store.memories.write_path(sid, "/a.md", "a", actor=API)
    session = attach(store, sid)
    assert session.resources[0].memfs_pinned == ()
    assert "Pinned" not in render_memory_prompt(session)


def test_over_the_api_the_same_record_and_prompt(store: Store) -> None:
    """A session made through a server (memfs run --url) records its pinned memories there:
    the client reads the record and the versions, and renders the same prompt; a bad budget
    is a 400 naming it."""
    from starlette.testclient import TestClient

    from memfs import errors
    from memfs.api import create_app
    from memfs.client import Client
    from tests.support.asgi import through

    sid = store.stores.create("Profile").id
    store.memories.write_path(sid, "/pinned/profile.md", "Name: Ada\n", actor=API)
    with TestClient(create_app(store, ["k"]), headers={"x-api-key": "k"}) as http:
        c = Client("http://memfs", "k", transport=through(http))
        remote = c.sessions.create([{"type": "memory_store", "memory_store_id": sid,
                                     "memfs_pinned_budget": 100}])
        assert remote.resources[0].memfs_pinned_budget == 100
        assert shown(remote.resources[0]) == ["/pinned/profile.md"]
        local = store.sessions.get(remote.id)
        assert render_memory_prompt(remote, version_reader(c)) == \
            render_memory_prompt(local, version_reader(store))
        with pytest.raises(errors.InvalidRequest, match="memfs_pinned_budget"):
            c.sessions.create([{"type": "memory_store", "memory_store_id": sid,
                                "memfs_pinned_budget": "lots"}])


def test_a_store_attached_as_it_was_at_a_time_has_no_pinned_block(store: Store) -> None:
    """(Its memories then are not what the store holds now: none is recorded.)"""
    sid = store.stores.create("notes").id
    store.memories.write_path(sid, "/pinned/a.md", "a", actor=API)
    session = attach(store, sid, metadata={"memfs_at." + sid: "2026-01-01T00:00:00Z"})
    assert session.resources[0].memfs_pinned == ()


def test_the_block_stays_within_the_budget_and_drops_nothing_silently(store: Store) -> None:
    """Review 43, finding 2: the headings and the list of those not shown counted against no
    budget (long paths, many memories: 790,000 characters for 8 stores), and the pinned
    memories past the first 100 were left out without a word."""
    sid = store.stores.create("notes").id
    w = store.memories.write_path
    deep = ("d" * 49 + "/") * 18  # a path of about 1,000 characters, within the limits
    for i in range(40):  # small ones, each shown only if its heading fits too
        w(sid, f"/pinned/{deep}small-{i:03}.md", "s", actor=API)
    for i in range(75):  # 115 pinned in all: the 15 oldest are past the first 100
        w(sid, f"/pinned/{deep}big-{i:03}.md", "b" * 4001, actor=API)
    session = attach(store, sid)
    r = session.resources[0]
    assert len(r.memfs_pinned) == 100 and r.memfs_pinned_more == 15
    text = render_memory_prompt(session, version_reader(store))
    block = text[text.index("### Pinned memories"):]
    # The memories shown, their headings and fences within the store's budget of 4,000; the
    # framing and a bounded list besides.
    sections = block[:block.index("Not shown")]
    assert len(sections) - len(block_head()) <= 4000
    assert 0 < len(shown(r)) < 40
    assert len(block) < 4000 + 3000
    assert max(len(line) for line in block.splitlines()) < 400  # long paths cut
    assert block.count("\n- ") == 11  # 10 listed, then how many more
    more = len(r.memfs_pinned) - len(shown(r)) - 10 + 15
    assert block.rstrip("\n").endswith(f"- and {more:,} more pinned memories, not listed here")


def block_head() -> str:
    return "### Pinned memories\n\n" + FRAMING + "\n\n"
