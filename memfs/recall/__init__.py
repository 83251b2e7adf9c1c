"""Recall: memories found by their words and by their meaning.

- :mod:`memfs.recall.schema`: the words index (kept by the database in the same transaction as
  every change of a memory) and the vectors' table, on both backends.
- :mod:`memfs.recall.words`: a question as a text-search query, and the snippet of a hit.
- :mod:`memfs.recall.embeddings`: the providers of embeddings (the local model, Ollama, any
  OpenAI-compatible service) and the ``--embeddings`` setting that chooses one.
- :mod:`memfs.recall.indexer`: the indexer that follows the store and embeds what changed,
  off the write path, one process at a time per store.
- :mod:`memfs.recall.search`: the ranking (words and meaning fused, recency) behind
  :meth:`memfs.store.Store.search.in_store`.
- :mod:`memfs.recall.worker` and :mod:`memfs.recall.supervisor`: a mount daemon's indexer
  process (``python -m memfs.daemons.indexworker``), which indexes and ranks by meaning for
  the daemon (so that the daemon never loads a model), and what starts it, asks it and ends it.

Nothing here imports numpy or a model until a search by meaning or an indexer needs them.
"""
