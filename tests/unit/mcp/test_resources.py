"""memfs.mcp's resources (each memory ``memfs://<store id>/<path>``, listed in pages, read,
subscribed to) and its instructions at initialize, with the official client in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import AnyUrl

from memfs import errors
from memfs.mcp import Reach, create_server
from memfs.mcp.resources import PAGE_ITEMS, STORES_FOLLOWED, SUBSCRIPTIONS
from memfs.models import Change
from memfs.store import Store
from tests.support.mcp import connected

#: Long enough for a change to come through under load; a pass takes a fraction of it.
DEADLINE_SECONDS = 30


class _Heard:
    """The resources/updated notifications a client got, and a wait for the next one."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
                message.root, types.ResourceUpdatedNotification):
            self.uris.append(str(message.root.params.uri))
            self.event.set()

    async def next(self) -> str:
        with anyio.fail_after(DEADLINE_SECONDS):
            await self.event.wait()
        self.event = anyio.Event()
        return self.uris[-1]



async def test_every_memory_is_a_resource_listed_in_pages_and_read(store: Store) -> None:
    a = store.stores.create(name="a").id
    b = store.stores.create(name="b b").id
    for i in range(PAGE_ITEMS + 5):
        store.memories.create(a, f"/n/{i:03}.md", f"note {i}\n", actor=None)
    store.memories.create(b, "/with space.txt", "plain", actor=None)
    async with connected(Reach(store)) as client:
        seen: list[types.Resource] = []
        cursor = None
        pages = 0
        while True:
            page = await client.list_resources(cursor)
            seen += page.resources
            pages += 1
            cursor = page.nextCursor
            if cursor is None:
                break
        assert pages == 2
        uris = [str(r.uri) for r in seen]
        assert len(uris) == len(set(uris)) == PAGE_ITEMS + 6
        assert [u for u in uris if a in u] == [f"memfs://{a}/n/{i:03}.md"
                                               for i in range(PAGE_ITEMS + 5)]
        assert f"memfs://{b}/with%20space.txt" in uris
        read = await client.read_resource(AnyUrl(f"memfs://{a}/n/007.md"))
        content = read.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert (content.text, content.mimeType) == ("note 7\n", "text/markdown")
        read = await client.read_resource(AnyUrl(f"memfs://{b}/with%20space.txt"))
        assert read.contents[0].mimeType == "text/plain"


async def test_resource_pages_hold_while_stores_come_and_go(store: Store) -> None:
    """The stores are listed newest first: the first page ends inside the third newest;
    that store deleted, and a store made, meanwhile, the listing goes on with the next one,
    lists every memory of the others once, and the next listing has the new store."""
    ids = sorted((store.stores.create(name=f"s{i}").id for i in range(4)), reverse=True)
    per_store = PAGE_ITEMS * 2 // 5  # the first page ends inside the third store
    for sid in ids:
        for j in range(per_store):
            store.memories.create(sid, f"/m{j:03}.md", "x", actor=None)
    async with connected(Reach(store)) as client:
        first = await client.list_resources()
        assert first.nextCursor is not None
        assert {str(r.uri).split("/")[2] for r in first.resources} == set(ids[:3])
        # meanwhile a store is made, and the one the page ended in is deleted
        new = store.stores.create(name="new").id
        store.memories.create(new, "/n.md", "x", actor=None)
        store.stores.delete(ids[2])
        seen = list(first.resources)
        cursor: str | None = first.nextCursor
        while cursor is not None:
            page = await client.list_resources(cursor)
            seen += page.resources
            cursor = page.nextCursor
        again = await client.list_resources()
    uris = [str(r.uri) for r in seen]
    assert len(uris) == len(set(uris))
    for sid in (ids[0], ids[1], ids[3]):
        assert {f"memfs://{sid}/m{j:03}.md" for j in range(per_store)} <= set(uris), sid
    assert f"memfs://{new}/n.md" in [str(r.uri) for r in again.resources]


async def test_a_resource_outside_the_reach_is_not_found(store: Store) -> None:
    mine = store.stores.create(name="mine").id
    other = store.stores.create(name="other").id
    store.memories.create(other, "/x.md", "secret", actor=None)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": mine}])
    async with connected(Reach(store, session_id=session.id)) as client:
        assert (await client.list_resources()).resources == []
        with pytest.raises(McpError) as raised:
            await client.read_resource(AnyUrl(f"memfs://{other}/x.md"))
        assert raised.value.error.code == -32002
        assert raised.value.error.message.startswith("not_found_error: ")
        with pytest.raises(McpError) as raised:
            await client.read_resource(AnyUrl("https://example.com/x.md"))
        assert raised.value.error.message.startswith("invalid_request_error: ")


async def test_a_subscriber_hears_of_a_change_made_elsewhere(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    m = store.memories.create(ms, "/a.md", "one", actor=None)
    store.memories.create(ms, "/b.md", "other", actor=None)
    heard = _Heard()
    async with connected(Reach(store), message_handler=heard) as client:
        caps = (await client.initialize()).capabilities
        assert caps.resources is not None and caps.resources.subscribe
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/a.md"))
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/new.md"))
        store.memories.update(ms, store.memories.get_by_path(ms, "/b.md").id, content="x",
                              actor=None)  # not subscribed to
        store.memories.update(ms, m.id, content="two", actor=None)  # another writer
        assert await heard.next() == f"memfs://{ms}/a.md"
        assert heard.uris == [f"memfs://{ms}/a.md"]
        store.memories.create(ms, "/new.md", "born", actor=None)
        assert await heard.next() == f"memfs://{ms}/new.md"
        await client.unsubscribe_resource(AnyUrl(f"memfs://{ms}/a.md"))
        await client.unsubscribe_resource(AnyUrl(f"memfs://{ms}/new.md"))


async def test_another_change_source_plugs_in(store: Store) -> None:
    """A server that follows the feeds itself (memfs serve's ChangeHub) hands its changes in
    through Reach.changes: the default polling is not used."""
    ms = store.stores.create(name="notes").id
    send, receive = anyio.create_memory_object_stream[Change](10)
    asked: list[str] = []

    async def changes(store_id: str) -> AsyncIterator[Change]:
        asked.append(store_id)
        async with receive:
            async for c in receive:
                yield c

    heard = _Heard()
    async with send, connected(Reach(store, changes=changes),
                               message_handler=heard) as client:
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/x%20y.md"))
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/other.md"))
        assert asked == [ms]  # one source per store
        await send.send(Change(7, ms, "history", "mem_1", "/x y.md", None))
        await send.send(Change(8, ms, "put", "mem_1", "/elsewhere.md", "/x y.md"))
        assert await heard.next() == f"memfs://{ms}/x%20y.md"  # a rename away from it
        assert heard.uris == [f"memfs://{ms}/x%20y.md"]


async def test_instructions_name_a_sessions_stores_for_tools(store: Store) -> None:
    rw = store.stores.create(name="team", description="what the team decided").id
    ro = store.stores.create(name="docs").id
    session = store.sessions.create([
        {"type": "memory_store", "memory_store_id": rw, "instructions": "Keep it short."},
        {"type": "memory_store", "memory_store_id": ro, "access": "read_only"}])
    server_reach = Reach(store, session_id=session.id)
    async with connected(server_reach) as client:
        text = (await client.initialize()).instructions
    assert text is not None
    assert text.startswith("# Memory\n\n2 memory stores are available in this session.")
    assert "memory_search" in text and "memory_write" in text
    assert "/mnt/memory" not in text and ".search/" not in text  # a mount's words
    assert f"## team\n\n- Store: {rw}\n- Access: read_write" in text
    assert "- Description: what the team decided\n- Instructions: Keep it short." in text
    assert f"## docs\n\n- Store: {ro}\n- Access: read_only" in text
    async with connected(Reach(store, instructions="Only these words.")) as client:
        assert (await client.initialize()).instructions == "Only these words."


async def test_instructions_when_the_reach_cannot_be_asked_yet(store: Store) -> None:
    """A reach asked per request (HTTP) cannot be asked when a session starts: the
    instructions then say how to find the stores."""
    store.stores.create(name="notes")

    def reach() -> Reach:
        raise LookupError("no request")

    server = create_server(reach)
    async with create_connected_server_and_client_session(server) as client:
        text = (await client.initialize()).instructions
    assert text is not None and text.startswith(
        "# Memory\n\nYour memory stores are listed by memory_list_stores.")
    assert "memory_search" in text


async def test_a_subscription_follows_again_after_its_source_failed(store: Store) -> None:
    """A follower asks its source again after a failure, and tells every subscription of the
    store first: what changed while it could not follow is not known."""
    ms = store.stores.create(name="notes").id
    send, receive = anyio.create_memory_object_stream[Change](10)
    asked: list[str] = []

    async def changes(store_id: str) -> AsyncIterator[Change]:
        asked.append(store_id)
        if len(asked) == 1:  # a store that cannot answer for a moment
            raise errors.Busy("database is locked")
        async for c in receive:
            yield c

    heard = _Heard()
    async with send, receive, connected(Reach(store, changes=changes),
                                        message_handler=heard) as client:
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/a.md"))
        assert await heard.next() == f"memfs://{ms}/a.md"  # may have changed meanwhile
        await send.send(Change(1, ms, "put", "mem_1", "/a.md", None))
        assert await heard.next() == f"memfs://{ms}/a.md"
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/b.md"))
        await send.send(Change(2, ms, "put", "mem_2", "/b.md", None))
        assert await heard.next() == f"memfs://{ms}/b.md"
        assert heard.uris == [f"memfs://{ms}/a.md"] * 2 + [f"memfs://{ms}/b.md"]
    assert asked == [ms, ms]


async def test_a_subscription_made_with_the_store_name_is_ended_with_it(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    send, receive = anyio.create_memory_object_stream[Change](10)

    async def changes(store_id: str) -> AsyncIterator[Change]:
        async for c in receive:
            yield c

    heard = _Heard()
    async with send, receive, connected(Reach(store, changes=changes),
                                        message_handler=heard) as client:
        await client.subscribe_resource(AnyUrl("memfs://notes/a.md"))
        await client.subscribe_resource(AnyUrl(f"memfs://{ms}/b.md"))
        await client.unsubscribe_resource(AnyUrl("memfs://notes/a.md"))
        await send.send(Change(1, ms, "put", "mem_1", "/a.md", None))
        await send.send(Change(2, ms, "put", "mem_2", "/b.md", None))
        assert await heard.next() == f"memfs://{ms}/b.md"
        assert heard.uris == [f"memfs://{ms}/b.md"]


async def test_subscriptions_are_bounded(store: Store) -> None:
    ids = [store.stores.create(name=f"s{i}").id for i in range(STORES_FOLLOWED + 1)]

    async def changes(store_id: str) -> AsyncIterator[Change]:
        await anyio.sleep_forever()
        yield Change(0, store_id, "store", None, None, None)  # never

    async with connected(Reach(store, changes=changes)) as client:
        for sid in ids[:-1]:
            await client.subscribe_resource(AnyUrl(f"memfs://{sid}/a.md"))
        with pytest.raises(McpError) as raised:
            await client.subscribe_resource(AnyUrl(f"memfs://{ids[-1]}/a.md"))
        assert raised.value.error.message.startswith("invalid_request_error: ")
        assert "unsubscribe" in raised.value.error.message
        for i in range(SUBSCRIPTIONS - len(ids) + 1):
            await client.subscribe_resource(AnyUrl(f"memfs://{ids[0]}/m{i}.md"))
        await client.subscribe_resource(AnyUrl(f"memfs://{ids[0]}/m0.md"))  # again: no more
        with pytest.raises(McpError) as raised:
            await client.subscribe_resource(AnyUrl(f"memfs://{ids[0]}/one-more.md"))
        assert raised.value.error.message.startswith("invalid_request_error: ")
        await client.unsubscribe_resource(AnyUrl(f"memfs://{ids[1]}/a.md"))
        await client.subscribe_resource(AnyUrl(f"memfs://{ids[-1]}/a.md"))  # room again
