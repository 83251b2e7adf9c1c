"""Sessions, their resources and their tokens."""

from __future__ import annotations

import builtins
import json
import logging
import secrets
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..backends import Connection, Row
from ..backends.scopes import session_scope, store_scope
from ..errors import (
    Conflict,
    Forbidden,
    InvalidCursor,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    StoreArchived,
    Unauthorized,
    UnknownKey,
)
from ..models import (
    DEFAULT_WORKSPACE,
    SNAPSHOT_KEY,
    Event,
    Grant,
    Page,
    Session,
    SessionPinned,
    SessionResource,
    SessionToken,
)
from ..rules import (
    MAX_EVENTS_PAGE,
    SESSION_PINNED_BUDGET,
    check_limit,
    fit_pinned,
    format_time,
    new_id,
    parse_time,
    patch_metadata,
    slugify,
    validate_metadata,
    validate_pinned_budget,
    validate_session_resource,
    validate_text,
    validate_workspace,
)
from .base import Part
from .common import (
    SESSION_STATUSES,
    SESSION_TOKEN_PREFIX,
    UNSET,
    check_token_ttl,
    complete_event,
    id_chunks,
    key_refusal,
    no_session,
    no_store,
    only_ids,
    only_workspace,
    sha256_hex,
    utc_now,
)
from .paging import decode_cursor, encode_cursor
from .pinned import candidates_in, record_in, recorded_in
from .rows import session_from_row

log = logging.getLogger(__name__)


#: The columns :func:`_token_refusal` reads, of ``session_tokens t`` joined to its session
#: ``s`` and to the stored key ``k`` that minted it (:data:`_TOKEN_JOINS`), and whom a
#: grant of it is held by (:attr:`~memfs.models.Grant.owner`: the session's creator key).
_TOKEN_COLS = ("t.id, t.session_id, t.expires_at, t.revoked_at, t.key_id, s.status, "
               "s.workspace_id, s.created_by_key, k.id AS key_found, "
               "k.revoked_at AS key_revoked_at, k.expires_at AS key_expires_at")
_TOKEN_JOINS = ("session_tokens t JOIN sessions s ON s.id = t.session_id "
                "LEFT JOIN api_keys k ON k.id = t.key_id")


def _token_refusal(row: Row, now: str) -> str | None:
    """Why the session token of ``row`` (:data:`_TOKEN_COLS`) is refused at ``now``; None: it
    is not. A token minted with a stored key is refused once that key is (issue 38 S1: it
    never outlives the key)."""
    sid = row["session_id"]
    if row["revoked_at"] is not None or row["status"] == "terminated":
        return f"the session token of {sid} is no longer valid: the session ended"
    if row["status"] != "running":
        return (f"the session token of {sid} is valid only while the session runs (it is "
                f"{row['status']})")
    if row["expires_at"] <= now:
        return f"the session token of {sid} expired at {row['expires_at']}"
    key_id = row["key_id"]
    if key_id is not None:
        why = (f"API key {key_id} is gone" if row["key_found"] is None else
               key_refusal(key_id, row["key_revoked_at"], row["key_expires_at"], now))
        if why is not None:
            return f"the session token of {sid} is no longer valid: {why} (it made the token)"
    return None


def session_actor_refused(session_id: str) -> Forbidden:
    """The one refusal of a credential that may not act as ``session_id``, whether it exists
    or not (:meth:`Sessions.check_actor`)."""
    return Forbidden(f"this credential may not act as session {session_id} "
                     "(x-memfs-session-id): only a server key, the session's own token, or the "
                     "key that created the session may")


class Sessions(Part):
    """The store's sessions (a part of :class:`memfs.store.Store`)."""

    def create(
        self,
        resources: Sequence[dict[str, Any]],
        *,
        root: str = "/mnt/memory",
        agent: dict[str, Any] | None = None,
        environment_id: str | None = None,
        metadata: dict[str, str] | None = None,
        title: str | None = None,
        status: str = "idle",
        launcher: dict[str, Any] | None = None,
        workspace: str | None = None,
        created_by_key: str | None = None,
    ) -> Session:
        """Create a session with memory stores attached (SPEC §3, API.md §4.2).

        Each resource is ``{"type": "memory_store", "memory_store_id", "access"?,
        "instructions"?}``. Validated: at most ``max_session_stores``, each store exists and is
        not archived, no store twice, ``access`` read_write (default) or read_only,
        instructions of at most ``max_instructions_chars``, ``memfs_pinned_budget`` (the
        characters of pinned memories the store may put in the prompt, SPEC §9: 0 to the
        session's 16,000; default 4,000). The store's pinned memories that fit, and those
        listed as not fitting, are recorded in the same transaction (:mod:`.pinned`), so the
        prompt renders again as it was. ``name`` and ``description`` are
        snapshotted; ``mount_path`` is ``root/<slug>`` with ``-2``, ``-3``… on collisions.
        ``launcher`` identifies the local process that owns the session (opaque here; the
        launcher uses it to end sessions whose launcher died). ``workspace``: the session's,
        whose stores alone it may attach (another's is not found); None: its stores'
        workspace (they must share one), else the default. ``created_by_key``: the stored key
        that creates it (a server's: its launcher), which may then act as it
        (:meth:`check_actor`).

        :raises InvalidRequest, LimitExceeded, StoreArchived, NotFound:
        """
        lim = self.limits
        if not isinstance(resources, list | tuple):
            raise InvalidRequest("resources must be a list")
        validate_text(resources, "resources")
        mem = [r for r in resources if isinstance(r, dict) and r.get("type") == "memory_store"]
        if len(mem) != len(resources):
            raise InvalidRequest("only resources of type 'memory_store' are supported")
        if len(mem) > lim.max_session_stores:
            raise LimitExceeded(
                f"a session can attach at most {lim.max_session_stores} memory stores "
                f"({len(mem)} given)"
            )
        if metadata is not None:
            metadata = no_nul(validate_metadata(metadata, lim), "metadata")
        for what, value in (("title", title), ("environment_id", environment_id)):
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{what} must be a string")
            validate_text(value, what)
        validate_text(agent, "agent")
        validate_text(root, "the mount root")
        validate_text(launcher, "launcher")
        if status not in SESSION_STATUSES:
            raise InvalidRequest(f"invalid session status {status!r}")
        if (not isinstance(root, str) or not root.startswith("/") or len(root) > 512
                or any(unicodedata.category(ch) == "Cc" for ch in root)):  # fmt: skip
            raise InvalidRequest("the mount root must be an absolute path")
        root = root.rstrip("/")
        sid = new_id("sesn")
        now = utc_now()
        # The session, and the stores it attaches: none is deleted or archived meanwhile, and
        # their pinned memories are read as one commit of each left them.
        attached = [store_scope(r["memory_store_id"]) for r in mem
                    if isinstance(r.get("memory_store_id"), str)]
        with self.core.write(session_scope(sid), *attached) as c:
            seen: set[str] = set()
            used: set[str] = set()
            rows = []
            pinned: list[tuple[str, list[SessionPinned]]] = []
            more: dict[str, int] = {}
            left = SESSION_PINNED_BUDGET
            for pos, r in enumerate(mem):
                store_id, access, instructions, scope = validate_session_resource(r, lim)
                budget = validate_pinned_budget(r)
                if store_id in seen:
                    raise InvalidRequest(f"memory store {store_id} is attached twice")
                seen.add(store_id)
                store = self.core.store_in(c, store_id)
                owner = c.execute("SELECT workspace_id FROM stores WHERE id = ?",
                                  (store_id,)).fetchone()["workspace_id"]
                if workspace is None:
                    workspace = owner
                elif owner != workspace:
                    raise no_store(store_id)
                if store.archived_at is not None:
                    raise StoreArchived(
                        f"memory store {store_id} is archived and cannot be attached"
                    )
                base = slugify(store.name) or store.id
                slug, n = base, 1
                while slug in used:
                    n += 1
                    slug = f"{base}-{n}"
                used.add(slug)
                rid = new_id("sesrsc")
                if SNAPSHOT_KEY + store.id not in (metadata or {}):
                    # (A store attached as it was at a time has no pinned block: its
                    # memories then are not what this query sees.)
                    found, more[rid] = candidates_in(c, store.id, now)
                    entries, left = fit_pinned(found, budget, left)
                    pinned.append((rid, entries))
                rows.append(
                    (rid, sid, pos, store.id, access, instructions, store.name,
                     store.description, f"{root}/{slug}", scope, budget,
                     more.get(rid) or None)
                )
            c.execute(
                "INSERT INTO sessions (id, status, agent, environment_id, metadata, title, "
                "created_at, updated_at, launcher, workspace_id, created_by_key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    status,
                    json.dumps(agent) if agent is not None else None,
                    environment_id,
                    json.dumps(metadata or {}),
                    title,
                    now,
                    now,
                    json.dumps(launcher) if launcher is not None else None,
                    validate_workspace(workspace or DEFAULT_WORKSPACE),
                    created_by_key,
                ),
            )
            c.executemany(
                "INSERT INTO session_resources (id, session_id, position, memory_store_id, "
                "access, instructions, name, description, mount_path, scope, pinned_budget, "
                "pinned_more) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            for rid, entries in pinned:
                record_in(c, sid, rid, entries)
        return self.get(sid)

    def get(self, session_id: str) -> Session:
        """:raises NotFound:"""
        with self.core.read() as c:
            found = self._sessions_in(c, [session_id])
        if not found:
            raise no_session(session_id)
        return found[0]

    def _sessions_in(self, c: Connection, ids: Sequence[str]) -> list[Session]:
        """The sessions ``ids``, in that order, with their resources (two queries in all);
        an id with no session is left out."""
        if not ids:  # "IN ()" is SQLite's only
            return []
        marks = ",".join("?" * len(ids))
        rows = {
            r["id"]: r for r in c.execute(f"SELECT * FROM sessions WHERE id IN ({marks})", ids)
        }
        res: dict[str, list[Row]] = {}
        for r in c.execute(
            f"SELECT * FROM session_resources WHERE session_id IN ({marks}) "
            "ORDER BY session_id, position",
            ids,
        ):
            res.setdefault(r["session_id"], []).append(r)
        pinned = recorded_in(c, ids)
        return [session_from_row(rows[i], res.get(i, []), pinned) for i in ids if i in rows]

    def workspace_of(self, session_id: str) -> str:
        """The workspace of a session (a session resuming it is made in it:
        :mod:`memfs.launcher.resume`). :raises NotFound:"""
        return str(self.core.run(self.session_in, session_id)["workspace_id"])

    def session_in(self, c: Connection, session_id: str) -> Row:
        """The session's row. :raises NotFound:"""
        row: Row | None = c.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise no_session(session_id)
        return row

    def list(
        self,
        *,
        memory_store_id: str | None = None,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        order: str = "desc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        metadata: Mapping[str, str] | None = None,
        ids: Collection[str] | None = None,
        workspace: str | None = None,
    ) -> Page[Session]:
        """Sessions by id; ``ids``: only these (a session token sees its own session);
        ``workspace``: only that workspace's; ``metadata``: only those whose metadata holds
        every one of these pairs (a thread's sessions, a user's: issue 43), within the
        limits of a session's metadata."""
        limit = check_limit(limit, self.limits)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'")
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        only_ids(where, params, ids)
        only_workspace(where, params, workspace)
        if metadata:
            wanted = validate_metadata(metadata, self.limits, "the metadata filter")
            no_nul(wanted, "the metadata filter")
            if self.core.dialect == "postgresql":
                where.append("metadata::jsonb @> ?::jsonb")
                params.append(json.dumps(wanted, sort_keys=True))
            else:
                for pair in sorted(wanted.items()):
                    where.append("EXISTS (SELECT 1 FROM json_each(sessions.metadata) "
                                 "WHERE key = ? AND type = 'text' AND value = ?)")
                    params += pair
        if memory_store_id is not None:
            where.append(
                "id IN (SELECT session_id FROM session_resources WHERE memory_store_id = ?)"
            )
            params.append(memory_store_id)
        if statuses:
            for s in statuses:
                if s not in SESSION_STATUSES:
                    raise InvalidRequest(f"invalid session status {s!r}")
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params += list(statuses)
        if not include_archived:
            where.append("archived_at IS NULL")
        for op, value in (
            (">", created_at_gt),
            (">=", created_at_gte),
            ("<", created_at_lt),
            ("<=", created_at_lte),
        ):
            if value is not None:
                where.append(f"created_at {op} ?")
                params.append(format_time(parse_time(value)))
        filters = ["sessions", order, list(params)]  # a copy: see list_stores
        # Bidirectional cursors (the SDK's BidirectionalPageCursor): a next_page is the id of
        # the last item (resume after it), a prev_page is ["before", id of the first item].
        after = before = None
        if page:
            key = decode_cursor(page, "sessions", filters)
            if isinstance(key, str):
                after = key
            elif (isinstance(key, list) and len(key) == 2 and key[0] == "before"
                  and isinstance(key[1], str)):
                before = key[1]
            else:
                raise InvalidCursor("invalid page cursor")
        forward, backward = order.upper(), "ASC" if order == "desc" else "DESC"
        ahead, behind = ("<", ">") if order == "desc" else (">", "<")

        def page_ids(cond: str | None, anchor: str | None, sort: str, n: int) -> builtins.list[str]:
            conds = where + ([f"id {cond} ?"] if cond else [])
            sql = "SELECT id FROM sessions" + (" WHERE " + " AND ".join(conds) if conds else "")
            args = [*params, *([anchor] if cond else []), n]
            return [r["id"] for r in c.execute(sql + f" ORDER BY id {sort} LIMIT ?", args)]

        with self.core.read() as c:  # one snapshot: the page, its neighbours and their contents
            if before is None:
                found = page_ids(ahead if after else None, after, forward, limit + 1)
                more_ahead, found = len(found) > limit, found[:limit]
                more_behind = bool(found) and bool(page_ids(behind, found[0], backward, 1))
            else:
                found = page_ids(behind, before, backward, limit + 1)
                more_behind, found = len(found) > limit, found[:limit][::-1]
                more_ahead = bool(found) and bool(page_ids(ahead, found[-1], forward, 1))
            items = self._sessions_in(c, found)
        next_page = encode_cursor("sessions", filters, found[-1]) if more_ahead else None
        prev_page = (
            encode_cursor("sessions", filters, ["before", found[0]]) if more_behind else None
        )
        return Page(items, next_page, prev_page)

    def set_status(self, session_id: str, status: str) -> Session:
        """Move a session to ``status`` and record the matching ``session.status_*`` event.
        Terminated is final (issue 38 S1): its tokens are revoked, and a session set running
        again would take writes as a session that ended.

        :raises Conflict: a terminated session set to another status.
        """
        if status not in SESSION_STATUSES:
            raise InvalidRequest(f"invalid session status {status!r}")
        event_type = {
            "running": "session.status_running",
            "idle": "session.status_idle",
            "terminated": "session.status_terminated",
            "rescheduling": "session.status_rescheduled",
        }[status]
        extra: dict[str, Any] = {}
        if status == "idle":
            extra = {"stop_reason": {"type": "end_turn"}, "stop_details": None}
        with self.core.write(session_scope(session_id)) as c:
            row = self.session_in(c, session_id)
            if row["status"] == "terminated" and status != "terminated":
                raise Conflict(f"session {session_id} is terminated: it cannot be set "
                               f"{status} again (start a new session)")
            if row["status"] != status:
                c.execute(
                    "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?",
                    (status, utc_now(), session_id),
                )
                self.insert_event(c, session_id, None, {"type": event_type, **extra})
            if status == "terminated":
                c.execute("UPDATE session_tokens SET revoked_at = ? "
                          "WHERE session_id = ? AND revoked_at IS NULL", (utc_now(), session_id))
        return self.get(session_id)

    def launched(self) -> builtins.list[tuple[str, dict[str, Any]]]:
        """``(session_id, launcher)`` of every session not terminated that a local launcher
        owns (see :meth:`create_session`'s ``launcher``)."""
        rows = self.core.all(
            "SELECT id, launcher FROM sessions WHERE launcher IS NOT NULL "
            "AND status != 'terminated' ORDER BY id"
        )
        return [(r["id"], json.loads(r["launcher"])) for r in rows]

    def update(
        self, session_id: str, *, metadata: Any = UNSET, title: Any = UNSET
    ) -> Session:
        with self.core.write(session_scope(session_id)) as c:
            row = self.session_in(c, session_id)
            meta = json.loads(row["metadata"])
            if isinstance(metadata, dict):
                no_nul({k: v for k, v in metadata.items() if v is not None}, "metadata")
            new_meta = meta if metadata in (UNSET, None) else patch_metadata(
                meta, metadata, self.limits
            )
            new_title = row["title"] if title is UNSET else title
            if new_title is not None and not isinstance(new_title, str):
                raise InvalidRequest("title must be a string")
            validate_text(new_title, "title")
            if (new_meta, new_title) != (meta, row["title"]):
                c.execute(
                    "UPDATE sessions SET metadata = ?, title = ?, updated_at = ? WHERE id = ?",
                    (json.dumps(new_meta), new_title, utc_now(), session_id),
                )
        return self.get(session_id)

    def archive(self, session_id: str) -> Session:
        with self.core.write(session_scope(session_id)) as c:
            row = self.session_in(c, session_id)
            if row["archived_at"] is None:
                now = utc_now()
                c.execute(
                    "UPDATE sessions SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, session_id),
                )
        return self.get(session_id)

    def delete(self, session_id: str) -> None:
        with self.core.write(session_scope(session_id)) as c:
            self.session_in(c, session_id)
            self.insert_event(c, session_id, None, {"type": "session.deleted"})
            c.execute("DELETE FROM session_resources WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM session_pinned WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM session_tokens WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def get_resource(self, session_id: str, resource_id: str) -> SessionResource:
        """A resource by its ``sesrsc_`` id or by its ``memory_store_id``.

        :raises NotFound: unknown session, or no such resource in it.
        """
        for r in self.get(session_id).resources:
            if resource_id in (r.id, r.memory_store_id):
                return r
        raise NotFound(f"resource {resource_id!r} not found in session {session_id}")

    def check_actor(self, workspace: str, session_id: str, key_id: str) -> None:
        """May the stored key ``key_id`` (of ``workspace``) act as the session ``session_id``
        (``x-memfs-session-id``)? Only the key that created it may (its launcher's mount
        daemons send it): one look-up, and the same refusal whether the session exists or not
        (issue 38 S3: the header told any key whether a session existed).

        :raises Forbidden:
        """
        row = self.core.one("SELECT created_by_key FROM sessions WHERE id = ? AND workspace_id = ?",
                        (session_id, workspace))
        if row is None or row["created_by_key"] != key_id:
            raise session_actor_refused(session_id)

    # -- session tokens ----------------------------------------------------------------------

    def create_token(self, session_id: str, *, ttl_seconds: Any = None,
                             key_id: str | None = None) -> SessionToken:
        """Make a credential for the commands of a session (what ``memfs run`` hands its
        agent instead of a key): valid only for the session's attached stores with their
        access, only while the session is ``running``, and for ``ttl_seconds`` at most
        (default :data:`SESSION_TOKEN_TTL`, at most :data:`SESSION_TOKEN_MAX_TTL`). The
        secret is in the result this once; the store keeps its SHA-256 only.

        ``key_id``: the stored key that asks for it (None: a server key, or a local
        launcher). The token is tied to that key: it expires no later than the key, and is
        refused once the key is revoked or expired (issue 38 S1: a contractor's key, revoked,
        no longer lives on in the tokens it made).

        A stored key may make tokens only of the sessions it created.

        :raises NotFound: unknown session. :raises InvalidRequest: a terminated session, or
            a bad ``ttl_seconds``. :raises Unauthorized: ``key_id`` is revoked, expired or
            gone. :raises Forbidden: ``key_id`` did not create the session (or there is none).
        """
        ttl = check_token_ttl(ttl_seconds)
        secret = SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = new_id("sesstok")
        created = datetime.now(UTC)
        now, expires = format_time(created), format_time(created + timedelta(seconds=ttl))
        with self.core.write(session_scope(session_id)) as c:
            session = c.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if key_id is not None and (session is None or session["created_by_key"] != key_id):
                # Else any key of the workspace could act as any session by a token of its
                # own (issue 38 S3).
                raise Forbidden(f"this key may not make tokens of session {session_id}: "
                                "only a server key or the key that created the session may")
            if session is None:
                raise no_session(session_id)
            if session["status"] == "terminated":
                raise InvalidRequest(f"session {session_id} is terminated: no token can be "
                                     "made for it")
            if key_id is not None:
                key = c.execute("SELECT revoked_at, expires_at FROM api_keys WHERE id = ?",
                                (key_id,)).fetchone()
                why = (f"API key {key_id} is gone" if key is None else
                       key_refusal(key_id, key["revoked_at"], key["expires_at"], now))
                if why is not None:
                    raise Unauthorized(why)
                if key["expires_at"] is not None:
                    expires = min(expires, key["expires_at"])
            c.execute(
                "INSERT INTO session_tokens (id, session_id, token_sha256, created_at, "
                "expires_at, key_id) VALUES (?, ?, ?, ?, ?, ?)",
                (token_id, session_id, sha256_hex(secret.encode()), now, expires, key_id))
        return SessionToken(token_id, session_id, secret, now, expires)

    def grant(self, token: str) -> Grant:
        """What the session token ``token`` may do now.

        :raises Unauthorized: not a token of this store, revoked (its session ended),
            expired, its session is not running, or the stored key that made it is revoked
            or expired.
        """
        row = self.core.one(f"SELECT {_TOKEN_COLS} FROM {_TOKEN_JOINS} WHERE t.token_sha256 = ?",
                        (sha256_hex(token.encode()),))
        if row is None:
            raise UnknownKey("invalid session token: not a token of a session of this "
                               "server")
        sid = row["session_id"]
        why = _token_refusal(row, utc_now())
        if why is not None:
            raise Unauthorized(why)
        access = {r["memory_store_id"]: r["access"] for r in self.core.all(
            "SELECT memory_store_id, access FROM session_resources WHERE session_id = ?",
            (sid,))}
        return Grant(row["id"], row["workspace_id"], "read_write", access, sid,
                     f"session {sid}", row["expires_at"],
                     owner=row["created_by_key"] or row["key_id"] or sid)

    def refused_tokens(self, token_ids: Collection[str]) -> dict[str, str]:
        """Which of the session tokens ``token_ids`` (``sesstok_`` ids) are refused now, and
        why: revoked, expired, their session not running, gone with their session, or the
        stored key that made them refused. What
        the live streams opened with them ask again and again
        (:class:`memfs.api.grants.GrantWatch`), in one query however many streams and tokens (up
        to :data:`~memfs.store.common.IDS_PER_QUERY` tokens).

        :raises StorageError: the database could not tell.
        """
        refused: dict[str, str] = {}
        now = utc_now()
        for ids in id_chunks(token_ids):
            found = {r["id"]: r for r in self.core.all(
                f"SELECT {_TOKEN_COLS} FROM {_TOKEN_JOINS} "
                f"WHERE t.id IN ({','.join('?' * len(ids))})", ids)}
            for token_id in ids:
                row = found.get(token_id)
                why = (f"the session token {token_id} is no longer valid: its session was "
                       "deleted") if row is None else _token_refusal(row, now)
                if why is not None:
                    refused[token_id] = why
        return refused

    # -- events ------------------------------------------------------------------------------

    def insert_event(
        self, c: Connection, session_id: str | None, store_id: str | None,
        body: dict[str, Any],
    ) -> Event:
        e = complete_event(session_id, body)
        c.execute(
            "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (e.id, session_id, store_id, e.type, e.processed_at, json.dumps(e.body)),
        )
        return e

    def list_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """A session's resources in attach order; every one when ``limit`` is None
        (API.md §4.1: resources.list returns all when no limit is given), else 1-1,000.

        :raises NotFound, InvalidRequest, InvalidCursor:
        """
        items = list(self.get(session_id).resources)
        start = 0
        if page:
            key = decode_cursor(page, "resources", [session_id])
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise InvalidCursor("invalid page cursor")
            start = key
        if limit is None:
            return Page(items[start:], None)
        limit = check_limit(limit, self.limits, maximum=MAX_EVENTS_PAGE)
        end = start + limit
        next_page = encode_cursor("resources", [session_id], end) if end < len(items) else None
        return Page(items[start:end], next_page)

    def delete_resource(self, session_id: str, resource_id: str) -> None:
        """Always refused for memory stores: attachments are fixed at session creation
        (API.md §8.8).

        :raises NotFound: unknown session or resource. :raises InvalidRequest: otherwise.
        """
        res = self.get_resource(session_id, resource_id)
        raise InvalidRequest(
            f"memory store {res.memory_store_id} is attached for the life of session "
            f"{session_id}; memory store resources cannot be removed"
        )


def no_nul(metadata: dict[str, Any], what: str) -> dict[str, Any]:
    """``metadata`` when no key or value of it holds NUL: a session's metadata is what its
    list filters on, and PostgreSQL's jsonb has no NUL (a stored one failed every filter
    there, a 5xx) while SQLite's json_each ends a text at one (a filter matched its start).
    Metadata stored before keeps what it holds.

    :raises InvalidRequest:
    """
    if any("\x00" in str(k) or "\x00" in str(v) for k, v in metadata.items()):
        raise InvalidRequest(f"{what} may not hold NUL characters")
    return metadata
