"""Search: the Console's substring search, recall (words and meaning), Console
sign-outs and maintenance."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest
from ..models import SNAPSHOT_KEY, Memory, SessionResource
from ..rules import (
    MAX_QUERY_CHARS,
    SEARCH_DEFAULT_LIMIT,
    SEARCH_DEFAULT_THRESHOLD,
    SEARCH_MAX_LIMIT,
    format_time,
    validate_text,
)
from .base import Core, Part
from .common import ASCII_LOWER, BASIC_MEMORY_COLS
from .frontmatter import expiry_mode
from .rows import memory_from_row

if TYPE_CHECKING:
    from ..recall.embeddings import Provider
    from ..recall.indexer import Progress as IndexProgress
    from ..recall.search import Result as SearchResult
    from .sessions import Sessions


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchHit:
    """A memory found by :meth:`Store.search.hits`: the memory (without content), whether
    its path matched, and for a content match ``(before, match, after)`` around the first hit
    (the match as written in the memory)."""

    memory: Memory
    in_path: bool
    snippet: tuple[str, str, str] | None


def cut_note(threshold: float, best: float) -> str:
    """The note of a search whose ``threshold`` left every memory out (the best scored
    ``best``)."""
    return (f"nothing scored {threshold:g} or more (best {best:.2f}): nothing stored seems to "
            "answer this")


def _said_if_cut(result: SearchResult, threshold: float) -> SearchResult:
    """``result``, whose note says so if the threshold left every memory out (before the
    note it had: why meaning did not help)."""
    if not result.hits and result.best is not None and result.best < threshold:
        note = cut_note(threshold, result.best)
        result.note = note if not result.note else f"{note}; {result.note}"
    return result


class Search(Part):
    """The store's search (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, sessions: Sessions) -> None:
        super().__init__(core)
        self.sessions = sessions

    # -- search (the Console) ----------------------------------------------------------------

    #: Characters of content shown on each side of a search hit.
    context = 60

    def hits(self, store_id: str, query: str, *, limit: int = 100) -> list[SearchHit]:
        """The live memories whose path or content contains ``query``, path hits first, then
        in path order, at most ``limit``. The match is a substring match, case-insensitive
        for ASCII letters (SQLite's ``LIKE``; ``%``, ``_`` and ``\\`` in ``query`` are
        literal). A content hit carries a snippet around its first occurrence.

        :raises InvalidRequest: an empty or overlong query, a bad limit.
        :raises NotFound: unknown store.
        """
        if not isinstance(query, str) or not query:
            raise InvalidRequest("search for at least one character")
        if len(query) > self.limits.max_path_bytes:
            raise InvalidRequest(
                f"a search is at most {self.limits.max_path_bytes} characters long")
        validate_text({"query": query}, "search")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000")
        # ASCII letters folded here and by lower() in SQL (ASCII-only on SQLite, and on
        # PostgreSQL's "C" collation of every column): the same match on both backends.
        folded = query.translate(ASCII_LOWER)
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", folded) + "%"
        n = self.context
        with self.core.read() as c:
            self.core.store_in(c, store_id)
            rows = c.execute(
                f"SELECT {BASIC_MEMORY_COLS}, in_path, at, "
                "CASE WHEN at > 0 THEN substr(body, CASE WHEN at - :n > 1 THEN at - :n ELSE 1 "
                "END, CASE WHEN at - 1 < :n THEN at - 1 ELSE :n END + :qlen + :n) END "
                "AS snippet "
                "FROM (SELECT *, content AS body, lower(path) LIKE :p ESCAPE '\\' AS in_path, "
                + self.core.database.position_sql.format("lower(content)", ":q") + " AS at "
                "FROM memories WHERE store_id = :s AND (lower(path) LIKE :p ESCAPE '\\' OR "
                "lower(content) LIKE :p ESCAPE '\\')) AS hit ORDER BY in_path DESC, path "
                "LIMIT :limit",
                {"s": store_id, "p": pattern, "q": folded, "qlen": len(query), "n": n,
                 "limit": limit},
            ).fetchall()
        hits = []
        for r in rows:
            snippet = None
            if r["snippet"] is not None:
                text = r["snippet"]
                # The hit's offset in the snippet: its first occurrence there, the snippet
                # starting at most n characters before the first one in the content.
                start = text.translate(ASCII_LOWER).find(folded)
                if start < 0:
                    start = r["at"] - 1 - max(0, r["at"] - 1 - n)
                snippet = (text[:start], text[start:start + len(query)],
                           text[start + len(query):])
            hits.append(SearchHit(memory_from_row(r, False), bool(r["in_path"]), snippet))
        return hits

    # -- recall (memfs.recall) ----------------------------------------------------------------

    #: The longest question (characters).
    max_query_chars = MAX_QUERY_CHARS
    #: Hits of a search: the default and the most.
    default_limit, max_limit = SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT
    #: The relevance a hit needs by default (:meth:`search`'s ``threshold``).
    default_threshold = SEARCH_DEFAULT_THRESHOLD
    _embeddings: Any = None
    _embeddings_set = False

    @property
    def embeddings(self) -> Provider | None:
        """The provider of embeddings of this process's searches and indexers: the one
        :meth:`use_embeddings` chose, else ``$MEMFS_EMBEDDINGS``, else the local model."""
        if not self._embeddings_set:
            self.use_embeddings(None)
        provider: Provider | None = self._embeddings
        return provider

    def use_embeddings(self, setting: str | Provider | None) -> None:
        """Choose the provider (a setting as :func:`memfs.recall.embeddings.from_setting`
        reads it, or a provider). :raises InvalidRequest: a setting naming none."""
        from ..recall import embeddings

        self._embeddings = (embeddings.from_setting(setting)
                            if setting is None or isinstance(setting, str) else setting)
        self._embeddings_set = True

    def in_store(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, threshold: float | None = None,
               fusion: str = "calibrated", channels: tuple[str, ...] = ("words", "meaning"),
               memory_type: str | None = None) -> SearchResult:
        """The store's memories that answer ``query`` best, by their words and their meaning
        (memfs.recall.search says how they are ranked), best first: at most ``limit``
        (default 10, at most 100), only under ``path_prefix`` if given, none of a relevance
        below ``threshold`` (0 to 1, default :data:`~memfs.rules.SEARCH_DEFAULT_THRESHOLD`);
        by words alone if ``channels`` is ``("words",)``; only memories of ``memory_type`` if
        given (SPEC §8). In a store whose expiry is on, an expired memory is never found (in
        one that only reports expiry it is, until a person turns expiry on); a memory another
        live memory supersedes ranks lower and its hit says ``stale``
        (:mod:`memfs.recall.search`). The result's ``best`` is the best
        relevance seen before the threshold; when the threshold left every memory out, its
        ``note`` says so (an empty answer then means that nothing stored seems to answer the
        question). Each hit carries its ``memory_store_id``. A memory is found by its words as
        soon as its write has returned (the words its writes queued are indexed first:
        :meth:`catch_up_words`); by its meaning once an indexer has embedded it
        (:meth:`index`).

        :raises InvalidRequest: an empty or overlong query, a bad limit, prefix, threshold,
            channels or type.
        :raises NotFound: unknown store.
        """
        limit, path_prefix, threshold = self._search_args(query, limit, path_prefix, threshold,
                                                          channels, memory_type)
        from ..recall.search import FUSIONS

        if fusion not in FUSIONS:
            raise InvalidRequest(f"fusion must be one of {', '.join(FUSIONS)}")
        return _said_if_cut(self._search_one(store_id, query, limit, path_prefix, threshold,
                                             fusion, channels, memory_type), threshold)

    def _search_one(self, store_id: str, query: str, limit: int, path_prefix: str | None,
                    threshold: float, fusion: str, channels: tuple[str, ...],
                    memory_type: str | None) -> SearchResult:
        """:meth:`search` once its arguments are checked, without the note of a cut. What it
        searches is a :class:`~memfs.recall.scope.Scope`: the prefix, the type, and in a
        store whose expiry is on (:func:`~memfs.store.frontmatter.expiry_mode`) the memories
        not expired now."""
        from ..recall import search

        with self.core.read() as c:
            row = c.execute("SELECT metadata, expiry FROM stores WHERE id = ?",
                            (store_id,)).fetchone()
            if row is None:
                self.core.store_in(c, store_id)  # NotFound
        on = expiry_mode(json.loads(row["metadata"] or "{}"), row["expiry"]) == "on"
        if "words" in channels:
            while self.catch_up_words(store_id):
                pass
        now = datetime.now(UTC)
        scope = search.Scope(path_prefix, memory_type, format_time(now) if on else None)
        result = search.run(self.core, store_id, query, provider=self.embeddings, limit=limit,
                            scope=scope, threshold=threshold, fusion=fusion,
                            channels=channels, now=now)
        result.hits = [replace(h, memory_store_id=store_id) for h in result.hits]
        return result

    def in_stores(self, store_ids: Sequence[str], query: str, *,
                      limit: int | None = None, path_prefix: str | None = None,
                      threshold: float | None = None,
                      channels: tuple[str, ...] = ("words", "meaning"),
                      memory_type: str | None = None) -> SearchResult:
        """One question asked of several stores (a session's): each store's hits, as
        :meth:`search` finds them, merged by relevance (best first, at most ``limit`` in
        all), each carrying its ``memory_store_id``. ``meaning`` is True if it ranked in
        every store; ``indexed`` and ``memories`` are the stores' sums; ``note`` gathers the
        stores' notes (each after its store's id), or says that the threshold left every
        memory out.

        :raises InvalidRequest: no store, a store twice, or what :meth:`search` refuses.
        :raises NotFound: an unknown store.
        """
        from ..recall.search import Result

        limit, path_prefix, threshold = self._search_args(query, limit, path_prefix, threshold,
                                                          channels, memory_type)
        ids = list(store_ids)
        if not ids or len(set(ids)) != len(ids):
            raise InvalidRequest("search at least one store, each once")
        results = [self._search_one(sid, query, limit, path_prefix, threshold, "calibrated",
                                    channels, memory_type)
                   for sid in ids]
        merged = Result([], all(r.meaning for r in results))
        merged.hits = sorted((h for r in results for h in r.hits),
                             key=lambda h: (-h.score, h.memory_store_id or "", h.path))[:limit]
        merged.indexed = sum(r.indexed for r in results)
        merged.memories = sum(r.memories for r in results)
        models = {r.model for r in results if r.model}
        merged.model = models.pop() if len(models) == 1 else None
        seen = [r.best for r in results if r.best is not None]
        merged.best = max(seen) if seen else None
        notes = [f"{sid}: {r.note}" for sid, r in zip(ids, results, strict=True) if r.note]
        merged.note = "; ".join(notes) or None
        return _said_if_cut(merged, threshold)

    def session_stores(self, session_id: str) -> list[SessionResource]:
        """The stores a search of the session asks (:meth:`in_session`): those attached
        to it, but for those it mounts as they were at a past time (time travel: their
        mounts have no ``.search``, and their present is not the session's to see) and those
        deleted since (a session keeps their resources).

        :raises NotFound: unknown session.
        """
        session = self.sessions.get(session_id)
        wanted = [r for r in session.resources
                  if SNAPSHOT_KEY + r.memory_store_id not in session.metadata]
        if not wanted:
            return []
        ids = [r.memory_store_id for r in wanted]
        alive = {row[0] for row in self.core.database.all(
            f"SELECT id FROM stores WHERE id IN ({', '.join('?' * len(ids))})", ids)}
        return [r for r in wanted if r.memory_store_id in alive]

    def in_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning"),
                       memory_type: str | None = None) -> SearchResult:
        """One question asked of every store of a session (:meth:`session_stores`), hits
        merged by relevance (:meth:`in_stores`).

        :raises NotFound: unknown session.
        :raises InvalidRequest: a session with no store to search, or what :meth:`search`
            refuses.
        """
        ids = [r.memory_store_id for r in self.session_stores(session_id)]
        if not ids:
            raise InvalidRequest(f"session {session_id} has no memory store to search")
        return self.in_stores(ids, query, limit=limit, path_prefix=path_prefix,
                                  threshold=threshold, channels=channels,
                                  memory_type=memory_type)

    def _search_args(self, query: str, limit: int | None, path_prefix: str | None,
                     threshold: float | None, channels: tuple[str, ...],
                     memory_type: str | None = None) -> tuple[int, str | None, float]:
        """A search's arguments checked, with their defaults: ``(limit, path_prefix,
        threshold)``. :raises InvalidRequest:"""
        if memory_type is not None and (not isinstance(memory_type, str)
                                        or not 0 < len(memory_type) <= 64):
            raise InvalidRequest("type must be 1 to 64 characters")
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("search for at least one word")
        if len(query) > self.max_query_chars:
            raise InvalidRequest(f"a search is at most {self.max_query_chars} characters long")
        validate_text({"query": query}, "search")
        if "\x00" in query:
            raise InvalidRequest("a search cannot hold a NUL character")
        if limit is None:
            limit = self.default_limit
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= self.max_limit:
            raise InvalidRequest(f"limit must be between 1 and {self.max_limit}")
        if path_prefix is not None:
            if not isinstance(path_prefix, str) or not path_prefix.startswith("/") \
                    or len(path_prefix.encode("utf-8", "surrogatepass")) \
                    > self.limits.max_path_bytes:
                raise InvalidRequest("path_prefix must be a path beginning with /")
            validate_text({"path_prefix": path_prefix}, "search")
            if "\x00" in path_prefix:
                raise InvalidRequest("path_prefix cannot hold a NUL character")
        if threshold is None:
            threshold = self.default_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
                or not 0.0 <= threshold <= 1.0:
            raise InvalidRequest("threshold must be between 0 and 1")
        if not channels or not set(channels) <= {"words", "meaning"}:
            raise InvalidRequest("channels must be words, meaning or both")
        return limit, path_prefix or None, float(threshold)

    def catch_up_words(self, store_id: str | None = None) -> int:
        """Index the words of a batch of the memories whose writes queued them (of
        ``store_id``, else of any store; :mod:`memfs.recall.wordsqueue`): what a search does
        first, and a quiet mount or server in the background. Returns how many (0: none was
        left).

        :raises Busy, StorageError:
        """
        from ..recall import wordsqueue

        return wordsqueue.catch_up(self.core.database, store_id)

    def index(self, store_id: str, *, seconds: float | None = None) -> IndexProgress:
        """Embed the store's memories that have no current vector (at most ``seconds``), as
        an indexer does in the background; with no provider, nothing.

        :raises NotFound: unknown store.
        """
        from ..recall.indexer import Indexer, Progress

        with self.core.read() as c:
            self.core.store_in(c, store_id)
        provider = self.embeddings
        if provider is None:
            return Progress(reason="meaning is off (--embeddings none)")
        deadline = None if seconds is None else time.monotonic() + seconds
        return Indexer(self.core, provider).catch_up(store_id, deadline=deadline)

    def status(self, store_id: str) -> dict[str, Any]:
        """How far the store is indexed: ``memories``, ``indexed`` (by meaning, with the
        current provider's ``model``), ``indexing`` (the process holding the store's lease, if
        any) and ``reason`` when some are not (None once all are): catching up, the
        provider's last failure in this process, or no indexer running.

        :raises NotFound: unknown store.
        """
        from ..recall.indexer import Indexer, last_failure, pending_count

        with self.core.read() as c:
            store = self.core.store_in(c, store_id)
        total = int(self.core.one("SELECT memory_count FROM stores WHERE id = ?",
                              (store_id,))[0])  # type: ignore[index]
        provider = self.embeddings
        if provider is None:
            return {"store_id": store.id, "name": store.name, "memories": total,
                    "indexed": 0, "model": None, "indexing": None,
                    "reason": "meaning is off (--embeddings none)"}
        pending = pending_count(self.core, store_id, provider.model)
        holder = Indexer(self.core, provider).lease_holder(store_id)
        reason = None
        if pending:
            reason = ("catching up" if holder else
                      last_failure(store_id, provider.model) or
                      "not indexed yet: no indexer is running for this store "
                      "(a mount, memfs serve or memfs search index it)")
        return {"store_id": store.id, "name": store.name, "memories": total,
                "indexed": total - pending, "model": provider.model, "indexing": holder,
                "reason": reason}

    # -- Console sign-outs (memfs.console.web) ------------------------------------------------

    # -- maintenance -------------------------------------------------------------------------

