"""The processes memfs runs until they are stopped, each a composition root over the layers
below it: what they open, build and serve, and what only they need.

Their modules, each importing only those before it in this list (tests/unit/test_layers.py):

- :mod:`~memfs.daemons.logs`: how they log, in text or JSON lines (the CLI's commands too);
- :mod:`~memfs.daemons.expiry`: the expiry sweep that the server and a local mount daemon run
  (a thread: every store's expired memories deleted as versions, or reported);
- :mod:`~memfs.daemons.snapshot`: a store as it was, as a read-only
  :class:`~memfs.protocol.StoreAPI` (what a time-travel mount serves);
- :mod:`~memfs.daemons.hypercorn_glue`: all that depends on hypercorn's internals (a copy of
  its ``worker_serve``, three methods of its HTTP/1.1 protocol replaced, its access logger);
- :mod:`~memfs.daemons.indexworker`: a mount daemon's indexer process (``python -m
  memfs.daemons.indexworker``), which indexes and ranks by meaning so that the daemon never
  loads a model;
- :mod:`~memfs.daemons.mount`: the daemon of ``memfs mount`` (one store), and what every mount
  daemon needs of the layers below the filesystem (opening a store, following it, the
  indexer and the expiry sweep);
- :mod:`~memfs.daemons.sessionfs`: the mount daemon of a session (``python -m
  memfs.daemons.sessionfs``, the launcher's): every store of the session in one filesystem;
- :mod:`~memfs.daemons.server`: ``memfs serve``, the API's app under hypercorn on trio (and a
  local session's API, which the launcher serves with it).

This module imports none of them: ``python -m`` of one imports only what that one needs
(tests/unit/test_startup_imports.py).
"""
