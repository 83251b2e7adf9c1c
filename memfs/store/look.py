"""What a memory write reads before it writes, in ONE statement: its store (there, not
archived, how many memories it holds, its types), the memory it changes, and the memory that
blocks the path it takes (the overlap rule). On PostgreSQL each statement under the write lock
is a round trip that every other writer of the store waits for; reading these one by one
cost three or four.

The overlap rule's SQL is here, once: :func:`blockers_sql` (used alone by
:meth:`Memories.check_path_free <memfs.store.memories.Memories.check_path_free>`, and inside
:func:`look_in`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..backends import Connection, Row
from ..errors import NotFound, PathConflict
from .common import archived, no_store


def overlap(path: str, other: str) -> str:
    """Why ``path`` cannot be placed beside ``other``: the same path, or one below the
    other (:func:`blockers_sql`)."""
    if other == path:
        return f"a memory already exists at {path}"
    if len(other) < len(path):
        return f"{other} is a memory, so {path} cannot be below it"
    return f"{path} is a directory of memories (e.g. {other})"


def conflict(path: str, blocker_id: str, blocker_path: str) -> PathConflict:
    """The PathConflict of ``path`` blocked by the memory ``blocker_id`` at ``blocker_path``."""
    return PathConflict(overlap(path, blocker_path), conflicting_memory_id=blocker_id,
                        conflicting_path=blocker_path)


def blockers_sql(store_id: str, path: str, skip: int) -> tuple[str, list[Any]]:
    """The memories of ``store_id`` that may block ``path`` (``/a`` and ``/a/b`` cannot both
    exist), as a query of columns ``o``, ``path``, ``id``: the one at ``path`` and those at
    its ancestors (``o`` 0), then its first ``skip + 1`` descendants in path order (``o`` 1;
    paths in [path + "/", path + "0"), "0" being the byte after "/"). One more descendant
    than the caller skips (the memories it moves), so that a blocker is found even when
    skipped ones sort before it. In ``o, path`` order, the first not skipped blocks."""
    # The ancestors: the path up to each of its slashes but the first.
    candidates = [path] + [path[:i] for i, ch in enumerate(path) if ch == "/" and i]
    return _blockers_text(len(candidates)), [
        store_id, *candidates, store_id, path + "/", path + "0", skip + 1]


@lru_cache(maxsize=64)
def _blockers_text(candidates: int) -> str:
    """The text of :func:`blockers_sql` for a path with ``candidates - 1`` ancestors (made
    once per depth: every write asks)."""
    return (
        "SELECT 0 AS o, path, id FROM memories WHERE store_id = ? AND path IN "
        f"({','.join('?' * candidates)}) "
        "UNION ALL SELECT 1, path, id FROM (SELECT path, id FROM memories "
        "WHERE store_id = ? AND path > ? AND path < ? ORDER BY path LIMIT ?) AS d"
    )


@dataclass(frozen=True)
class Look:
    """What :func:`look_in` read: the store (``found``: it exists), the memory asked for
    (None: none) and the memory blocking the path asked about (``(id, path)``)."""

    store_id: str
    found: bool
    archived: bool
    memory_count: int
    metadata: str | None
    memory: Row | None
    blocker: tuple[str, str] | None

    def writable(self) -> None:
        """:raises NotFound: no such store. :raises StoreArchived:"""
        if not self.found:
            raise no_store(self.store_id)
        if self.archived:
            raise archived(self.store_id)

    def the_memory(self, column: str, value: str) -> Row:
        """The memory asked for. :raises NotFound: no such store, or no such memory in it
        (as :meth:`Memories.memory_in <memfs.store.memories.Memories.memory_in>`)."""
        if self.memory is not None:
            return self.memory
        if not self.found:
            raise no_store(self.store_id)
        if column == "path":
            raise NotFound(f"no memory at {value} in {self.store_id}")
        raise NotFound(f"memory {value!r} not found in {self.store_id}")

    def check_free(self, path: str) -> None:
        """:raises PathConflict: a memory blocks ``path`` (the path asked about)."""
        if self.blocker is not None:
            raise conflict(path, *self.blocker)


def look_in(
    c: Connection,
    store_id: str,
    *,
    memory: tuple[str, str] | None = None,
    free: str | None = None,
    exclude: Collection[str] = (),
) -> Look:
    """One statement: the store, the live memory whose ``memory[0]`` (``id`` or ``path``) is
    ``memory[1]``, and the first memory that blocks ``free`` other than that memory and those
    in ``exclude`` (a few: each is a parameter). When ``memory`` is the path ``free`` itself and
    a memory is there (an overwrite), nothing can block that path (no two memories overlap):
    the blocker is then not looked for, and is None."""
    params: list[Any] = []
    if memory is not None:
        column, value = memory
        if column not in ("id", "path"):
            raise ValueError(f"a memory is looked up by id or path, not {column!r}")
        params.append(value)
    blockers = None
    if free is not None:
        blockers, p = blockers_sql(store_id, free, len(exclude) + (memory is not None))
        params += [*p, *exclude]
    row = c.execute(
        _look_text(memory[0] if memory is not None else None, blockers,
                   len(exclude) if blockers is not None else 0,
                   # The memory at the very path asked about: nothing else can block it (no
                   # two memories overlap), so the blockers are looked for only without it.
                   memory == ("path", free)),
        [*params, store_id],
    ).fetchone()
    if row is None:
        return Look(store_id, False, False, 0, None, None, None)
    found = memory is not None and row["id"] is not None
    blocked = free is not None and row["look_blocker_id"] is not None
    return Look(
        store_id, True, row["look_archived_at"] is not None, int(row["look_memory_count"]),
        row["look_metadata"], row if found else None,
        (row["look_blocker_id"], row["look_blocker_path"]) if blocked else None,
    )


@lru_cache(maxsize=256)
def _look_text(column: str | None, blockers: str | None, excluded: int,
               unless_found: bool = False) -> str:
    """The text of :func:`look_in`'s statement, made once per shape: the memory looked up by
    ``column`` (None: none), the blockers of a path (the text of :func:`blockers_sql`; None:
    no path asked about), and ``excluded`` memories skipped; ``unless_found``: the blockers
    are looked for only when the memory is not found (an overwrite reads no more than an
    unlink)."""
    cols = ["s.archived_at AS look_archived_at", "s.memory_count AS look_memory_count",
            "s.metadata AS look_metadata"]
    joins: list[str] = []
    if column is not None:
        cols.append("m.*")
        joins.append(f"LEFT JOIN memories m ON m.store_id = s.id AND m.{column} = ?")
    if blockers is not None:
        where = [f"k.id NOT IN ({','.join('?' * excluded)})"] if excluded else []
        if column is not None:  # the memory itself never blocks its own path
            where.append("(m.id IS NULL OR k.id <> m.id)")
        cond = f"WHERE {' AND '.join(where)} " if where else ""
        cols += ["b.id AS look_blocker_id", "b.path AS look_blocker_path"]
        first = f"(SELECT k.id FROM ({blockers}) AS k {cond}ORDER BY k.o, k.path LIMIT 1)"
        if unless_found and column is not None:
            first = f"CASE WHEN m.id IS NULL THEN {first} END"  # else not run at all
        joins.append(f"LEFT JOIN memories b ON b.id = {first}")
    return f"SELECT {', '.join(cols)} FROM stores s {' '.join(joins)} WHERE s.id = ?"
