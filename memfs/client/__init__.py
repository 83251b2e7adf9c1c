"""httpx clients for a ``memfs serve`` API, with the :class:`memfs.store.Store` interface.

:class:`Client` (sync) and :class:`AsyncClient` are made of the same parts as the Store, with
the same methods, named and shaped alike (``client.stores.create``,
``client.memories.get_by_path``, ``client.versions.list``...). They return the same
:mod:`memfs.models` and raise the same :mod:`memfs.errors`, rebuilt from the API's error
envelope (``error.type`` and ``details.error_code``), so a command works the same on a local
database and against a server.

Each operation is written once, as a generator that yields requests and receives decoded
responses (or has the mapped error thrown into it), in the part of :data:`ops.OPS` it
belongs to; each part of a client drives its part's generators with the client's
:class:`wire.Drive` (its transport), and needs nothing else of the client.

``stores.resolve`` and the filesystem's store calls (``memories.write_path``,
``memories.delete_path``, ``memories.rename_path``, ``memories.rename_prefix``,
``memories.delete_prefix``, ``memories.tree``, ``memories.check_can_create``,
``memories.count``, ``feed.last``, ``feed.since``, ``get_limits``) use the memfs extension
endpoints (README "Remote mounts"), each one server transaction, and so do ``undo.revert``
(README "Undo a session"), ``search.in_store`` / ``search.status`` (docs/search.md), and the
API keys of an admin key's workspace (``keys.create``, ``keys.list``, ``keys.get``,
``keys.revoke``: docs/http-api.md);
:meth:`AsyncClient.stream_changes` follows a store's change feed, pushed by the server.
Only the sync :class:`Client` has an ``archive`` part (``export_archive``,
``import_upload``: bodies streamed, not JSON).

Differences from a local Store, by nature of the API:
- ``actor`` arguments are accepted and ignored: the server attributes every write to the API
  key (``api_actor``), or, for a client made with ``session_id`` (the ``x-memfs-session-id``
  header), to that session once the server has checked it may write the store.
- ``memories.get_by_path`` lists the parent directory (there is no lookup by path on the
  wire).
- ``memories.update(replace=True)`` over an existing memory deletes it first, conditionally
  on its hash, then renames: two requests, not one transaction. (``memories.rename_path`` is
  one, and over a memory keeps that memory's id instead, like the Store's.)
- ``sessions.create`` cannot choose a mount root or status; ``events.add`` sends client event
  types (``user.*``, ``system.message``), and tool events only for the session this client
  acts as (or, without a session, for a store).

The package owns the wire as a client sees it and may import only :mod:`memfs.protocol`,
:mod:`memfs.rules`, :mod:`memfs.errors` and :mod:`memfs.models` (never the store, the
filesystem or the API); its modules build on each other in this order: ``wire`` (requests,
constants, encoding, the :class:`wire.Drive` a part runs an operation with), ``decode``
(answers and error envelopes -> models and errors), ``feed`` (the change stream's frames),
``ops_sessions`` then ``ops`` (every operation, once, by part), then ``sync_parts`` and
``sync`` (:class:`Client`), ``aio_parts`` and ``aio`` (:class:`AsyncClient`).
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
