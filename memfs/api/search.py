"""The recall endpoints of the HTTP API (memfs extensions; :mod:`memfs.api.routes` routes them):

- ``GET /v1/memory_stores/{id}/memfs/search?query=&limit=&path_prefix=&threshold=&channels=
  &memfs_type=``: the store's memories (of a type, with ``memfs_type``) that answer a
  question best, by their words and their meaning
  (:meth:`memfs.store.Store.search.in_store`), as a ``memfs_search_result``; none under the
  threshold
  (default 0.7): when none passes, ``data`` is empty, ``best`` is the best relevance seen and
  ``note`` says so. ``min_score`` is the deprecated name of ``threshold`` (clients exist);
- ``GET /v1/sessions/{id}/memfs/search?query=&...``: the same question asked of every store of
  a session (:meth:`memfs.store.Store.search.in_session`), hits merged by relevance, each with its
  ``memory_store_id``; a session token may ask it of its own session only;
- ``GET /v1/memory_stores/{id}/memfs/search_status``: how far the store is indexed by meaning
  (:meth:`memfs.store.Store.search.status`), as a ``memfs_search_status``.

The wire shapes (:meth:`memfs.recall.search.Result.to_dict`) are those the client
(``memfs.client.Client.search.in_store``), the CLI and remote mounts read. Every rule about the
values (an empty question, a limit of 0 or 101, a prefix without its ``/``, a score outside
0..1, NUL, lone surrogates) is the store's; a search that meaning cannot help answers by words
alone, and its ``note`` says why.

A session token may search the stores its session has attached (read access is enough);
another store is a 404 like an unknown one (:func:`memfs.api.auth.authorize`). Its status says
that an indexer is at work (``indexing``: ``"an indexer"``), not which host and process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rules import (
    MAX_QUERY_CHARS,
    SEARCH_DEFAULT_THRESHOLD,
    SEARCH_MAX_LIMIT,
    SEARCH_PATTERN,
    SEARCH_PREFIX_PATTERN,
)
from .spec import integer, number, string

if TYPE_CHECKING:
    from .call import Call
    from .spec import Query

#: ``channels``: words, meaning, or both (comma-separated).
CHANNELS_PATTERN = "^(words|meaning)(,(words|meaning))?$"

__all__ = ["SEARCH_QUERY", "search_memories", "search_session", "search_status"]

#: The query parameters of ``.../memfs/search`` (checked by type here, by value in the store).
SEARCH_QUERY = (
    string("query!", description="the question, in any words (at most 1,000 characters)",
           max_length=MAX_QUERY_CHARS, pattern=SEARCH_PATTERN),
    integer("limit", description="hits at most: 1 to 100, default 10", minimum=1,
            maximum=SEARCH_MAX_LIMIT),
    string("path_prefix", description="only memories whose path begins with this (a path "
           "beginning with /, e.g. /people/)", pattern=SEARCH_PREFIX_PATTERN),
    number("threshold", description="only hits of at least this relevance: 0 to 1, default "
           f"{SEARCH_DEFAULT_THRESHOLD} (when none passes, data is empty and note says the best "
           "relevance seen)", minimum=0, maximum=1),
    number("min_score", description="deprecated: the old name of threshold (threshold wins "
           "when both are given)", minimum=0, maximum=1),
    string("channels", description="which indexes rank: words, meaning, or words,meaning (the "
           "default); words alone answers at once, without waiting for meaning",
           pattern=CHANNELS_PATTERN),
    string("memfs_type", description="only memories of this type (a memory's front matter's "
           "type, else its directory's: preference, context, knowledge, decision or a type "
           "of the store's own)", max_length=64),
)

SEARCH_SUMMARY = (
    "search the store's memories by words and meaning, best first (the words index is "
    "always current; meaning covers what an indexer has embedded, and when it cannot help "
    "the words answer alone and note says why)")
SESSION_SUMMARY = (
    "search every memory store of a session at once (those attached to it, but the ones it "
    "mounts as they were at a past time), hits merged by relevance, each with its "
    "memory_store_id")
STATUS_SUMMARY = (
    "how many of the store's memories are indexed by meaning, with which model, who indexes "
    "them now, and why not all are")


async def search_memories(c: Call) -> Any:
    q = c.q
    result = await c.run(c.store.search.in_store, c.p["memory_store_id"], q.text("query") or "",
                         **search_options(q))
    return result.to_dict()


def search_options(q: Query) -> dict[str, Any]:
    """The keyword arguments of :meth:`memfs.store.search.Search.in_store` that a query gives
    (``min_score`` the old name of ``threshold``)."""
    threshold = q.number("threshold", None)
    if threshold is None:
        threshold = q.number("min_score", None)
    channels = q.text("channels")
    return {"limit": q.integer("limit", None), "path_prefix": q.text("path_prefix"),
            "threshold": threshold, "memory_type": q.text("memfs_type"),
            **({"channels": tuple(channels.split(","))} if channels else {})}


async def search_session(c: Call) -> Any:
    result = await c.run(c.store.search.in_session, c.p["session_id"], c.q.text("query") or "",
                         **search_options(c.q))
    return result.to_dict()


async def search_status(c: Call) -> Any:
    status = await c.run(c.store.search.status, c.p["memory_store_id"])
    if c.grant.access is not None and status["indexing"]:  # an agent: not the host and pid
        status["indexing"] = "an indexer"
    return {"type": "memfs_search_status", **status}
