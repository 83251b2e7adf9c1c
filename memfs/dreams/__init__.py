"""Dreams (API.md §5, issue 13): a model, or any agent program, consolidates a memory store and
the transcripts of some sessions into the dream's output store; this package runs them.

The package owns running a dream: what the model reads, the calls to the model, the
conversation through the memory tool, the dreams a process runs and the sweep that fails those
whose runner died, and a dream run by a command. The store keeps the rows and every rule of
them (:mod:`memfs.store.dreams`); the API and the CLI start, list and cancel them
(:mod:`memfs.api.dreams`, :mod:`memfs.cli.dreams`). It may import :mod:`memfs.store`,
:mod:`memfs.tools` (the memory tool), :mod:`memfs.errors` and :mod:`memfs.models`, and
:mod:`memfs.launcher` for a dream run by a command; never the filesystem, the API or the CLI.

The modules, each building only on those before it:

- :mod:`~memfs.dreams.prompt` (the system prompt and the first message), :mod:`~.model` (the
  Messages API client, what calling it needs);
- :mod:`~.runner` (:class:`~.runner.DreamRun`: one dream, the model's conversation to its end),
  :mod:`~.dreamer` (:class:`~.dreamer.Dreamer`: the dreams of a process, the sweep, the API
  app's lifespan) and :mod:`~.command` (``memfs dream STORE -- COMMAND``).

Nothing is imported here.
"""
