"""The mount: a memory store (or a session's stores) as a FUSE filesystem, on pyfuse3 and trio.

The package owns everything between the kernel and a :class:`~memfs.protocol.StoreAPI`: the inode
tree, the request handlers, write buffers and commits, ``.history``, ``.search``, ``.describe`` and
``.sessions``,
the files' extended attributes, tool events, the background services that keep a mount current, the
filesystem of a whole session, and the runtime both mount daemons share. It reaches a store only
through :class:`~memfs.protocol.StoreAPI` (a local :class:`~memfs.store.Store` or a server's client,
handed in by the daemons that mount it: :mod:`memfs.daemons.mount`, :mod:`memfs.daemons.sessionfs`)
and may import :mod:`memfs.protocol`, :mod:`memfs.background` (the rule for background services'
failures), :mod:`memfs.rules`, :mod:`memfs.errors`, :mod:`memfs.models` and the launcher's
memory prompt (:mod:`memfs.launcher.prompt`, over the models only: ``.sessions/*/prompt.md``)
(and, for the type
checker only, the types of :mod:`memfs.backends.watch` and :mod:`memfs.recall`); never the store,
the database, the API, the client or HTTP.

The modules, each building only on those before it:

- :mod:`~memfs.fuse.scratch` (which names are session scratch, editors' temporary files),
  :mod:`~.tree` (the inode tree and its content cache, no pyfuse3), :mod:`~.describe`
  (``.describe``, no pyfuse3), :mod:`~.toolevents` (tool event pairs and their sink),
  :mod:`~.history` (``.history/``, no pyfuse3), :mod:`~.xattrs` (the files' extended
  attributes: what a memory says about itself), :mod:`~.sessionlog` (``.sessions/``, no
  pyfuse3), :mod:`~.search` (``.search/``, no pyfuse3)
  and :mod:`~.spin` (the trio thread kept turning for a moment after each request, no
  pyfuse3);
- :mod:`~.kernel` (the errno table, ``/proc``, the kernel's caches) and :mod:`~.reader`
  (pyfuse3's request loop reading with one wait a request, turning in the spinner's window);
- :mod:`~.dotdirs`: ``.history``, ``.search`` and ``.describe`` as handler objects of their
  own, and the
  dispatch that hands them their requests, once per request, by inode, file handle or entry;
  and :mod:`~.sessions_dir`, ``.sessions`` as one;
- the parts of :class:`~memfs.fuse.ops.Operations`, one object each, which it holds and calls
  by name: :mod:`~.core` (its state and helpers, :class:`~memfs.fuse.core.Mount`, given to the
  others), :mod:`~.feed` (loading, the change feed) and :mod:`~.buffers` (write buffers and
  commits); and :mod:`~.ops` itself (the pyfuse3 handlers of the tree, and only they);
- :mod:`~.watch` (the background services of a mount), :mod:`~.session` (one filesystem
  over a session's stores, one unchanged :class:`~memfs.fuse.ops.Operations` each) and
  :mod:`~.runtime` (mount, readiness, the services, serving until a signal, the unmount on
  every way out: what both daemons run).

Nothing is imported here: ``import memfs.fuse.tree`` loads neither pyfuse3 nor trio.
"""
