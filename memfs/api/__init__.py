"""The HTTP API of API.md §1-4 as an ASGI app (Starlette): what ``anthropic==2.14.0`` speaks.

Every route translates a request into :class:`memfs.store.Store` calls and the result into the
SDK's wire shapes; every rule is the store's. Errors of any kind leave through the one table
of errors, :data:`memfs.errors.WIRE` (exception class -> HTTP status, ``error.type`` and
``details.error_code``), in the envelope ``{"type": "error", "error": {...}, "request_id"}``.
Every response carries a ``request-id`` header; every 4xx but 408/429 carries
``x-should-retry: false`` so the SDK's default retries never repeat a deterministic failure
(API.md §1.6).

Authentication: ``x-api-key: KEY`` or ``Authorization: Bearer KEY`` (``x-api-key`` wins when
both are sent). Versions written through the API are attributed to ``Actor.api(api_key_id)``,
``api_key_id`` being ``apikey_`` + a hash prefix of the key (:func:`api_key_id`), stable across
restarts and never the secret itself.

The store is synchronous; handlers call it in a worker thread (the Store is thread-safe), so a
write waiting for the SQLite lock never stalls the event loop. The session event streams (SSE)
share one database poller, :class:`EventHub`, however many are open.

memfs extensions (``x-memfs-extension`` in ``/openapi.json``; README "Remote mounts"), for
remote mounts: the ``x-memfs-session-id`` header (:data:`SESSION_HEADER`) makes a request act
as a session (memory writes become ``session_actor`` once :meth:`Store.events.session_writer` allows
them; the session's own tool events may be recorded); ``/v1/memfs/limits``;
``/v1/memfs/resolve_store`` (a store by id or name, the store's rule) and
``/v1/memory_stores/{id}/memfs/namesakes`` (the other live stores of its name);
``/v1/memory_stores/{id}/memfs/search`` and ``.../memfs/search_status`` (recall: memories by
their words and meaning, :mod:`memfs.api.search`);
``/v1/memory_stores/{id}/memory_versions/{id}/memfs/restore`` (Store.versions.restore); the
filesystem's calls under ``/v1/memory_stores/{id}/memfs/`` (tree, stats, check_can_create,
write, delete, rename, rename_prefix, delete_prefix, events), each one store transaction;
``/v1/sessions/{id}/memfs/revert`` (undo a session: Store.undo.revert; docs/sessions.md) and
``/v1/sessions/{id}/memfs/tokens`` (a session token: the credential of a session's commands,
which the gate takes where it takes a key, for that session's stores only); and the store's
change feed, ``/changes`` and ``/changes/stream`` (SSE), served by :class:`ChangeHub` with one
database poller per store however many mounts follow it; ``/v1/memfs/keys`` (API keys of a
workspace, for its admins: :mod:`memfs.api.keys`).

Workspaces (issue 22): every credential acts in one workspace, as its role (``admin``,
``read_write``, ``read_only``), on every store of it or only on some (a store-scoped key, a
session token); another workspace's objects are 404s, as if they did not exist. A request
naming another workspace in ``anthropic-workspace-id`` is refused (403).

Known limitations:
- ``anthropic-beta`` is not checked.
- Sessions run no model; ``agent_with_overrides``, budgets, vaults and file resources are
  refused with 400, and ``sessions.list`` cannot filter by agent or deployment.

The package, one module per seam (each imports only those above it in this list, but for
type annotations):

- :mod:`~memfs.api.spec` (the declared inputs: :class:`~memfs.api.spec.Param`, the query and
  body checks), :mod:`~.errortable` (the error envelope), :mod:`~.uploads` (how many
  bodies may be unfinished at once), :mod:`~.body` (reading a
  body within its bounds of size, time and rate), :mod:`~.batching` (:class:`WriteBatcher`,
  group commit), :mod:`~.call` (:class:`Call`, what a handler gets), :mod:`~.limits` (each
  key's request rate), :mod:`~.auth` (the key gate, a grant's rights,
  :data:`SESSION_HEADER`), :mod:`~.grants` (:class:`~.grants.GrantWatch`, the one watch of
  the live streams' credentials, which the Console's live pages share), :mod:`~.streams`
  (SSE frames, :class:`EventHub` and :class:`ChangeHub`);
- the resources, one module each: :mod:`~.stores`, :mod:`~.mounts` (the remote mounts'
  extensions and the change feed), :mod:`~.memories`, :mod:`~.versions`, :mod:`~.agents`
  (and environments), :mod:`~.sessions` (their resources and events), :mod:`~.dreams`,
  :mod:`~.archive` (import, export), :mod:`~.search` (recall), :mod:`~.keys` (API keys);
- :mod:`~.routes` (:data:`OPS`, :class:`Op`: the route table), :mod:`~.openapi` (the
  ``/openapi.json`` document made of it), :mod:`~.health` (the probes ``/healthz`` and
  ``/readyz``, without a key) and :mod:`~.app` (:func:`create_app`);
- this module: the names callers import from ``memfs.api``. A constant is read where it is
  defined: a test patches ``memfs.api.body.BODY_IDLE_SECONDS``, not ``memfs.api``'s copy.

The API may import the store (:mod:`memfs.store`) and what is below it (:mod:`memfs.errors`,
:mod:`memfs.models`, :mod:`memfs.rules`), :mod:`memfs.transfer`, :mod:`memfs.backends.watch`,
and, when an app is made, :mod:`memfs.dreams` and
:mod:`memfs.console`; never the filesystem or the CLI, and nothing imports it but the
server's composition roots (:mod:`memfs.daemons.server`, :mod:`memfs.launcher.sessionapi`) and the
tests.
"""

from __future__ import annotations

from ..rules import api_key_id
from . import (
    agents,
    app,
    archive,
    auth,
    batching,
    body,
    call,
    dreams,
    errortable,
    memories,
    mounts,
    openapi,
    routes,
    search,
    sessions,
    spec,
    stores,
    streams,
    versions,
)
from .app import create_app
from .archive import IMPORT_SPOOL_BYTES, IMPORT_TOTAL_SECONDS, MAX_IMPORT_BYTES
from .auth import PUBLIC_PATHS, SESSION_HEADER
from .batching import BATCH_MAX_CALLS, WriteBatcher
from .body import (
    BODY_GRACE_SECONDS,
    BODY_IDLE_SECONDS,
    BODY_TOTAL_SECONDS,
    MAX_BODY_BYTES,
    MIN_BODY_RATE,
)
from .call import Call
from .errortable import error_body, error_response
from .memories import SHORT_PAGE
from .routes import OPS, Op
from .sessions import EVENTS_MAX_LIMIT, INITIAL_EVENT_TYPES, MAX_INITIAL_EVENTS
from .streams import (
    CHANGES_KEPT,
    CHANGES_PING_SECONDS,
    CHANGES_POLL_SECONDS,
    GRANT_RECHECK_SECONDS,
    OUTAGE_RETRY_SECONDS,
    STREAM_END_TYPES,
    STREAM_PING_SECONDS,
    STREAM_POLL_SECONDS,
    ChangeHub,
    EventHub,
    change_frames,
    sse_frame,
)

__all__ = [
    "BATCH_MAX_CALLS", "BODY_GRACE_SECONDS", "BODY_IDLE_SECONDS", "BODY_TOTAL_SECONDS",
    "CHANGES_KEPT", "CHANGES_PING_SECONDS", "CHANGES_POLL_SECONDS",
    "EVENTS_MAX_LIMIT", "GRANT_RECHECK_SECONDS", "IMPORT_SPOOL_BYTES", "IMPORT_TOTAL_SECONDS",
    "INITIAL_EVENT_TYPES", "MAX_BODY_BYTES", "MAX_IMPORT_BYTES", "MAX_INITIAL_EVENTS",
    "MIN_BODY_RATE", "OPS", "OUTAGE_RETRY_SECONDS", "PUBLIC_PATHS", "SESSION_HEADER",
    "SHORT_PAGE", "STREAM_END_TYPES", "STREAM_PING_SECONDS", "STREAM_POLL_SECONDS", "Call",
    "ChangeHub", "EventHub", "Op", "WriteBatcher", "agents", "api_key_id", "app", "archive",
    "auth", "batching", "body", "call", "change_frames", "create_app", "dreams", "error_body",
    "error_response", "errortable", "memories", "mounts", "openapi", "routes", "search",
    "sessions", "spec", "sse_frame", "stores", "streams", "versions",
]
