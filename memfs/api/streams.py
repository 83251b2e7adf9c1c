"""The live streams (SSE): one database poller for all the session event streams
(:class:`EventHub`) and one per store for all the change streams (:class:`ChangeHub`),
however many are open; the frames they send, and a stored key's or session token's stream
that ends with its grant (:class:`_GrantedStream`, on the app's one
:class:`~memfs.api.grants.GrantWatch`)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .. import errors
from ..backends import watch as dbwatch
from ..models import Change
from ..store import Store
from . import grants
from .grants import GrantWatch

if TYPE_CHECKING:
    from ..backends.pgwatch import PgWatch
    from .call import Call

log = logging.getLogger("memfs.api")  # the API's one logger, whichever module logs


#: Seconds between two looks at the database by the poller shared by all session event
#: streams, and between a stream's keepalive pings.
STREAM_POLL_SECONDS = 0.1
STREAM_PING_SECONDS = 15.0
#: Seconds between two looks at the stored keys and session tokens of the open streams (the
#: app's :class:`~memfs.api.grants.GrantWatch`, :class:`_GrantedStream`): the longest a stream
#: outlives its revocation, but for the look (issue 22: a revoked key's streams end within
#: 1 s, on every replica).
GRANT_RECHECK_SECONDS = 0.5


#: Event types after which a session's stream ends (API.md §4.6).
STREAM_END_TYPES = ("session.deleted", "session.status_terminated")


#: Seconds between two looks at the database by a store's shared change-feed poller, and
#: between keepalive pings on a change stream (short: a mount notices a dead link early).
CHANGES_POLL_SECONDS = 0.05
CHANGES_PING_SECONDS = 5.0
#: Change frames a store's feed keeps for subscribers that fall a little behind.
CHANGES_KEPT = 2000
#: Seconds between two tries of a stream's poll while the database cannot be reached (the
#: stream keeps its pings going meanwhile, and goes on when the database is back).
OUTAGE_RETRY_SECONDS = 1.0


def grant_watch(store: Store) -> GrantWatch:
    """The app's one watch of the credentials of its open streams, looking every
    :data:`GRANT_RECHECK_SECONDS`."""
    return GrantWatch(store, GRANT_RECHECK_SECONDS)


def sse_response(c: Call, frames: AsyncIterator[bytes]) -> StreamingResponse:
    """A live SSE response: not cached, not buffered by a proxy (nginx reads
    ``x-accel-buffering``); under a stored key or a session token, only while it is valid."""
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    if c.grant.server:  # the server's own keys live as long as the server
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
    kind = grants.SESSION_TOKEN if c.grant.session_id is not None else grants.KEY
    return _GrantedStream(frames, c.grants, (kind, c.grant.key_id),
                          media_type="text/event-stream", headers=headers)


class _GrantedStream(StreamingResponse):
    """A stream opened with a stored key or a session token. The credential was checked when
    the request came in, and a stream is one request that lasts: it is held by its credential
    on the app's :class:`~memfs.api.grants.GrantWatch`, which looks at the credentials of all open
    streams every :data:`GRANT_RECHECK_SECONDS` in one query per kind, and the stream ends
    (cleanly: its last body message) once its credential is refused (revoked, expired, its
    session stopped running). A database that cannot answer the look ends no stream."""

    def __init__(self, frames: AsyncIterator[bytes], watch: GrantWatch,
                 credential: grants.Credential, **kwargs: Any) -> None:
        super().__init__(frames, **kwargs)
        self.watch, self.credential = watch, credential

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        revoked = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal revoked
                why = await self.watch.until_refused(self.credential)
                log.info("a stream ends: %s", why)
                revoked = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                await super().__call__(scope, receive, send)
            finally:
                tg.cancel_scope.cancel()
                # Cut off while suspended at a yield, the frames would be closed only when
                # collected: their subscriber counts and hub marks are released now.
                close = getattr(self.body_iterator, "aclose", None)
                if close is not None:
                    with anyio.CancelScope(shield=True):
                        await close()
        if revoked:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def sse_frame(event: str, data: Any, id_: str | None = None) -> bytes:
    """One SSE frame; every frame names its event (the SDK drops frames without one)."""
    lines = [f"event: {event}"]
    if id_ is not None:
        lines.append(f"id: {id_}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


class _Outage:
    """What the live streams of one hub say when the database cannot be reached: one warning
    when the first poll fails, one line when one succeeds again, nothing in between (the
    streams wait, pinging, and try again every :data:`OUTAGE_RETRY_SECONDS`)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None

    def failed(self, e: errors.MemfsError) -> None:
        if self.since is None:
            self.since = anyio.current_time()
            log.warning("%s wait: the database cannot be reached (%s); trying again every "
                        "%g s", self.what, e.message, OUTAGE_RETRY_SECONDS)

    def answered(self) -> None:
        if self.since is not None:
            log.info("%s go on: the database answers again after %.1f s", self.what,
                     anyio.current_time() - self.since)
            self.since = None


#: The errors of a database that cannot answer now (a restart, a failover, a full pool): a
#: live stream waits them out instead of failing.
_UNAVAILABLE = (errors.StorageError, errors.Busy)


class EventHub:
    """Serves session event streams with one database poller for all of them: each poll asks
    :meth:`Store.events.marks` for the newest event of every followed session (per session:
    on PostgreSQL sessions' events commit out of order across sessions, issue 44), and wakes
    only the streams of those that moved.
    One of the streams is the poller (no background task outlives the streams); when it ends,
    another takes over. An idle stream sleeps until its session has news or its keepalive ping
    is due. Events written by any process (the CLI, a mount) are seen: the database is what is
    polled."""

    def __init__(self, store: Store, interval: float = STREAM_POLL_SECONDS,
                 ping: float = STREAM_PING_SECONDS) -> None:
        self.store = store
        self.interval = interval
        self.ping = ping
        #: A poll answered since the hub was last idle (every stream reads once after it).
        self.polled = False
        #: Newest event seq per followed session, as of the last poll.
        self.marks: dict[str, int] = {}
        self.subscribers: dict[str, int] = {}
        #: Set (and dropped) when a poll finds news for the session.
        self._wake: dict[str, anyio.Event] = {}
        self._poller: object | None = None
        self.next_poll = 0.0
        #: Database polls made, for tests and statistics.
        self.polls = 0
        self.outage = _Outage("session event streams")

    def statistics(self) -> dict[str, int]:
        return {"sessions": len(self.subscribers), "polls": self.polls,
                "subscribers": sum(self.subscribers.values())}

    async def stream(self, session_id: str, after: int) -> AsyncIterator[bytes]:
        """SSE frames of the events processed after ``after``, until the session ends; a
        ``ping`` first and after every :attr:`ping` seconds of silence, so that proxies do not
        close an idle stream."""
        me = object()
        self.subscribers[session_id] = self.subscribers.get(session_id, 0) + 1
        try:
            yield sse_frame("ping", {"type": "ping"})
            quiet_since = anyio.current_time()
            read_to: int | None = None  # the hub mark this stream has read the database to
            retry_at = 0.0  # a read the database could not answer is tried again then
            while True:
                if self._poller is None:
                    self._poller = me
                mark = self.marks.get(session_id, 0)
                # Once after the hub's first poll (events older than its position), then
                # whenever a poll saw new events of this session.
                if self.polled and (read_to is None or mark > read_to) and (
                        anyio.current_time() >= retry_at):
                    try:
                        batch = await anyio.to_thread.run_sync(
                            self.store.events.after, session_id, after)
                    except _UNAVAILABLE as e:  # wait (pinging) and read again
                        self.outage.failed(e)
                        retry_at = anyio.current_time() + OUTAGE_RETRY_SECONDS
                    else:
                        for after, event in batch:  # noqa: B007 (where the next read starts)
                            yield sse_frame(event.type, event.to_dict(), event.id)
                            if event.type in STREAM_END_TYPES:
                                return
                        if batch:
                            quiet_since = anyio.current_time()
                            continue  # read again until the database has no more
                        read_to = mark
                        continue
                now = anyio.current_time()
                if now - quiet_since >= self.ping:
                    yield sse_frame("ping", {"type": "ping"})
                    quiet_since = now
                    continue  # look again: the consumer may have taken its time
                polling = self._poller is me
                if polling and now >= self.next_poll:
                    await self._poll()
                    continue
                # No await since the checks above: no news can slip in before the wait.
                wake = self._wake.setdefault(session_id, anyio.Event())
                timeout = quiet_since + self.ping - now
                if polling:
                    timeout = min(timeout, self.next_poll - now)
                if retry_at > now:
                    timeout = min(timeout, retry_at - now)
                with anyio.move_on_after(timeout):
                    await wake.wait()
        finally:
            self.subscribers[session_id] -= 1
            if not self.subscribers[session_id]:
                del self.subscribers[session_id]
                self.marks.pop(session_id, None)
            if self._poller is me:
                self._poller = None
                self._wake_all()  # one of them takes over
            if not self.subscribers:
                self.polled = False  # nobody follows: the next stream starts from the present

    async def _poll(self) -> None:
        """Ask the database which followed sessions have news; one that cannot answer is
        asked again in :data:`OUTAGE_RETRY_SECONDS`, the streams pinging meanwhile."""
        wait = self.interval
        try:
            self.polls += 1
            first = not self.polled
            try:
                marks = await anyio.to_thread.run_sync(self.store.events.marks,
                                                       list(self.subscribers))
            except _UNAVAILABLE as e:
                self.outage.failed(e)
                wait = OUTAGE_RETRY_SECONDS
                return
            self.outage.answered()
            self.polled = True
            for session_id, seq in marks.items():
                if session_id in self.subscribers and seq > self.marks.get(session_id, 0):
                    self.marks[session_id] = seq
                    wake = self._wake.pop(session_id, None)
                    if wake is not None:
                        wake.set()
            if first:
                self._wake_all()  # every stream reads what came before the hub's position
        finally:
            self.next_poll = anyio.current_time() + wait

    def _wake_all(self) -> None:
        wakes, self._wake = self._wake, {}
        for wake in wakes.values():
            wake.set()


def change_frames(
    store: Store, store_id: str, after: int, limit: int = 1000
) -> list[dict[str, Any]]:
    """The store's changes after ``after`` as wire objects; a ``put`` carries ``memory``, the
    memory as it is now (basic view; None once deleted), so that a mount needs no other
    request to apply it."""
    out = []
    memories: dict[str, dict[str, Any] | None] = {}
    for ch in store.feed.since(store_id, after, limit):
        frame: dict[str, Any] = {"type": "memfs.change", "seq": ch.seq, "op": ch.op,
                                 "memory_id": ch.memory_id, "path": ch.path,
                                 "old_path": ch.old_path}
        if ch.op == "put" and ch.memory_id is not None:
            if ch.memory_id not in memories:
                try:
                    memories[ch.memory_id] = store.memories.get(
                        store_id, ch.memory_id, view="basic").to_dict()
                except errors.NotFound:
                    memories[ch.memory_id] = None
            frame["memory"] = memories[ch.memory_id]
        out.append(frame)
    return out


@dataclass(eq=False)
class _Feed:
    """The shared view of one store's change feed: every change after ``base`` up to ``seq``
    is in ``recent``; ``tick`` is set (and replaced) after every poll."""

    seq: int
    base: int
    recent: deque[dict[str, Any]]
    tick: anyio.Event
    polling: bool = False
    next_poll: float = 0.0
    subscribers: int = 0
    #: A subscriber waits on the database watch for the feed; the watch's count it last saw.
    watching: bool = False
    seen: int = 0
    #: The watch narrowed to the feed's store (PostgreSQL tells stores apart; inotify not).
    watch: dbwatch.Watch | None = None
    #: Delays of the quick looks again after a wake-up whose poll found nothing new.
    rechecks: list[float] = dataclasses.field(default_factory=list)


class ChangeHub:
    """Serves change streams with one database poller per store, however many subscribers:
    whichever subscriber finds the poll due runs it (so no background task outlives its
    streams), and the others wait for its ``tick``. A subscriber too far behind for
    ``recent`` reads the database itself.

    With a ``watch`` of the database (:mod:`memfs.backends.watch`, on trio), one subscriber per
    feed sleeps until the database changes and then polls at once; the poll is due every
    ``safety`` seconds otherwise (for what inotify misses), instead of every ``interval``.
    ``watch_db`` takes the process's watch of the store's database while any stream is
    open (an inotify instance is a scarce per-user resource: an app that streams nothing
    holds none).
    """

    #: After a wake-up whose poll found nothing, look again after these delays (the WAL
    #: write that woke us precedes the commit becoming visible; see ChangeWatcher).
    rechecks = (0.003, 0.015, 0.06)

    def __init__(self, store: Store, interval: float = CHANGES_POLL_SECONDS,
                 ping: float = CHANGES_PING_SECONDS, keep: int = CHANGES_KEPT,
                 watch: dbwatch.DbWatch | PgWatch | None = None, safety: float = 2.0,
                 watch_db: bool = False) -> None:
        self.store = store
        self.interval = interval
        self.ping = ping
        self.keep = keep
        self.watch = watch
        self.safety = safety
        self.watch_db = watch_db
        self._owned = False
        self._feeds: dict[str, _Feed] = {}
        #: Database polls made, for tests and statistics.
        self.polls = 0
        self.outage = _Outage("change streams")

    def statistics(self) -> dict[str, int]:
        return {"feeds": len(self._feeds), "polls": self.polls,
                "subscribers": sum(f.subscribers for f in self._feeds.values())}

    async def stream(self, store_id: str, after: int, last: int) -> AsyncIterator[bytes]:
        """SSE frames: a ``ping`` at once, ``memfs.reset`` when ``after`` is past ``last`` (a
        position this database never had) or changes after it were pruned (the follower
        reloads and goes on from the reset's ``last_seq``), then one ``memfs.change`` per
        change after ``after`` (``id:`` its seq), and a ``ping`` every ``ping`` seconds of
        silence."""
        async with aclosing(self.frames(store_id, after, last)) as frames:
            async for event, data, id_ in frames:
                yield sse_frame(event, data, id_)

    async def changes(self, store_id: str) -> AsyncIterator[Change]:
        """The store's changes from now on, as this hub follows them (``/mcp``'s resource
        updates: :data:`memfs.mcp.reach.ChangeSource`); a reset (changes missed) is a
        ``store`` change: anything in the store may have changed."""
        last = await anyio.to_thread.run_sync(self.store.feed.last, store_id)
        async with aclosing(self.frames(store_id, last, last)) as frames:
            async for event, data, _ in frames:
                if event == "memfs.change":
                    yield Change(data["seq"], store_id, data["op"], data["memory_id"],
                                 data["path"], data["old_path"])
                elif event == "memfs.reset":
                    yield Change(data["last_seq"], store_id, "store", None, None, None)

    async def frames(self, store_id: str, after: int, last: int
                     ) -> AsyncGenerator[tuple[str, dict[str, Any], str | None]]:
        """What :meth:`stream` sends, as ``(event, data, id)``."""
        feed = self._feeds.get(store_id)
        if feed is None:
            feed = self._feeds[store_id] = _Feed(last, last, deque(), anyio.Event())
            if self.watch is None and self.watch_db:
                self.watch = dbwatch.acquire(self.store.path)
                self._owned = self.watch is not None
            if self.watch is not None:
                feed.watch = self.watch.narrow(store_id)
                feed.seen = feed.watch.changes
        feed.subscribers += 1
        try:
            yield "ping", {"type": "ping", "last_seq": last}, None
            if after > last:
                yield "memfs.reset", {"type": "memfs.reset", "last_seq": last}, None
                after = last
            quiet_since = anyio.current_time()
            while True:
                if after < feed.base:
                    # Behind what the feed keeps (or connected with an old position).
                    try:
                        frames = await anyio.to_thread.run_sync(
                            change_frames, self.store, store_id, after)
                    except errors.FeedGap:  # the database pruned what this one missed
                        try:
                            after = await anyio.to_thread.run_sync(
                                self.store.feed.last, store_id)
                        except _UNAVAILABLE as e:
                            self.outage.failed(e)
                            frames = []
                        else:
                            yield "memfs.reset", {"type": "memfs.reset",
                                                  "last_seq": after}, None
                            quiet_since = anyio.current_time()
                            continue
                    except _UNAVAILABLE as e:  # read again after the next poll, pinging
                        self.outage.failed(e)
                        frames = []
                elif after < feed.seq:
                    frames = [f for f in feed.recent if f["seq"] > after]
                else:  # caught up, the usual case at every tick: nothing to scan
                    frames = []
                for f in frames:
                    yield "memfs.change", f, str(f["seq"])
                    after = f["seq"]
                if frames:
                    quiet_since = anyio.current_time()
                    continue
                now = anyio.current_time()
                if now - quiet_since >= self.ping:
                    yield "ping", {"type": "ping", "last_seq": feed.seq}, None
                    quiet_since = now
                if not feed.polling and now >= feed.next_poll:
                    await self._poll(feed, store_id)
                    continue
                tick = feed.tick
                # Not while a poll is in flight: its deadline is past, the watch would end
                # at once and wake every subscriber, again and again (the loop would spin
                # until the poll ends); its end sets ``tick``.
                if self._watched() and not feed.watching and not feed.polling:
                    await self._watch_for(feed)
                    continue
                with anyio.move_on_after(max(feed.next_poll - now, 0.0) + self._every()):
                    await tick.wait()
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0 and self._feeds.get(store_id) is feed:
                del self._feeds[store_id]
                if not self._feeds and self._owned:
                    dbwatch.release(self.watch)
                    self.watch, self._owned = None, False

    def _watched(self) -> bool:
        """Whether the feeds wait on the database watch (it waits with trio)."""
        if self.watch is None:
            return False
        try:
            import sniffio
            return sniffio.current_async_library() == "trio"
        except Exception:
            return False

    def _every(self) -> float:
        return self.safety if self._watched() else self.interval

    async def _watch_for(self, feed: _Feed) -> None:
        """Sleep until the database changes (then the poll is due at once) or the poll is
        due anyway (``feed.next_poll``)."""
        assert self.watch is not None
        feed.watching = True
        seen = feed.seen
        try:
            with anyio.move_on_at(feed.next_poll):
                feed.seen = await (feed.watch or self.watch).wait(seen)
        finally:
            feed.watching = False
            if feed.seen != seen:
                feed.next_poll = 0.0
                feed.rechecks = list(self.rechecks)
            # Whether woken, timed out or cancelled (its client left): another subscriber
            # takes over the watching at once.
            tick, feed.tick = feed.tick, anyio.Event()
            tick.set()

    async def _poll(self, feed: _Feed, store_id: str) -> None:
        """Bring ``feed`` up to the database's newest change. A database that cannot answer
        leaves the feed as it is, the next poll due in :data:`OUTAGE_RETRY_SECONDS`."""
        feed.polling = True
        found = failed = False
        try:
            self.polls += 1
            try:
                last = await anyio.to_thread.run_sync(self.store.feed.last, store_id)
            except _UNAVAILABLE as e:
                self.outage.failed(e)
                failed = True
                return
            found = last > feed.seq
            while last > feed.seq:
                try:
                    frames = await anyio.to_thread.run_sync(
                        change_frames, self.store, store_id, feed.seq)
                except errors.FeedGap:
                    # Pruned past this feed's own position (no poll for a day): start again
                    # at ``last``; subscribers behind it read the database and are reset.
                    feed.recent.clear()
                    feed.base = feed.seq = last
                    break
                except _UNAVAILABLE as e:  # what was read so far is kept
                    self.outage.failed(e)
                    failed = True
                    return
                if not frames:
                    break
                feed.recent.extend(frames)
                feed.seq = frames[-1]["seq"]
                while len(feed.recent) > self.keep:
                    feed.base = feed.recent.popleft()["seq"]
            self.outage.answered()
        finally:
            feed.polling = False
            if found or failed:
                feed.rechecks = []
            wait = OUTAGE_RETRY_SECONDS if failed else (
                feed.rechecks.pop(0) if feed.rechecks else self._every())
            feed.next_poll = anyio.current_time() + wait
            tick, feed.tick = feed.tick, anyio.Event()
            tick.set()
