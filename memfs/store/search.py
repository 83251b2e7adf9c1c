"""Search: the Console's substring search, recall (words and meaning), Console
sign-outs and maintenance."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest
from ..models import Memory
from ..rules import MAX_QUERY_CHARS, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, _validate_text
from .archive import ArchivePart
from .common import _ASCII_LOWER, _BASIC_MEMORY_COLS
from .rows import _memory

if TYPE_CHECKING:

    from ..recall.embeddings import Provider
    from ..recall.indexer import Progress as IndexProgress
    from ..recall.search import Result as SearchResult


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchHit:
    """A memory found by :meth:`Store.search_memories`: the memory (without content), whether
    its path matched, and for a content match ``(before, match, after)`` around the first hit
    (the match as written in the memory)."""

    memory: Memory
    in_path: bool
    snippet: tuple[str, str, str] | None


class SearchPart(ArchivePart):
    """The store's search (a part of :class:`memfs.store.Store`)."""

    # -- search (the Console) ----------------------------------------------------------------

    #: Characters of content shown on each side of a search hit.
    search_context = 60

    def search_memories(self, store_id: str, query: str, *, limit: int = 100) -> list[SearchHit]:
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
        _validate_text({"query": query}, "search")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000")
        # ASCII letters folded here and by lower() in SQL (ASCII-only on SQLite, and on
        # PostgreSQL's "C" collation of every column): the same match on both backends.
        folded = query.translate(_ASCII_LOWER)
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", folded) + "%"
        n = self.search_context
        with self._read() as c:
            self._store_in(c, store_id)
            rows = c.execute(
                f"SELECT {_BASIC_MEMORY_COLS}, in_path, at, "
                "CASE WHEN at > 0 THEN substr(body, CASE WHEN at - :n > 1 THEN at - :n ELSE 1 "
                "END, CASE WHEN at - 1 < :n THEN at - 1 ELSE :n END + :qlen + :n) END "
                "AS snippet "
                "FROM (SELECT *, content AS body, lower(path) LIKE :p ESCAPE '\\' AS in_path, "
                + self.database.position_sql.format("lower(content)", ":q") + " AS at "
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
                start = text.translate(_ASCII_LOWER).find(folded)
                if start < 0:
                    start = r["at"] - 1 - max(0, r["at"] - 1 - n)
                snippet = (text[:start], text[start:start + len(query)],
                           text[start + len(query):])
            hits.append(SearchHit(_memory(r, False), bool(r["in_path"]), snippet))
        return hits

    # -- recall (memfs.recall) ----------------------------------------------------------------

    #: The longest question (characters).
    max_query_chars = MAX_QUERY_CHARS
    #: Hits of a search: the default and the most.
    search_default_limit, search_max_limit = SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT
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

    def search(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, min_score: float = 0.0,
               fusion: str = "rrf", channels: tuple[str, ...] = ("words", "meaning"),
               ) -> SearchResult:
        """The store's memories that answer ``query`` best, by their words and their meaning
        (memfs.recall.search says how they are ranked), best first: at most ``limit``
        (default 10, at most 100), only under ``path_prefix`` if given, none scoring below
        ``min_score`` (0 to 1). A memory is found by its words as soon as its write has
        returned (the words its writes queued are indexed first: :meth:`catch_up_words`); by
        its meaning once an indexer has embedded it (:meth:`index_store`).

        :raises InvalidRequest: an empty or overlong query, a bad limit, prefix or score.
        :raises NotFound: unknown store.
        """
        from ..recall import search

        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("search for at least one word")
        if len(query) > self.max_query_chars:
            raise InvalidRequest(f"a search is at most {self.max_query_chars} characters long")
        _validate_text({"query": query}, "search")
        if "\x00" in query:
            raise InvalidRequest("a search cannot hold a NUL character")
        if limit is None:
            limit = self.search_default_limit
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= self.search_max_limit:
            raise InvalidRequest(f"limit must be between 1 and {self.search_max_limit}")
        if path_prefix is not None:
            if not isinstance(path_prefix, str) or not path_prefix.startswith("/") \
                    or len(path_prefix.encode("utf-8", "surrogatepass")) \
                    > self.limits.max_path_bytes:
                raise InvalidRequest("path_prefix must be a path beginning with /")
            _validate_text({"path_prefix": path_prefix}, "search")
            if "\x00" in path_prefix:
                raise InvalidRequest("path_prefix cannot hold a NUL character")
        if isinstance(min_score, bool) or not isinstance(min_score, int | float) \
                or not 0.0 <= min_score <= 1.0:
            raise InvalidRequest("min_score must be between 0 and 1")
        if fusion not in ("rrf", "weighted"):
            raise InvalidRequest("fusion must be rrf or weighted")
        with self._read() as c:
            self._store_in(c, store_id)
        if "words" in channels:
            while self.catch_up_words(store_id):
                pass
        return search.run(self, store_id, query, provider=self.embeddings, limit=limit,
                          path_prefix=path_prefix or None, min_score=float(min_score),
                          fusion=fusion, channels=channels)

    def catch_up_words(self, store_id: str | None = None) -> int:
        """Index the words of a batch of the memories whose writes queued them (of
        ``store_id``, else of any store; :mod:`memfs.recall.wordsqueue`): what a search does
        first, and a quiet mount or server in the background. Returns how many (0: none was
        left).

        :raises Busy, StorageError:
        """
        from ..recall import wordsqueue

        return wordsqueue.catch_up(self.database, store_id)

    def index_store(self, store_id: str, *, seconds: float | None = None) -> IndexProgress:
        """Embed the store's memories that have no current vector (at most ``seconds``), as
        an indexer does in the background; with no provider, nothing.

        :raises NotFound: unknown store.
        """
        from ..recall.indexer import Indexer, Progress

        with self._read() as c:
            self._store_in(c, store_id)
        provider = self.embeddings
        if provider is None:
            return Progress(reason="meaning is off (--embeddings none)")
        deadline = None if seconds is None else time.monotonic() + seconds
        return Indexer(self, provider).catch_up(store_id, deadline=deadline)

    def search_status(self, store_id: str) -> dict[str, Any]:
        """How far the store is indexed: ``memories``, ``indexed`` (by meaning, with the
        current provider's ``model``), ``indexing`` (the process holding the store's lease, if
        any) and ``reason`` when some are not (None once all are): catching up, the
        provider's last failure in this process, or no indexer running.

        :raises NotFound: unknown store.
        """
        from ..recall.indexer import Indexer, last_failure, pending_count

        with self._read() as c:
            store = self._store_in(c, store_id)
        total = int(self._one("SELECT memory_count FROM stores WHERE id = ?",
                              (store_id,))[0])  # type: ignore[index]
        provider = self.embeddings
        if provider is None:
            return {"store_id": store.id, "name": store.name, "memories": total,
                    "indexed": 0, "model": None, "indexing": None,
                    "reason": "meaning is off (--embeddings none)"}
        pending = pending_count(self, store_id, provider.model)
        holder = Indexer(self, provider).lease_holder(store_id)
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

    def revoke_signin(self, signin: str, expires_at: int) -> None:
        """Record that the Console sign-in ``signin`` (a digest of its cookie's nonce) was
        signed out, until ``expires_at`` (Unix seconds, its cookie's expiry); sign-outs past
        their expiry are forgotten at the same time."""
        with self._write() as c:
            c.execute("DELETE FROM console_signouts WHERE expires_at < ?",
                      (int(datetime.now(UTC).timestamp()),))
            c.execute("INSERT INTO console_signouts (signin, expires_at) VALUES (?, ?) "
                      "ON CONFLICT (signin) DO NOTHING", (signin, expires_at))

    def signin_revoked(self, signin: str) -> bool:
        """Whether the Console sign-in ``signin`` was signed out (:meth:`revoke_signin`)."""
        return self._one("SELECT 1 FROM console_signouts WHERE signin = ?",
                         (signin,)) is not None

    # -- maintenance -------------------------------------------------------------------------

    def integrity_check(self) -> str:
        row = self._one("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"
