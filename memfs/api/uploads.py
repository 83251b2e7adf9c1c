"""How many request bodies may be on their way at once (issue 19: slow uploads held every
connection of the server).

A request whose body the server is reading holds a connection, and the server has a bounded
number of them (:data:`memfs.daemons.server.FD_RESERVE`: about 768 with 1,024 file descriptors). The
body reader (:func:`memfs.api.body.body_chunks`: the API's JSON bodies and imports, the Console's
forms and uploads) already cuts a body that comes too slowly; :class:`Uploads` bounds how many
may be unfinished at once, so that slow clients never hold them all:

- per client address (:data:`PER_CLIENT`) and per API key (:data:`PER_KEY`: the key of an
  API request, or the one a Console user signed in with): more is answered 429 at once
  (:class:`memfs.errors.TooManyRequests`), the connection closed without reading the body;
- in all (``total``, half the server's connections in ``memfs serve``): more is answered
  503 (:class:`memfs.errors.UploadsFull`, a :class:`~memfs.errors.Busy`), so that the other
  half is always there for new clients and for requests without a body.

Behind a reverse proxy every client has the proxy's address: the per-address limit is then
shared, and the proxy, which sees the clients, should bound them itself (nginx buffers a
request's body before it passes it on, by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .. import errors

#: Unfinished request bodies one client address may have at once.
PER_CLIENT = 32
#: Unfinished request bodies the holders of one API key may have at once.
PER_KEY = 64
#: Unfinished request bodies in all, unless the server says how many (half its connections).
TOTAL = 512


class Uploads:
    """The request bodies being read now, counted by client address and by key."""

    def __init__(self, total: int = TOTAL, per_client: int = PER_CLIENT,
                 per_key: int = PER_KEY) -> None:
        self.total = total
        self.per_client = per_client
        self.per_key = per_key
        self.active = 0
        self._clients: dict[str, int] = {}
        self._keys: dict[str, int] = {}

    def statistics(self) -> dict[str, int]:
        return {"active": self.active, "clients": len(self._clients), "keys": len(self._keys)}

    @contextmanager
    def hold(self, client: str, key: str | None) -> Iterator[None]:
        """One body being read, from ``client`` (its address) for ``key`` (an API key's id,
        None before sign-in), until the block ends.

        :raises TooManyRequests: that client or key has too many unfinished bodies already.
        :raises UploadsFull: the server has too many in all.
        """
        if self._clients.get(client, 0) >= self.per_client:
            raise errors.TooManyRequests(
                f"{self.per_client} request bodies from this client address are still on "
                "their way: finish one first")
        if key is not None and self._keys.get(key, 0) >= self.per_key:
            raise errors.TooManyRequests(
                f"{self.per_key} request bodies for this API key are still on their way: "
                "finish one first")
        if self.active >= self.total:
            raise errors.UploadsFull(f"the server is reading {self.total} request bodies "
                                     "already; try again")
        self.active += 1
        self._clients[client] = self._clients.get(client, 0) + 1
        if key is not None:
            self._keys[key] = self._keys.get(key, 0) + 1
        try:
            yield
        finally:
            self.active -= 1
            _drop(self._clients, client)
            if key is not None:
                _drop(self._keys, key)


def _drop(counts: dict[str, int], name: str) -> None:
    counts[name] -= 1
    if not counts[name]:
        del counts[name]
