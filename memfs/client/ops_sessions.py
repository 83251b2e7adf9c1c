"""The operations of sessions, grouped in parts as the Store's (:mod:`memfs.client.ops` has
the others, and :data:`memfs.client.ops.OPS`, which holds them all): each a generator that
yields its :class:`Request` s and returns the :mod:`memfs.models` result."""

from __future__ import annotations

import builtins  # builtins.list: in a part with a method named list, list is that method
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import errors
from ..models import (
    Actor,
    ApiKey,
    Dream,
    Event,
    Page,
    Session,
    SessionResource,
    SessionToken,
)
from ..rules import DEFAULT_AROUND_CONTEXT
from .decode import (
    to_event,
    to_page,
    to_resource,
    to_session,
)
from .wire import (
    DEFAULT_MOUNT_ROOT,
    TOOL_EVENT_TYPES,
    Op,
    Request,
    json_body,
    query_params,
    quoted,
    store_url,
)


class AgentOps:
    """The agents and environments a session names."""

    def create(self, /, *, name: str, model: Any, **fields: Any) -> Op[dict[str, Any]]:
        d = yield Request("POST", "/v1/agents", json=json_body(name=name, model=model, **fields))
        return dict(d)

    def get(self, agent_id: str) -> Op[dict[str, Any]]:
        d = yield Request("GET", f"/v1/agents/{quoted(agent_id)}")
        return dict(d)

    def create_environment(self, /, *, name: str, **fields: Any) -> Op[dict[str, Any]]:
        d = yield Request("POST", "/v1/environments", json=json_body(name=name, **fields))
        return dict(d)

    def get_environment(self, environment_id: str) -> Op[dict[str, Any]]:
        d = yield Request("GET", f"/v1/environments/{quoted(environment_id)}")
        return dict(d)


class SessionOps:
    """Sessions, their resources and their tokens."""

    def create(
        self,
        resources: Sequence[dict[str, Any]],
        *,
        root: str = DEFAULT_MOUNT_ROOT,
        agent: dict[str, Any] | str | None = None,
        environment_id: str | None = None,
        metadata: dict[str, str] | None = None,
        title: str | None = None,
        status: str = "idle",
        launcher: dict[str, Any] | None = None,
    ) -> Op[Session]:
        if launcher is not None:
            raise errors.InvalidRequest(
                "a memfs server's sessions have no local launcher (memfs run --url)"
            )
        if status != "idle":
            raise errors.InvalidRequest(
                "a memfs server creates idle sessions; use sessions.set_status afterwards"
            )
        if isinstance(agent, dict):  # a snapshot: the server takes a reference
            agent = {k: v for k, v in agent.items() if k in ("type", "id", "version")}
        mount_root = None if root.rstrip("/") == DEFAULT_MOUNT_ROOT else root
        d = yield Request("POST", "/v1/sessions", json=json_body(
            resources=list(resources), agent=agent, environment_id=environment_id,
            metadata=metadata, title=title, memfs_mount_root=mount_root))
        return to_session(d)

    def set_status(self, session_id: str, status: str) -> Op[Session]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/status``)."""
        d = yield Request(
            "POST", f"/v1/sessions/{quoted(session_id)}/memfs/status", json={"status": status}
        )
        return to_session(d)

    def create_token(self, session_id: str, *,
                             ttl_seconds: float | None = None) -> Op[SessionToken]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/tokens``): a session token, for
        the commands of the session (``store.sessions.create_token``)."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        d = yield Request("POST", f"/v1/sessions/{quoted(session_id)}/memfs/tokens", json=body)
        return SessionToken.from_dict(d)

    def get(self, session_id: str) -> Op[Session]:
        d = yield Request("GET", f"/v1/sessions/{quoted(session_id)}")
        return to_session(d)

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
    ) -> Op[Page[Session]]:
        d = yield Request("GET", "/v1/sessions", params=query_params(
            memory_store_id=memory_store_id, statuses=list(statuses) if statuses else None,
            include_archived=include_archived, order=order, created_at_gt=created_at_gt,
            created_at_gte=created_at_gte, created_at_lt=created_at_lt,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return to_page(d, to_session)

    def update(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Op[Session]:
        d = yield Request("POST", f"/v1/sessions/{quoted(session_id)}",
                          json=json_body(metadata=metadata, title=title))
        return to_session(d)

    def archive(self, session_id: str) -> Op[Session]:
        d = yield Request("POST", f"/v1/sessions/{quoted(session_id)}/archive")
        return to_session(d)

    def delete(self, session_id: str) -> Op[None]:
        yield Request("DELETE", f"/v1/sessions/{quoted(session_id)}")

    def get_resource(self, session_id: str, resource_id: str) -> Op[SessionResource]:
        d = yield Request(
            "GET", f"/v1/sessions/{quoted(session_id)}/resources/{quoted(resource_id)}")
        return to_resource(d, session_id)

    def list_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Op[Page[SessionResource]]:
        d = yield Request("GET", f"/v1/sessions/{quoted(session_id)}/resources",
                          params=query_params(limit=limit, page=page))
        return to_page(d, lambda r: to_resource(r, session_id))


class EventOps:
    """A session's events (and a mount's tool events)."""

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
    ) -> Op[Page[Event]]:
        if after_seq is not None:
            raise errors.InvalidRequest("after_seq is a local-database option; use page")
        d = yield Request("GET", f"/v1/sessions/{quoted(session_id)}/events", params=query_params(
            types=list(types) if types else None, order=order, created_at_gt=created_at_gt,
            created_at_gte=created_at_gte, created_at_lt=created_at_lt,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return to_page(d, lambda e: to_event(e, session_id))

    def around(
        self, session_id: str, event_id: str, *, context: int = DEFAULT_AROUND_CONTEXT,
        types: Sequence[str] | None = None,
    ) -> Op[builtins.list[Event]]:
        """memfs extension (``memfs_around``, ``memfs_context`` on ``events.list``): the event
        with ``context`` events before and after it, in time order."""
        d = yield Request("GET", f"/v1/sessions/{quoted(session_id)}/events", params=query_params(
            memfs_around=event_id, memfs_context=context, types=list(types) if types else None))
        return [to_event(e, session_id) for e in d.get("data") or []]

    def add(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> Op[builtins.list[Event]]:
        """Client events (``user.*``, ``system.message``) for a session; or a mount's tool
        events (``agent.tool_use``/``agent.tool_result``, ids kept, a retried batch recorded
        once) for the session this client acts as, or with ``session_id`` None for the store.
        """
        tools = bool(events) and all(e.get("type") in TOOL_EVENT_TYPES for e in events)
        if tools and session_id is None and store_id is not None:
            d = yield Request("POST", store_url(store_id) + "/memfs/events",
                              json={"events": list(events)})
        elif session_id is None or (store_id is not None and not tools):
            raise errors.InvalidRequest("events without a session cannot be sent to a server")
        else:
            d = yield Request("POST", f"/v1/sessions/{quoted(session_id)}/events",
                              json=json_body(events=list(events), memory_store_id=store_id))
        return [to_event(e, session_id) for e in d.get("data") or []]

    send = add


class UndoOps:
    """Undo a session's writes (memfs extension; README "Undo a session")."""

    def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
               force: bool = False) -> Op[dict[str, Any]]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/revert``): the Store's
        ``undo.revert`` of a session or a ``memrevert_`` id, attributed to this client's
        key."""
        d = yield Request("POST", f"/v1/sessions/{quoted(target)}/memfs/revert",
                          json={"dry_run": dry_run, "force": force})
        return dict(d)


class DreamOps:
    """Dreams, run by the server (API.md §5)."""

    def create(self, inputs: Any, model: Any, *, instructions: Any = None,
                     output_behavior: Any = None, runner: Any = None) -> Op[Dream]:
        """The server runs the dream (``runner`` is the server's own)."""
        d = yield Request("POST", "/v1/dreams", json=json_body(
            inputs=inputs, model=model, instructions=instructions,
            output_behavior=output_behavior))
        return Dream.from_dict(d)

    def get(self, dream_id: str) -> Op[Dream]:
        d = yield Request("GET", f"/v1/dreams/{quoted(dream_id)}")
        return Dream.from_dict(d)

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Op[Page[Dream]]:
        d = yield Request("GET", "/v1/dreams", params=query_params(
            statuses=list(statuses) if statuses else None, include_archived=include_archived,
            created_at_gt=created_at_gt, created_at_lt=created_at_lt, limit=limit, page=page))
        return to_page(d, lambda x: Dream.from_dict(x))

    def cancel(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{quoted(dream_id)}/cancel")
        return Dream.from_dict(d)

    def archive(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{quoted(dream_id)}/archive")
        return Dream.from_dict(d)


class KeyOps:
    """The API keys of an admin key's workspace (issue 22; memfs extension)."""

    def create(
        self,
        name: str,
        *,
        workspace: str | None = None,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> Op[ApiKey]:
        """An API key (``store.keys.create``; the secret is in the answer this
        once) of ``workspace``: None, the calling key's own; another, a server key only.
        ``created_by`` is ignored: the server attributes the key to the calling one."""
        d = yield Request("POST", "/v1/memfs/keys", json=json_body(
            name=name, workspace_id=workspace, role=role,
            memory_store_ids=list(store_ids) if store_ids is not None else None,
            expires_in=expires_in))
        return ApiKey.from_dict(d)

    def list(self, *, workspace: str | None = None) -> Op[list[ApiKey]]:
        """The keys of ``workspace`` (None: the calling key's own), newest first; never a
        secret."""
        d = yield Request("GET", "/v1/memfs/keys", params=query_params(workspace_id=workspace))
        return [ApiKey.from_dict(x) for x in d.get("data") or []]

    def get(self, key_id: str, *, workspace: str | None = None) -> Op[ApiKey]:
        """:raises NotFound: no such key the calling key may see (or not of ``workspace``,
        as the Store says)."""
        d = yield Request("GET", f"/v1/memfs/keys/{quoted(key_id)}")
        key = ApiKey.from_dict(d)
        if workspace is not None and key.workspace_id != workspace:
            raise errors.NotFound(f"API key {key_id} not found")
        return key

    def revoke(self, key_id: str, *, workspace: str | None = None) -> Op[ApiKey]:
        """Revoke a key for good (a revoked one comes back unchanged); with ``workspace``
        only one of it (then two requests: it is looked at first).

        :raises NotFound: no such key the calling key may see (or not of ``workspace``).
        """
        if workspace is not None:
            yield from self.get(key_id, workspace=workspace)
        d = yield Request("POST", f"/v1/memfs/keys/{quoted(key_id)}/revoke")
        return ApiKey.from_dict(d)
