"""httpx clients for a ``memfs serve`` API, with the :class:`memfs.store.Store` interface.

:class:`Client` (sync) and :class:`AsyncClient` have the same methods, named and shaped like the
Store methods the CLI uses (``create_store``, ``get_memory_by_path``, ``list_versions``...).
They return the same :mod:`memfs.models` and raise the same :mod:`memfs.errors`, rebuilt from
the API's error envelope (``error.type`` and ``details.error_code``), so a command works the
same on a local database and against a server.

Each operation is written once, as a generator that yields requests and receives decoded
responses (or has the mapped error thrown into it); the sync and async clients only drive
those generators over their transport.

``resolve_store`` and the filesystem's store calls (``write_path``, ``delete_path``,
``rename_path``, ``rename_prefix``, ``tree``, ``check_can_create``, ``count_memories``,
``last_change``, ``changes_since``, ``get_limits``) use the memfs extension endpoints (README
"Remote mounts"), each one server transaction, and so does ``revert`` (README "Undo a
session"), ``search`` / ``search_status`` (docs/search.md), and the API keys of an admin key's
workspace (``create_key``, ``list_keys``, ``get_key``, ``revoke_key``: docs/http-api.md);
:meth:`AsyncClient.stream_changes` follows a store's change feed, pushed by the server.

Differences from a local Store, by nature of the API:
- ``actor`` arguments are accepted and ignored: the server attributes every write to the API
  key (``api_actor``), or, for a client made with ``session_id`` (the ``x-memfs-session-id``
  header), to that session once the server has checked it may write the store.
- ``get_memory_by_path`` lists the parent directory (there is no lookup by path on the wire).
- ``update_memory(replace=True)`` over an existing memory deletes it first, conditionally on
  its hash, then renames: two requests, not one transaction. (``rename_path`` is one, and over
  a memory keeps that memory's id instead, like :meth:`memfs.store.Store.rename_path`.)
- ``create_session`` cannot choose a mount root or status; ``add_events`` sends client event
  types (``user.*``, ``system.message``), and tool events only for the session this client
  acts as (or, without a session, for a store).

The package owns the wire as a client sees it and may import only :mod:`memfs.protocol`,
:mod:`memfs.rules`, :mod:`memfs.errors` and :mod:`memfs.models` (never the store, the
filesystem or the API); its modules build on each other in this order: ``wire`` (requests,
constants, encoding), ``decode`` (answers and error envelopes -> models and errors), ``feed``
(the change stream's frames), ``ops`` (every operation, once), then ``sync`` (:class:`Client`)
and ``aio`` (:class:`AsyncClient`).
"""

from ..errors import from_wire as error_from_response
from .aio import AsyncClient
from .feed import FeedEvent
from .ops import OPERATIONS
from .sync import Client
from .wire import DEFAULT_TIMEOUT, SESSION_HEADER, STREAM_READ_TIMEOUT, Request, unix_socket

__all__ = ["DEFAULT_TIMEOUT", "OPERATIONS", "SESSION_HEADER", "STREAM_READ_TIMEOUT",
           "AsyncClient", "Client", "FeedEvent", "Request", "error_from_response",
           "unix_socket"]
