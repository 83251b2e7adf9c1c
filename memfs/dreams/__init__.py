"""Dreams (API.md §5, issue 13): a model, or any agent program, consolidates a memory store
into its output store; this package runs them (the store keeps their rows:
:mod:`memfs.store.dreams`; the API and the CLI serve them: :mod:`memfs.api.dreams`,
:mod:`memfs.cli.dreams`).

- :mod:`~memfs.dreams.runner`: a dream run by the model, the dreams a process runs, and a
  dream run by a command (``memfs dream STORE -- COMMAND``).

Nothing is imported here.
"""
