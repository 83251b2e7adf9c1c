"""One database of a test on one backend (the ``backend`` fixture of tests/conftest.py runs a
test on SQLite and on PostgreSQL)."""

from __future__ import annotations

from typing import Any

from memfs.store import Limits, Store


class Backend:
    """One database of a test on one backend: :meth:`open` opens a Store on it (each a
    process of its own would have: on PostgreSQL, a pool of its own, like a replica)."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self._stores: list[Store] = []

    def open(self, limits: Limits | None = None, **kwargs: Any) -> Store:
        s = Store(self.url, limits=limits or Limits(), **kwargs)
        self._stores.append(s)
        return s

    def close(self) -> None:
        for s in self._stores:
            s.close()
