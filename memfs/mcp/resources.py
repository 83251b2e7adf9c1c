"""Each memory as an MCP resource, ``memfs://<store id>/<path>`` (the store's id, since names
change and hold spaces; the path percent-encoded as a URI's): listed in pages over every
store of the reach, read as text, and subscribed to (:class:`Subscriptions`): a subscriber
gets ``notifications/resources/updated`` when the memory changes, whoever changed it (a
mount, the API, another MCP client), from the store's change feed.

Where the changes come from is pluggable (:data:`memfs.mcp.reach.ChangeSource`): by default
:func:`poll_feed` reads the store's feed every :data:`POLL_SECONDS`; a server that follows the
feeds already hands in its own (``Reach.changes``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import anyio

from .. import errors
from ..models import Change, Memory, MemoryPrefix, Page
from ..toolkit import Call
from .reach import ChangeSource, Reach, StoreView

log = logging.getLogger(__name__)

SCHEME = "memfs"
#: Resources a resources/list page gives at most, and the stores it looks into at most.
PAGE_ITEMS = 100
STORES_PER_PAGE = 20
#: How often the default change source reads a store's feed (seconds).
POLL_SECONDS = 0.5
#: Changes read from a feed at once.
FEED_BATCH = 1000
#: The memories one MCP session may be subscribed to at once, and the stores whose changes
#: it may have followed at once (each a task, and a poll of the feed without a hub).
SUBSCRIPTIONS = 1000
STORES_FOLLOWED = 32


def uri_of(store_id: str, path: str) -> str:
    """The URI of the memory at ``path`` in ``store_id``."""
    return f"{SCHEME}://{store_id}{quote(path, safe='/')}"


def parse(uri: Any) -> tuple[str, str]:
    """``(store id, path)`` of a memory's URI.

    :raises InvalidRequest: not a ``memfs://<store id>/<path>`` URI."""
    parts = urlsplit(str(uri))
    path = unquote(parts.path)
    if parts.scheme != SCHEME or not parts.netloc or not path.startswith("/") or path == "/" \
            or parts.query or parts.fragment:
        raise errors.InvalidRequest(
            f"not a memory's URI: {str(uri)[:200]!r} (memfs://<store id>/<path>, as "
            "resources/list gives them)")
    return parts.netloc, path


def mime_type(path: str) -> str:
    return "text/markdown" if path.endswith((".md", ".markdown")) else "text/plain"


# -- list and read -----------------------------------------------------------------------------


def _cursor(batch: str | None, store_id: str | None, page: str | None) -> str:
    return base64.urlsafe_b64encode(json.dumps([batch, store_id, page]).encode()).decode()


def _position(cursor: str | None) -> tuple[str | None, str | None, str | None]:
    """``(the page of the store listing the walk is in, the store id it is at in it, that
    store's page of memories)`` of a cursor (all None: the start)."""
    if not cursor:
        return None, None, None
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error, TypeError):
        raise errors.InvalidCursor("invalid cursor") from None
    if not (isinstance(position, list) and len(position) == 3
            and all(p is None or isinstance(p, str) for p in position)):
        raise errors.InvalidCursor("invalid cursor")
    return position[0], position[1], position[2]


def _stores(reach: Reach, batch: str | None
            ) -> Generator[Call, Any, tuple[list[StoreView], str | None]]:
    """A page of the stores of the reach (:data:`STORES_PER_PAGE`), newest first (greater
    ids first: they sort in creation order), and the next page."""
    stores, after = yield from reach.visible(batch, limit=STORES_PER_PAGE)
    return sorted(stores, key=lambda s: s.id, reverse=True), after


def list_page(reach: Reach, cursor: str | None
              ) -> Generator[Call, Any, tuple[list[dict[str, Any]], str | None]]:
    """A page of resources: ``(resources, next cursor)``; the stores newest first, as the
    store lists them, each store's memories in path order. A page looks into
    :data:`STORES_PER_PAGE` stores at most (it may hold fewer than :data:`PAGE_ITEMS`
    resources, and still have a next cursor) and lists the stores a page of them at a time:
    its cost does not grow with the number of stores. The cursor names the page of the
    store listing and the store it stopped in (not a position in a list), so that a store
    deleted meanwhile is passed over and the others are neither repeated nor skipped; a
    store made meanwhile is newer than where the listing began: the next listing has it."""
    batch, at, page = _position(cursor)
    stores, after = yield from _stores(reach, batch)
    index = 0 if at is None else next((i for i, s in enumerate(stores) if s.id <= at),
                                      len(stores))
    if index < len(stores) and stores[index].id != at:
        page = None  # the store it stopped in is gone: the next one from its start
    found: list[dict[str, Any]] = []
    looked = 0
    while len(found) < PAGE_ITEMS:
        if index >= len(stores):
            if after is None:
                return found, None
            if looked >= STORES_PER_PAGE:
                return found, _cursor(after, None, None)
            batch = after
            stores, after = yield from _stores(reach, batch)
            index, page = 0, None
            continue
        if looked >= STORES_PER_PAGE:
            break
        s = stores[index]
        looked += 1
        try:
            listed: Page[Memory | MemoryPrefix] = yield Call("memories.list", (s.id,), {
                "depth": 0, "limit": PAGE_ITEMS - len(found), "page": page})
        except errors.NotFound:  # deleted meanwhile
            listed = Page([], None)
        for m in listed.data:
            if isinstance(m, Memory):
                found.append({"uri": uri_of(s.id, m.path), "name": m.path,
                              "title": f"{m.path} in {s.name or s.id}",
                              "mimeType": mime_type(m.path), "size": m.content_size_bytes})
        if listed.next_page:
            page = listed.next_page
        else:
            index, page = index + 1, None
    if index >= len(stores):
        return found, None if after is None else _cursor(after, None, None)
    return found, _cursor(batch, stores[index].id, page)


def read(reach: Reach, uri: Any) -> Generator[Call, Any, tuple[str, str]]:
    """``(content, mime type)`` of a memory's URI.

    :raises NotFound: no such memory, or a store outside the reach."""
    store_id, path = parse(uri)
    store = yield from reach.store_of(store_id)
    m: Memory = yield Call("memories.get_by_path", (store.id, path))
    return m.content or "", mime_type(path)


# -- changes -----------------------------------------------------------------------------------


def poll_feed(reach: Reach, seconds: float = POLL_SECONDS) -> ChangeSource:
    """The default change source: each store's feed, read every ``seconds`` from where it
    was when it was asked. A feed that no longer holds that position (pruned) is a change of
    everything (a ``store`` change). A read that fails (a busy database) is tried again at
    the next tick; a store that is gone (or out of the reach) ends it (NotFound)."""

    async def position(store_id: str) -> int:
        while True:
            try:
                last: int = await reach.run(_one(Call("feed.last", (store_id,))))
                return last
            except errors.NotFound:
                raise
            except errors.MemfsError as e:
                log.warning("could not read the change feed of %s: %s", store_id, e.message)
                await anyio.sleep(seconds)

    async def changes(store_id: str) -> AsyncIterator[Change]:
        last = await position(store_id)
        while True:
            await anyio.sleep(seconds)
            try:
                got: list[Change] = await reach.run(
                    _one(Call("feed.since", (store_id, last, FEED_BATCH))))
            except errors.FeedGap:
                last = await position(store_id)
                yield Change(last, store_id, "store", None, None, None)
                continue
            except errors.NotFound:
                raise
            except errors.MemfsError as e:  # said; tried again at the next tick
                log.warning("could not read the change feed of %s: %s", store_id, e.message)
                continue
            for c in got:
                last = max(last, c.seq)
                yield c

    return changes


def _one(call: Call) -> Generator[Call, Any, Any]:
    return (yield call)


#: A follower whose source failed asks it again after this many seconds, twice as long
#: after each failure in a row, up to :data:`RETRY_MOST_SECONDS`.
RETRY_SECONDS = 0.5
RETRY_MOST_SECONDS = 30.0


@dataclass
class Subscriptions:
    """One MCP session's subscriptions: the URIs of each store, and a task per store that
    follows its changes and tells the session of each subscribed memory that changed. Both
    are bounded (:data:`SUBSCRIPTIONS`, :data:`STORES_FOLLOWED`)."""

    tasks: anyio.abc.TaskGroup
    notify: Callable[[str], Any] | None = None
    uris: dict[str, set[str]] = field(default_factory=dict)
    _scopes: dict[str, anyio.CancelScope] = field(default_factory=dict)

    def add(self, store_id: str, uri: str, notify: Callable[[str], Any],
            source: ChangeSource) -> None:
        """Subscribe to ``uri``: ``notify(uri)`` when it changes, the changes of its store
        followed from ``source`` (asked at the store's first subscription, and again if
        following it failed: the reach of that request's credential).

        :raises InvalidRequest: the session has as many subscriptions, or follows as many
            stores, as it may."""
        mine = self.uris.get(store_id, set())
        if uri not in mine:
            if sum(len(u) for u in self.uris.values()) >= SUBSCRIPTIONS:
                raise errors.InvalidRequest(
                    f"at most {SUBSCRIPTIONS} subscriptions at once: unsubscribe from some "
                    "first")
            if not mine and len(self.uris) >= STORES_FOLLOWED:
                raise errors.InvalidRequest(
                    f"subscriptions in at most {STORES_FOLLOWED} stores at once: unsubscribe "
                    "from another store's memories first")
        self.notify = notify
        self.uris.setdefault(store_id, set()).add(uri)
        if store_id not in self._scopes:
            scope = anyio.CancelScope()
            self._scopes[store_id] = scope
            self.tasks.start_soon(self._follow, store_id, scope, source)

    def remove(self, store_id: str, uri: str) -> None:
        uris = self.uris.get(store_id, set())
        uris.discard(uri)
        if not uris:
            self.uris.pop(store_id, None)
            scope = self._scopes.pop(store_id, None)
            if scope is not None:
                scope.cancel()

    async def _follow(self, store_id: str, scope: anyio.CancelScope,
                      source: ChangeSource) -> None:
        """Follow a store's changes until no subscription needs them: a source that fails
        (a MemfsError) is asked again after a pause, and every subscription of the store is
        told first (what changed while it could not follow is not known); one that ends, or
        a bug, ends the following, and the next subscription to the store starts it again."""
        wait = RETRY_SECONDS
        try:
            with scope:
                resumed = False
                while await self._follow_once(store_id, source, resumed):
                    await anyio.sleep(wait)
                    wait = min(wait * 2, RETRY_MOST_SECONDS)
                    resumed = True
        finally:
            if self._scopes.get(store_id) is scope:
                del self._scopes[store_id]

    async def _follow_once(self, store_id: str, source: ChangeSource, resumed: bool) -> bool:
        """Follow ``source`` once (``resumed``: after a failure): whether to ask it again."""
        changes = source(store_id)
        try:
            if resumed:
                await self._tell(store_id, Change(0, store_id, "store", None, None, None))
            async for c in changes:
                await self._tell(store_id, c)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session's transport closed: its run ends
        except errors.NotFound as e:  # the store is gone, or out of the reach now
            log.info("stopped following the changes of %s: %s", store_id, e.message)
        except errors.MemfsError as e:
            log.warning("could not follow the changes of %s (trying again): %s", store_id,
                        e.message)
            return True
        except Exception:  # a bug: said, and the session goes on without updates
            log.exception("stopped following the changes of %s", store_id)
        finally:
            with contextlib.suppress(Exception):
                await changes.aclose()  # type: ignore[attr-defined]
        return False

    async def _tell(self, store_id: str, c: Change) -> None:
        subscribed = self.uris.get(store_id, set())
        if c.op == "store":  # the store itself changed, or what changed is not known
            hit = set(subscribed)
        elif c.op == "history":  # only versions (redacted, pruned): the memory is the same
            hit = set()
        else:
            hit = {u for p in (c.path, c.old_path) if p for u in [uri_of(store_id, p)]
                   if u in subscribed}
        for uri in sorted(hit):
            if self.notify is not None:
                await self.notify(uri)
