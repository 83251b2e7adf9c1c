"""Session events, the API's agents and environments, and acting as a session."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidCursor, InvalidRequest, NotFound, ReadOnly
from ..models import DEFAULT_WORKSPACE, Actor, Event, Page, SessionResource
from ..rules import (
    MAX_EVENTS_PAGE,
    _check_limit,
    _dict_list,
    _validate_metadata,
    _validate_name,
    _validate_text,
    format_time,
    new_id,
    parse_time,
)
from .common import CLIENT_EVENT_TYPES, _check_tool_events, _complete_event, _now
from .paging import _decode_cursor, _encode_cursor
from .rows import _event
from .sessions import SessionsPart

log = logging.getLogger(__name__)


class EventsPart(SessionsPart):
    """The store's events (a part of :class:`memfs.store.Store`)."""

    def add_events(
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
            _validate_text(e, "event")
        done = [_complete_event(session_id, e) for e in events]
        self._insert_event_rows(
            session_id,
            [(e.id, session_id, store_id, e.type, e.processed_at, json.dumps(e.body))
             for e in done],
        )
        return done

    def _insert_event_rows(self, session_id: str | None,
                           values: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``(id, session_id, store_id, type, processed_at, body)`` rows in one write
        (one executemany: a mount flushes hundreds of tool events at a time)."""
        with self._write() as c:
            if session_id is not None:
                self._session_in(c, session_id)
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
        counterpart of :meth:`add_events`, without its per-event checks, copies and encoding,
        for the event flusher's batches. What comes from outside (the API) goes through
        :meth:`add_events` and :meth:`add_tool_events`. A lone surrogate (which no memfs-built
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
        self._insert_event_rows(session_id, values)
        return len(values)

    def list_events(
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
        limit = _check_limit(limit, self.limits, maximum=MAX_EVENTS_PAGE)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'")
        self._run(self._session_in, session_id)
        where: list[str] = ["session_id = ?"]
        params: list[Any] = [session_id]
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
            key = _decode_cursor(page, "events", filters)
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
                    and isinstance(key[1], int) and not isinstance(key[1], bool)):
                raise InvalidCursor("invalid page cursor")
            op = ">" if order == "asc" else "<"
            where.append(f"(processed_at {op} ? OR (processed_at = ? AND seq {op} ?))")
            params += [key[0], key[0], key[1]]
        rows = self._all(
            f"SELECT * FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY processed_at {order.upper()}, seq {order.upper()} LIMIT ?",
            [*params, limit + 1],
        )
        items = [_event(r) for r in rows[:limit]]
        next_page = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_page = _encode_cursor("events", filters, [last["processed_at"], last["seq"]])
        return Page(items, next_page)

    def last_event_seq(self, session_id: str) -> int:
        row = self._one("SELECT max(seq) FROM events WHERE session_id = ?", (session_id,))
        return int(row[0] or 0) if row else 0

    def events_after(self, session_id: str, seq: int, limit: int = 500) -> list[tuple[int, Event]]:
        """Events of a session with a sequence number above ``seq`` (for live streams)."""
        rows = self._all(
            "SELECT * FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, seq, limit),
        )
        return [(r["seq"], _event(r)) for r in rows]

    def event_marks(self, after: int | None) -> tuple[int, dict[str, int]]:
        """The newest event seq of the database and, per session with events above ``after``,
        its newest seq (``after`` None: the position only). One call serves every live event
        stream of a server (:class:`memfs.api.streams.EventHub`)."""
        with self._read() as c:
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

    def create_agent(
        self,
        *,
        name: Any,
        model: Any,
        description: Any = None,
        system: Any = None,
        tools: Any = None,
        skills: Any = None,
        mcp_servers: Any = None,
        metadata: Any = None,
        execution_identity: Any = None,
        multiagent: Any = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> dict[str, Any]:
        """Create an agent (version 1) and return its wire object (``BetaManagedAgentsAgent``).

        memfs runs no model: an agent is a named configuration that sessions snapshot.
        ``model`` is a model id or ``{"id", ...}``; ``tools`` entries are dicts with a ``type``
        (the agent toolset gets its default config filled in).

        :raises InvalidRequest: a missing or ill-typed field.
        """
        lim = self.limits
        name = _validate_name(name, lim)
        if isinstance(model, str) and model:
            model_cfg: dict[str, Any] = {"id": model, "speed": "standard"}
        elif isinstance(model, dict) and isinstance(model.get("id"), str) and model["id"]:
            model_cfg = {"speed": "standard", **model}
        else:
            raise InvalidRequest("model must be a model id or an object with an 'id'")
        for what, value in (("description", description), ("system", system)):
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{what} must be a string")
        resolved_tools = []
        for tool in _dict_list(tools, "tools"):
            if not isinstance(tool.get("type"), str):
                raise InvalidRequest("every tool needs a string 'type'")
            if tool["type"] == "agent_toolset_20260401":
                tool = {
                    "configs": [],
                    "default_config": {
                        "enabled": True,
                        "permission_policy": {"type": "always_allow"},
                    },
                    **tool,
                }
            resolved_tools.append(tool)
        if execution_identity is None:
            execution_identity = {"type": "service_account"}
        elif not isinstance(execution_identity, dict) or not isinstance(
            execution_identity.get("type"), str
        ):
            raise InvalidRequest("execution_identity must be an object with a 'type'")
        if multiagent is not None and not isinstance(multiagent, dict):
            raise InvalidRequest("multiagent must be an object")
        now = _now()
        body = {
            "type": "agent",
            "id": new_id("agent"),
            "version": 1,
            "name": name,
            "description": description,
            "model": model_cfg,
            "system": system,
            "tools": resolved_tools,
            "skills": _dict_list(skills, "skills"),
            "mcp_servers": _dict_list(mcp_servers, "mcp_servers"),
            "metadata": _validate_metadata({} if metadata is None else metadata, lim),
            "execution_identity": execution_identity,
            "multiagent": multiagent,
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        _validate_text(body, "agent")
        with self._write() as c:
            c.execute(
                "INSERT INTO agents (id, body, created_at, workspace_id) VALUES (?, ?, ?, ?)",
                (body["id"], json.dumps(body), now, workspace),
            )
        return body

    def get_agent(self, agent_id: str, *, version: int | None = None) -> dict[str, Any]:
        """The agent's wire object. :raises NotFound: unknown id, or a version it lacks."""
        row = self._one("SELECT body FROM agents WHERE id = ?", (agent_id,))
        if row is None:
            raise NotFound(f"agent {agent_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        if version is not None and version != body["version"]:
            raise NotFound(f"agent {agent_id} has no version {version}")
        return body

    def agent_snapshot(self, agent: Any, *, workspace: str | None = None) -> dict[str, Any]:
        """The session's copy of an agent (``BetaManagedAgentsSessionAgent``) from what
        ``sessions.create`` received: an id, or ``{"type": "agent", "id", "version"?}``.

        An id this database does not know is kept as an opaque reference ``{type, id,
        version}``: API.md accepts agent ids as opaque strings (agents may live elsewhere);
        so is another ``workspace``'s agent (its existence does not leak).

        :raises InvalidRequest: any other shape. :raises NotFound: a known agent's missing
            version.
        """
        version = None
        if isinstance(agent, dict):
            if agent.get("type") != "agent":
                raise InvalidRequest("agent must be an id or {'type': 'agent', 'id': ...}")
            version = agent.get("version")
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise InvalidRequest("agent version must be an integer")
            agent = agent.get("id")
        if not isinstance(agent, str) or not agent:
            raise InvalidRequest("agent must be an agent id")
        _validate_text(agent, "agent")
        opaque = {"type": "agent", "id": agent, "version": version}
        owner = self._one("SELECT workspace_id FROM agents WHERE id = ?", (agent,))
        if owner is None or (workspace is not None and owner["workspace_id"] != workspace):
            return opaque
        body = self.get_agent(agent, version=version)
        keys = ("type", "id", "version", "name", "description", "model", "system", "tools",
                "skills", "mcp_servers", "execution_identity", "multiagent")
        return {k: body[k] for k in keys}

    def create_environment(
        self,
        *,
        name: Any,
        config: Any = None,
        description: Any = None,
        metadata: Any = None,
        scope: Any = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> dict[str, Any]:
        """Create an environment and return its wire object (``BetaEnvironment``). ``config``
        defaults to ``{"type": "self_hosted"}``: memfs runs the agent's tools itself.

        :raises InvalidRequest:
        """
        lim = self.limits
        name = _validate_name(name, lim)
        if config is None:
            config = {"type": "self_hosted"}
        if not isinstance(config, dict) or config.get("type") not in ("cloud", "self_hosted"):
            raise InvalidRequest("config must be {'type': 'cloud' | 'self_hosted', ...}")
        if config["type"] == "cloud":
            packages: dict[str, list[str]] = {
                k: [] for k in ("apt", "cargo", "gem", "go", "npm", "pip")}
            config = {"networking": {"type": "unrestricted"}, "packages": packages, **config}
        if description is not None and not isinstance(description, str):
            raise InvalidRequest("description must be a string")
        if scope not in (None, "organization", "account"):
            raise InvalidRequest("scope must be 'organization' or 'account'")
        now = _now()
        body = {
            "type": "environment",
            "id": new_id("env"),
            "name": name,
            "description": description,
            "config": config,
            "metadata": _validate_metadata({} if metadata is None else metadata, lim),
            "scope": scope or "organization",
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        _validate_text(body, "environment")
        with self._write() as c:
            c.execute(
                "INSERT INTO environments (id, body, created_at, workspace_id) "
                "VALUES (?, ?, ?, ?)", (body["id"], json.dumps(body), now, workspace),
            )
        return body

    def get_environment(self, environment_id: str) -> dict[str, Any]:
        """:raises NotFound:"""
        row = self._one("SELECT body FROM environments WHERE id = ?", (environment_id,))
        if row is None:
            raise NotFound(f"environment {environment_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        return body

    def list_session_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """A session's resources in attach order; every one when ``limit`` is None
        (API.md §4.1: resources.list returns all when no limit is given), else 1-1,000.

        :raises NotFound, InvalidRequest, InvalidCursor:
        """
        items = list(self.get_session(session_id).resources)
        start = 0
        if page:
            key = _decode_cursor(page, "resources", [session_id])
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise InvalidCursor("invalid page cursor")
            start = key
        if limit is None:
            return Page(items[start:], None)
        limit = _check_limit(limit, self.limits, maximum=MAX_EVENTS_PAGE)
        end = start + limit
        next_page = _encode_cursor("resources", [session_id], end) if end < len(items) else None
        return Page(items[start:end], next_page)

    def delete_session_resource(self, session_id: str, resource_id: str) -> None:
        """Always refused for memory stores: attachments are fixed at session creation
        (API.md §8.8).

        :raises NotFound: unknown session or resource. :raises InvalidRequest: otherwise.
        """
        res = self.get_session_resource(session_id, resource_id)
        raise InvalidRequest(
            f"memory store {res.memory_store_id} is attached for the life of session "
            f"{session_id}; memory store resources cannot be removed"
        )

    def send_events(self, session_id: str, events: Any) -> list[Event]:
        """Record events a client sends (API.md §4.1 ``events.send``): a non-empty list of
        objects whose ``type`` is one of :data:`CLIENT_EVENT_TYPES`. The store assigns ``id``
        and ``processed_at`` (any the client sent are ignored).

        :raises InvalidRequest: a bad list or event. :raises NotFound: unknown session.
        """
        if not isinstance(events, list) or not events:
            raise InvalidRequest("events must be a non-empty list")
        clean = []
        for e in events:
            if not isinstance(e, dict) or e.get("type") not in CLIENT_EVENT_TYPES:
                kind = e.get("type") if isinstance(e, dict) else e
                raise InvalidRequest(
                    f"cannot send an event of type {kind!r}; allowed: "
                    + ", ".join(CLIENT_EVENT_TYPES)
                )
            if e["type"] == "user.message" and not isinstance(e.get("content"), list):
                raise InvalidRequest("a user.message needs a 'content' list of blocks")
            clean.append({k: v for k, v in e.items() if k not in ("id", "processed_at")})
        return self.add_events(session_id, clean)

    # -- acting as a session: remote mounts (the memfs extension, README "Remote mounts") -------

    def session_writer(self, session_id: str, store_id: str) -> Actor:
        """The actor of a write to ``store_id`` made on behalf of ``session_id`` (a mount
        acting as its session through the API): ``session_actor``, once the session exists,
        is not terminated and has the store attached ``read_write``.

        :raises NotFound: unknown session.
        :raises ReadOnly: the session is terminated, or the store is not attached to it, or is
            attached ``read_only``.
        """
        session = self.get_session(session_id)
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
    ) -> list[Event]:
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
        _check_tool_events(events)
        if session_id is not None:
            session = self.get_session(session_id)
            if store_id is not None and store_id not in {
                r.memory_store_id for r in session.resources
            }:
                raise ReadOnly(f"memory store {store_id} is not attached to session {session_id}")
        elif store_id is None:
            raise InvalidRequest("tool events need a session or a memory store")
        with self._write() as c:
            if store_id is not None:
                self._store_in(c, store_id)
            ids = [e["id"] for e in events]
            known = {
                r[0] for r in c.execute(
                    f"SELECT id FROM events WHERE id IN ({','.join('?' * len(ids))})", ids
                )
            }
            fresh = []
            for e in events:
                if e["id"] not in known:
                    known.add(e["id"])
                    fresh.append(self._insert_event(c, session_id, store_id, e))
            return fresh
