"""Which of a store's memories a search considers (:class:`Scope`): those under a path prefix,
of a type (issue 41), and not expired in a store whose expiry is on. One SQL condition over the
``memories`` table, the same for the words (:mod:`memfs.recall.wordsindex`: their counts and
postings), meaning (:func:`memfs.recall.search.rank`, here or in a mount's indexer process)
and the candidates' rows, so that a memory left out is left out of every channel: an expired
memory is never a hit, and a search by type ranks that type's memories against each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Scope", "EVERY"]


@dataclass(frozen=True)
class Scope:
    """The memories a search considers.

    - ``path_prefix``: only those whose path begins with it;
    - ``memory_type``: only those of that type (``memories.mtype``);
    - ``live_at``: an RFC 3339 time (:func:`memfs.rules.format_time`) when the store's
      expiry is on: only the memories that have not expired then (``expires_at`` after it,
      or none). None: the store only reports expiry (its expired memories stay found) or the
      caller leaves expiry to the store. The store decides it (:mod:`memfs.recall` cannot
      read a store's expiry mode: its rules are the store's).
    """

    path_prefix: str | None = None
    memory_type: str | None = None
    live_at: str | None = None

    def sql(self, alias: str = "m") -> tuple[str, tuple[Any, ...]]:
        """The condition (``" AND ..."``, or ``""`` when it keeps every memory) over the
        ``memories`` table named ``alias``, and its parameters."""
        parts: list[str] = []
        params: list[Any] = []
        if self.path_prefix:
            parts.append(f"substr({alias}.path, 1, ?) = ?")
            params += [len(self.path_prefix), self.path_prefix]
        if self.memory_type is not None:
            parts.append(f"{alias}.mtype = ?")
            params.append(self.memory_type)
        if self.live_at is not None:
            parts.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)")
            params.append(self.live_at)
        return "".join(f" AND {p}" for p in parts), tuple(params)

    def __bool__(self) -> bool:
        return bool(self.path_prefix) or self.memory_type is not None \
            or self.live_at is not None

    def to_wire(self) -> dict[str, Any]:
        """What a question to a mount's indexer process carries of it."""
        return {"path_prefix": self.path_prefix, "memory_type": self.memory_type,
                "live_at": self.live_at}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Scope:
        def text(key: str) -> str | None:
            value = d.get(key)
            return value if isinstance(value, str) else None

        return cls(text("path_prefix"), text("memory_type"), text("live_at"))


#: Every memory of the store.
EVERY = Scope()
