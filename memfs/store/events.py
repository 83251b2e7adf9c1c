"""Session events, the API's agents and environments, and acting as a session."""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..backends.scopes import session_scope, store_scope
from ..errors import Forbidden, InvalidCursor, InvalidRequest, NotFound, ReadOnly
from ..models import Actor, Event, Page
from ..rules import (
    DEFAULT_AROUND_CONTEXT,
    MAX_AROUND_CONTEXT,
    MAX_EVENTS_PAGE,
    check_limit,
    format_time,
    parse_time,
    validate_text,
)
from .base import Core, Part
from .common import (
    CLIENT_EVENT_TYPES,
    MAX_EVENT_CHARS,
    MAX_MESSAGE_BLOCKS,
    MAX_MESSAGE_CHARS,
    MAX_SEND_CHARS,
    MAX_SEND_EVENTS,
    MESSAGE_BLOCK_KEYS,
    MESSAGE_BLOCK_TYPES,
    MESSAGE_EVENT_TYPES,
    MESSAGE_SOURCE_KEYS,
    RESUMED_FROM_KEY,
    check_tool_events,
    complete_event,
)
from .paging import decode_cursor, encode_cursor
from .rows import event_from_row

if TYPE_CHECKING:
    from .sessions import Sessions
log = logging.getLogger(__name__)


class Events(Part):
    """The store's events (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, sessions: Sessions) -> None:
        super().__init__(core)
        self.sessions = sessions

    def add(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> list[Event]:
        """Append events (each a dict with at least ``type``); ``id`` and ``processed_at`` are
        filled in when missing. ``session_id`` None records a mount's events without a session.

        :raises NotFound: unknown session.
        """
        for e in events:
            if not isinstance(e, dict) or not isinstance(e.get("type"), str):
                raise InvalidRequest("every event needs a string 'type'")
            validate_text(e, "event")
        done = [complete_event(session_id, e) for e in events]
        self._insert_event_rows(
            session_id, store_id,
            [(e.id, session_id, store_id, e.type, e.processed_at, json.dumps(e.body))
             for e in done],
        )
        return done

    def _insert_event_rows(self, session_id: str | None, store_id: str | None,
                           values: Sequence[tuple[Any, ...]], *, late: bool = False) -> None:
        """Insert ``(id, session_id, store_id, type, processed_at, body)`` rows in one write
        (one executemany: a mount flushes hundreds of tool events at a time). ``late``: rows
        of a mount's tool events, stamped no earlier than :meth:`_late_floor` says."""
        with self.core.write(*event_scopes(session_id, store_id)) as c:
            if session_id is not None:
                self.sessions.session_in(c, session_id)
                floor = self._late_floor(c, session_id) if late else None
                if floor is not None:
                    values = [_stamped(v, floor) for v in values]
            c.executemany(
                "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                values,
            )

    def record_tool_events(
        self, session_id: str | None, rows: Sequence[tuple[str, str, str, str]], *,
        store_id: str | None = None,
    ) -> int:
        """Append tool events a mount of this process built itself, each as ``(id, type,
        processed_at, JSON body)`` (:func:`memfs.fuse.toolevents.tool_pair_rows`): the trusted
        counterpart of :meth:`add`, without its per-event checks, copies and encoding,
        for the event flusher's batches. What comes from outside (the API) goes through
        :meth:`add` and :meth:`add_tool_events`. A lone surrogate (which no memfs-built
        event should hold) is stored as ``?``. Returns how many were recorded.

        :raises NotFound: unknown session.
        """
        values = []
        for event_id, type_, processed_at, body in rows:
            if not body.isascii():
                try:
                    body.encode("utf-8")
                except UnicodeEncodeError:
                    body = body.encode("utf-8", "replace").decode("utf-8")
            values.append((event_id, session_id, store_id, type_, processed_at, body))
        self._insert_event_rows(session_id, store_id, values, late=True)
        return len(values)

    def _late_floor(self, c: Any, session_id: str) -> str | None:
        """The earliest time a mount's tool event of ``session_id`` is recorded at: once
        another session resumes it (:data:`RESUMED_FROM_KEY`; resuming needs it not to be
        running), the time of its newest event; else None (its mounts flush at their own
        pace, each event at the time it gave it, and the timeline follows those times).

        A mount's last flush may come after a resume has marked the session's history (its
        newest event and that one's time, :mod:`memfs.launcher.history`): stamped at its own
        earlier time, the event got under the mark and changed the block ``memfs session
        prompt`` makes again (review 43 #7). Refusing tool events of a session that is not
        running would lose what the mount did (and a session made through the API is idle
        while its mounts work); the event is recorded, after what the session had."""
        row = c.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None or row[0] == "running":
            return None
        # The metadata as its JSON text (no cast: PostgreSQL's jsonb would fail on a NUL
        # anywhere); a pattern that matches more only stamps more events late.
        resumed = c.execute(
            "SELECT 1 FROM sessions WHERE metadata LIKE ? LIMIT 1",
            (f'%"{RESUMED_FROM_KEY}":%"{session_id}"%',)).fetchone()
        if resumed is None:
            return None
        newest = c.execute("SELECT max(processed_at) FROM events WHERE session_id = ?",
                           (session_id,)).fetchone()
        return str(newest[0]) if newest and newest[0] is not None else None

    def list(
        self,
        session_id: str,
        *,
        types: Sequence[str] | None = None,
        order: str = "asc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        after_seq: int | None = None,
    ) -> Page[Event]:
        """Session events in time order (``processed_at``, ``asc`` by default; events of the
        same time in the order they were recorded). Not in ``seq`` order: each mount of a
        session records its own batches of tool events, so one store's batch is recorded after
        another's although its events happened in between."""
        limit = check_limit(limit, self.limits, maximum=MAX_EVENTS_PAGE)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'")
        self.core.run(self.sessions.session_in, session_id)
        where: builtins.list[str] = ["session_id = ?"]
        params: builtins.list[Any] = [session_id]
        if types:
            where.append(f"type IN ({','.join('?' * len(types))})")
            params += list(types)
        for op, value in (
            (">", created_at_gt),
            (">=", created_at_gte),
            ("<", created_at_lt),
            ("<=", created_at_lte),
        ):
            if value is not None:
                where.append(f"processed_at {op} ?")
                params.append(format_time(parse_time(value)))
        if after_seq is not None:
            where.append("seq > ?")
            params.append(after_seq)
        filters = ["events", order, list(params)]  # a copy: see list_stores
        if page:
            key = decode_cursor(page, "events", filters)
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
                    and isinstance(key[1], int) and not isinstance(key[1], bool)):
                raise InvalidCursor("invalid page cursor")
            op = ">" if order == "asc" else "<"
            where.append(f"(processed_at {op} ? OR (processed_at = ? AND seq {op} ?))")
            params += [key[0], key[0], key[1]]
        rows = self.core.all(
            f"SELECT * FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY processed_at {order.upper()}, seq {order.upper()} LIMIT ?",
            [*params, limit + 1],
        )
        items = [event_from_row(r) for r in rows[:limit]]
        next_page = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_page = encode_cursor("events", filters, [last["processed_at"], last["seq"]])
        return Page(items, next_page)

    def around(
        self, session_id: str, event_id: str, *, context: int = DEFAULT_AROUND_CONTEXT,
        types: Sequence[str] | None = None,
    ) -> builtins.list[Event]:
        """The event ``event_id`` of the session with up to ``context`` events before it and
        ``context`` after it, in time order (as :meth:`list` orders them): "the messages
        around a match". ``types`` narrows the events around it (``user.message``,
        ``agent.message``: the conversation without its tool calls); the event itself is
        always there, whatever its type.

        :raises InvalidRequest: ``context`` outside 0 to :data:`MAX_AROUND_CONTEXT`.
        :raises NotFound: unknown session, or no such event in it.
        """
        check_context(context)
        if not isinstance(event_id, str):
            raise InvalidRequest("an event id must be a string")
        with self.core.read() as c:
            self.sessions.session_in(c, session_id)
            row = c.execute("SELECT * FROM events WHERE session_id = ? AND id = ?",
                            (session_id, event_id)).fetchone()
            if row is None:
                raise NotFound(f"event {event_id[:80]!r} not found in session {session_id}")
            where = "session_id = ?"
            params: builtins.list[Any] = [session_id]
            if types:
                where += f" AND type IN ({','.join('?' * len(types))})"
                params += list(types)
            at, seq = row["processed_at"], row["seq"]
            before = c.execute(
                f"SELECT * FROM events WHERE {where} AND (processed_at < ? OR "
                "(processed_at = ? AND seq < ?)) ORDER BY processed_at DESC, seq DESC LIMIT ?",
                [*params, at, at, seq, context]).fetchall()
            after = c.execute(
                f"SELECT * FROM events WHERE {where} AND (processed_at > ? OR "
                "(processed_at = ? AND seq > ?)) ORDER BY processed_at, seq LIMIT ?",
                [*params, at, at, seq, context]).fetchall()
        return [event_from_row(r) for r in [*before[::-1], row, *after]]

    def last_seq(self, session_id: str) -> int:
        row = self.core.one("SELECT max(seq) FROM events WHERE session_id = ?", (session_id,))
        return int(row[0] or 0) if row else 0

    def after(self, session_id: str, seq: int, limit: int = 500) -> builtins.list[tuple[int,
                                                                                        Event]]:
        """Events of a session with a sequence number above ``seq`` (for live streams)."""
        rows = self.core.all(
            "SELECT * FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, seq, limit),
        )
        return [(r["seq"], event_from_row(r)) for r in rows]

    def marks(self, after: int | None) -> tuple[int, dict[str, int]]:
        """The newest event seq of the database and, per session with events above ``after``,
        its newest seq (``after`` None: the position only). One call serves every live event
        stream of a server (:class:`memfs.api.streams.EventHub`)."""
        with self.core.read() as c:
            last = int(c.execute("SELECT max(seq) FROM events").fetchone()[0] or 0)
            if after is None or last <= after:
                return last, {}
            rows = c.execute(
                "SELECT session_id, max(seq) FROM events WHERE seq > ? "
                "AND session_id IS NOT NULL GROUP BY session_id",
                (after,),
            ).fetchall()
        return last, {r[0]: int(r[1]) for r in rows}

    # -- API extras: agents, environments, resources, client events (API.md §4) -------------

    def send(self, session_id: str, events: Any, *,
             as_session: str | None = None) -> builtins.list[Event]:
        """Record events a client sends (API.md §4.1 ``events.send``): a non-empty list of at
        most :data:`MAX_SEND_EVENTS` objects whose ``type`` is one of
        :data:`CLIENT_EVENT_TYPES`; a message's blocks as the SDK types them, its text at most
        :data:`MAX_MESSAGE_CHARS`. All are checked before any is recorded: all or none. The
        store assigns ``id`` and ``processed_at`` (any the client sent are ignored).

        An ``agent.message`` is the session's own words (SPEC §9): only a caller acting as
        that session (``as_session``: a session token's session, the session a key acts as)
        may send it.

        :raises InvalidRequest: a bad list or event, or one over a limit (named).
        :raises Forbidden: an ``agent.message`` from a caller that does not act as the session.
        :raises NotFound: unknown session.
        """
        if not isinstance(events, list) or not events:
            raise InvalidRequest("events must be a non-empty list")
        if len(events) > MAX_SEND_EVENTS:
            raise InvalidRequest(f"too many events: {len(events)} in one request; the limit is "
                                 f"{MAX_SEND_EVENTS} (MAX_SEND_EVENTS): send them in several")
        clean = []
        total = 0
        for i, e in enumerate(events):
            if not isinstance(e, dict) or e.get("type") not in CLIENT_EVENT_TYPES:
                kind = e.get("type") if isinstance(e, dict) else e
                raise InvalidRequest(
                    f"cannot send an event of type {kind!r}; allowed: "
                    + ", ".join(CLIENT_EVENT_TYPES)
                )
            if e["type"] in MESSAGE_EVENT_TYPES:
                check_message(e, f"events[{i}]")
            body = {k: v for k, v in e.items() if k not in ("id", "processed_at")}
            total += check_event_size(body, f"events[{i}]")
            if total > MAX_SEND_CHARS:
                raise InvalidRequest(
                    f"these events take more than {MAX_SEND_CHARS} characters as JSON "
                    f"(MAX_SEND_CHARS) in one request: send them in several")
            clean.append(body)
        if as_session != session_id and any(e["type"] == "agent.message" for e in clean):
            who = ("this request acts as no session" if as_session is None
                   else f"this request acts as session {as_session}")
            raise Forbidden(
                f"an agent.message of session {session_id} is that session's own: send it with "
                f"the session's token, or with a key acting as the session "
                f"(x-memfs-session-id: {session_id}); {who}")
        return self.add(session_id, clean)

    # -- acting as a session: remote mounts (the memfs extension, README "Remote mounts") -------

    def session_writer(self, session_id: str, store_id: str) -> Actor:
        """The actor of a write to ``store_id`` made on behalf of ``session_id`` (a mount
        acting as its session through the API): ``session_actor``, once the session exists,
        is not terminated and has the store attached ``read_write``.

        :raises NotFound: unknown session.
        :raises ReadOnly: the session is terminated, or the store is not attached to it, or is
            attached ``read_only``.
        """
        session = self.sessions.get(session_id)
        if session.status == "terminated":
            raise ReadOnly(f"session {session_id} is terminated; it cannot write any more")
        res = next((r for r in session.resources if r.memory_store_id == store_id), None)
        if res is None:
            raise ReadOnly(f"memory store {store_id} is not attached to session {session_id}")
        if res.access != "read_write":
            raise ReadOnly(
                f"memory store {store_id} is attached read_only to session {session_id}"
            )
        return Actor.session(session_id)

    def add_tool_events(
        self, session_id: str | None, events: Any, *, store_id: str | None = None
    ) -> builtins.list[Event]:
        """Record a mount's tool events (SPEC §4): a non-empty list of
        :data:`TOOL_EVENT_TYPES` objects, each with the ``id`` (``sevt_…``) and
        ``processed_at`` the mount gave it (a result names its use by that id). Idempotent: an
        event whose id is already recorded is skipped, so a batch retried after a lost answer
        records nothing twice. ``session_id`` None records events of a mount without a session
        (under ``store_id``). Returns the events recorded now.

        :raises InvalidRequest: a bad list or event.
        :raises NotFound: unknown session or store.
        :raises ReadOnly: ``store_id`` is not attached to the session.
        """
        if not isinstance(events, list) or not events:
            raise InvalidRequest("events must be a non-empty list")
        check_tool_events(events)
        if session_id is not None:
            session = self.sessions.get(session_id)
            if store_id is not None and store_id not in {
                r.memory_store_id for r in session.resources
            }:
                raise ReadOnly(f"memory store {store_id} is not attached to session {session_id}")
        elif store_id is None:
            raise InvalidRequest("tool events need a session or a memory store")
        with self.core.write(*event_scopes(session_id, store_id)) as c:
            if store_id is not None:
                self.core.store_in(c, store_id)
            ids = [e["id"] for e in events]
            known = {
                r[0] for r in c.execute(
                    f"SELECT id FROM events WHERE id IN ({','.join('?' * len(ids))})", ids
                )
            }
            floor = self._late_floor(c, session_id) if session_id is not None else None
            fresh = []
            for e in events:
                if e["id"] not in known:
                    known.add(e["id"])
                    if floor is not None and str(e["processed_at"]) < floor:
                        e = {**e, "processed_at": floor}
                    fresh.append(self.sessions.insert_event(c, session_id, store_id, e))
            return fresh


def event_scopes(session_id: str | None, store_id: str | None) -> tuple[str, ...]:
    """What a write of events serialises on (:meth:`Core.write`): their session (its events
    stay in order), else the store they belong to, else every write."""
    if session_id is not None:
        return (session_scope(session_id),)
    return () if store_id is None else (store_scope(store_id),)


def _stamped(row: tuple[Any, ...], floor: str) -> tuple[Any, ...]:
    """A row of :meth:`Events._insert_event_rows` at ``floor`` when it was stamped earlier
    (its JSON body's ``processed_at`` too)."""
    event_id, session_id, store_id, kind, processed_at, body = row
    if processed_at >= floor:
        return row
    data = json.loads(body)
    data["processed_at"] = floor
    return (event_id, session_id, store_id, kind, floor, json.dumps(data, ensure_ascii=False))


def check_event_size(body: dict[str, Any], where: str) -> int:
    """The characters ``body`` takes as JSON (compact, non-ASCII unescaped), at most
    :data:`MAX_EVENT_CHARS`: what a reader of events holds is bounded, whatever they hold.

    :raises InvalidRequest: naming the event and the limit.
    """
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=repr))
    if size > MAX_EVENT_CHARS:
        raise InvalidRequest(f"{where}: an event of {size} characters as JSON is too large; "
                             f"the limit is {MAX_EVENT_CHARS} (MAX_EVENT_CHARS)")
    return size


def _check_keys(obj: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...],
                what: str, where: str, others: tuple[str, ...] = ()) -> None:
    """``obj`` holds ``type``, every key of ``required`` and maybe some of ``optional``
    (the values of those strings, an optional one may be null), and of ``others`` (checked
    by the caller), and no other key.

    :raises InvalidRequest: naming the key.
    """
    for k in obj:
        if k != "type" and k not in required and k not in optional and k not in others:
            raise InvalidRequest(f"{where}: {str(k)[:40]!r} is not a key of {what}")
    for k in required:
        if not isinstance(obj.get(k), str):
            raise InvalidRequest(f"{where}: {what} needs a string {k!r}")
    for k in optional:
        if obj.get(k) is not None and not isinstance(obj[k], str):
            raise InvalidRequest(f"{where}: {k!r} of {what} must be a string or null")


def check_message(event: dict[str, Any], where: str) -> None:
    """A ``user.message`` or ``agent.message`` as the SDK types it: ``type``, ``content``
    (and the ``id``/``processed_at`` the store replaces), a ``content`` list of at most
    :data:`MAX_MESSAGE_BLOCKS` blocks of :data:`MESSAGE_BLOCK_TYPES`, each with the keys
    :data:`MESSAGE_BLOCK_KEYS` gives it (a source's :data:`MESSAGE_SOURCE_KEYS`) and no other,
    its text at most :data:`MAX_MESSAGE_CHARS` in all.

    :raises InvalidRequest: naming the event (``where``) and the rule or the limit.
    """
    kind = event["type"]
    article = "an" if kind[0] in "aeiou" else "a"
    for k in event:
        if k not in ("type", "content", "id", "processed_at"):
            raise InvalidRequest(f"{where}: {str(k)[:40]!r} is not a key of {article} {kind}")
    content = event.get("content")
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}: a {kind} needs a 'content' list of blocks")
    if len(content) > MAX_MESSAGE_BLOCKS:
        raise InvalidRequest(f"{where}: a {kind} of {len(content)} blocks; the limit is "
                             f"{MAX_MESSAGE_BLOCKS} blocks (MAX_MESSAGE_BLOCKS)")
    allowed = MESSAGE_BLOCK_TYPES[kind]
    chars = 0
    for j, block in enumerate(content):
        btype = block.get("type") if isinstance(block, dict) else None
        if not isinstance(btype, str) or btype not in allowed:
            got = repr(btype)[:40] if isinstance(block, dict) else type(block).__name__
            raise InvalidRequest(f"{where}.content[{j}]: a {kind} holds blocks of type "
                                 + ", ".join(allowed) + f", not {got}")
        at = f"{where}.content[{j}]"
        if btype == "text" and not isinstance(block.get("text"), str):
            raise InvalidRequest(f"{at}: a text block needs a string 'text'")
        required, optional = MESSAGE_BLOCK_KEYS[btype]
        article = "an" if btype[0] in "aeiou" else "a"
        _check_keys(block, tuple(k for k in required if k != "source"), optional,
                    f"{article} {btype} block", at,
                    others=tuple(k for k in required if k == "source"))
        if btype == "text":
            chars += len(block["text"])
        if "source" in required:
            source = block.get("source")
            stype = source.get("type") if isinstance(source, dict) else None
            kinds = MESSAGE_SOURCE_KEYS[btype]
            if not isinstance(source, dict) or not isinstance(stype, str) or stype not in kinds:
                raise InvalidRequest(f"{at}: {article} {btype} block needs a 'source' of type "
                                     + ", ".join(kinds))
            _check_keys(source, kinds[stype], (), f"a {stype} source", f"{at}.source")
    if chars > MAX_MESSAGE_CHARS:
        raise InvalidRequest(f"{where}: a {kind} of {chars} characters is too long; the limit is "
                             f"{MAX_MESSAGE_CHARS} characters of text (MAX_MESSAGE_CHARS)")


def check_context(context: Any) -> int:
    """The number of events :meth:`Events.around` shows on each side.

    :raises InvalidRequest: not an integer from 0 to :data:`MAX_AROUND_CONTEXT`.
    """
    if isinstance(context, bool) or not isinstance(context, int) or not (
            0 <= context <= MAX_AROUND_CONTEXT):
        raise InvalidRequest(f"context must be an integer from 0 to {MAX_AROUND_CONTEXT} "
                             "(MAX_AROUND_CONTEXT): the events shown before and after")
    return context
