"""Where an MCP server's calls go and whom they act as (:class:`Reach`), and what the tools
ask of it: the stores it may see, with their access, a store looked up by id or name (one
outside the reach is the same not-found as an unknown one), and who writes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import errors
from ..models import Actor, Change, MemoryStore, Page, Session
from ..rules import local_user_actor
from ..toolkit import Call, drive_async

T = TypeVar("T")

#: The access of a store this reach may write, and of one it may only read.
READ_WRITE, READ_ONLY = "read_write", "read_only"
#: Stores asked for at once when every store the credential sees is listed.
STORES_PAGE = 100

#: The changes of one store from now on, as they come (an async iterator the server closes
#: when no subscription needs it any more): the pluggable source of resource updates. The
#: default (:func:`memfs.mcp.changes.poll_feed`) polls the store's change feed; a server that
#: follows the feeds already (memfs serve's ChangeHub) hands in its own.
ChangeSource = Callable[[str], AsyncIterator[Change]]


@dataclass(frozen=True)
class StoreView:
    """A store as a reach sees it."""

    id: str
    name: str
    description: str
    access: str
    #: The session's note of it (the attachment's instructions), if any.
    instructions: str | None = None
    #: general or workflow (a session's attachment; SPEC §8).
    scope: str = "general"
    archived: bool = False


@dataclass(frozen=True)
class Reach:
    """Where an MCP server's calls go and whom they act as.

    :param store: a sync StoreAPI (:class:`memfs.store.Store`, :class:`memfs.client.Client`):
        calls run in a worker thread; or a :class:`memfs.client.AsyncClient`: calls are
        awaited.
    :param session_id: writes are this session's (``session_actor``) and every tool call is
        an ``agent.tool_use`` / ``agent.tool_result`` pair of it. A client that acts as a
        session (a session token) is that session without it being said.
    :param actor: without a session, who writes (None: the local user on a Store; a server
        attributes to its credential for a client).
    :param stores: the store ids this server may see (None: a session's attachments, else
        every store the credential sees).
    :param tools: the names of the tools to offer (``--tools``; None: all).
    :param instructions: sent at initialize (None: worded from the stores, see
        :mod:`memfs.mcp.instructions`).
    :param access: store id -> ``read_write`` | ``read_only`` as the caller knows it (a key's
        scopes); a store it does not name is read_write, unless ``read_only``. A session's
        attachments say it for a session.
    :param read_only: nothing here may be written (a ``read_only`` key).
    :param changes: the source of resource updates (None: the store's change feed, polled).
    """

    store: Any
    session_id: str | None = None
    actor: Actor | None = None
    stores: tuple[str, ...] | None = None
    tools: frozenset[str] | None = None
    instructions: str | None = None
    access: Mapping[str, str] | None = None
    read_only: bool = False
    changes: ChangeSource | None = None

    @property
    def session(self) -> str | None:
        """The session the calls are of: the one given, or the one the client acts as."""
        return self.session_id or getattr(self.store, "session_id", None)

    @property
    def pages_stores(self) -> bool:
        """The stores are every store of the credential, paged by the store (else a
        session's or the ones named: one list)."""
        return self.session is None and self.stores is None

    @property
    def local(self) -> bool:
        """The store is a local database (it checks a session's right to write itself)."""
        return hasattr(getattr(self.store, "events", None), "session_writer")

    async def run(self, op: Generator[Call, Any, T]) -> T:
        """Make ``op``'s calls on the store (awaited, or in a worker thread)."""
        return await drive_async(self.store, op)

    # -- the stores --------------------------------------------------------------------------

    def _access(self, store_id: str, attached: str | None = None) -> str:
        if self.read_only:
            return READ_ONLY
        if self.access is not None and store_id in self.access:
            return self.access[store_id]
        return attached or READ_WRITE

    def _session(self) -> Generator[Call, Any, Session | None]:
        if self.session is None:
            return None
        session: Session = yield Call("sessions.get", (self.session,))
        return session

    def visible(self, page: str | None = None, limit: int = STORES_PAGE
                ) -> Generator[Call, Any, tuple[list[StoreView], str | None]]:
        """The stores this reach sees, a page of them: ``(stores, next page)``. A session's
        attachments, or the stores named, are one page; every store of the credential is
        paged as the store pages them."""
        session = yield from self._session()
        if session is not None:
            return [StoreView(r.memory_store_id, r.name, r.description,
                              self._access(r.memory_store_id, r.access), r.instructions,
                              r.memfs_scope)
                    for r in session.resources
                    if self.stores is None or r.memory_store_id in self.stores], None
        if self.stores is not None:
            found = []
            for store_id in self.stores:
                try:
                    ms: MemoryStore = yield Call("stores.get", (store_id,))
                except errors.NotFound:
                    continue
                found.append(self._view(ms))
            return found, None
        listed: Page[MemoryStore] = yield Call("stores.list", (), {"limit": limit,
                                                                   "page": page})
        return [self._view(ms) for ms in listed.data], listed.next_page

    def _view(self, ms: MemoryStore) -> StoreView:
        return StoreView(ms.id, ms.name, ms.description, self._access(ms.id),
                         archived=ms.archived_at is not None)

    def every_store(self) -> Generator[Call, Any, list[StoreView]]:
        """Every store this reach sees (all the pages)."""
        found, page = yield from self.visible()
        while page:
            more, page = yield from self.visible(page)
            found += more
        return found

    def writable(self) -> Generator[Call, Any, bool]:
        """Whether any store this reach sees may be written (else no write tool is offered).
        Every store of a credential is read_write unless said otherwise: one live store
        is enough to know."""
        if self.read_only:
            return False
        if self.session is None and self.stores is None and self.access is None:
            found, _ = yield from self.visible(limit=1)
        else:
            found = yield from self.every_store()
        return any(s.access == READ_WRITE and not s.archived for s in found)

    def store_of(self, ref: Any) -> Generator[Call, Any, StoreView]:
        """The store ``ref`` names (an id, or else an exact name) among those this reach sees.

        :raises NotFound: no such store, or one outside the reach (the same answer).
        :raises InvalidRequest: ``ref`` is no store reference, or a name two stores share.
        """
        if not isinstance(ref, str) or not ref:
            raise errors.InvalidRequest("store: give a store's id or name (memory_list_stores "
                                        "lists them)")
        missing = errors.NotFound(f"no memory store with id or name {ref!r}: "
                                  "memory_list_stores lists the stores you can use")
        session = yield from self._session()
        if session is not None or self.stores is not None:
            seen, _ = yield from self.visible()
            by_id = [s for s in seen if s.id == ref]
            named = by_id or [s for s in seen if s.name == ref]
            if not named:
                raise missing
            if len(named) > 1:
                raise errors.InvalidRequest(
                    f"{len(named)} memory stores are named {ref!r} "
                    f"({', '.join(s.id for s in named)}): give the id")
            return named[0]
        try:
            ms: MemoryStore = yield Call("stores.resolve", (ref,))
        except errors.NotFound:
            raise missing from None
        return self._view(ms)

    def writer(self, store: StoreView) -> Generator[Call, Any, Actor | None]:
        """Who writes to ``store``: the session (a local store checks that it has the store
        attached read_write and is running; a server checks it itself), else the actor
        given, else the local user on a database (None: a server attributes to its key).

        :raises ReadOnly: the store is read-only here.
        """
        if store.access != READ_WRITE:
            raise errors.ReadOnly(f"memory store {store.name or store.id} is read-only here")
        if self.session is not None:
            if self.local:
                actor: Actor = yield Call("events.session_writer", (self.session, store.id))
                return actor
            return Actor.session(self.session)
        if self.actor is not None:
            return self.actor
        if self.local:
            return local_user_actor()
        return None
