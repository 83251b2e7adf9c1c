"""The request rate of each API key (issue 22: one client cannot starve the others): a token
bucket per key, on this server process. Over it, a request is a 429 ``rate_limit_error`` with
``retry-after`` (:class:`memfs.errors.RateLimited`). The other limit per key, on request bodies
being read at once, is :class:`memfs.api.uploads.Uploads`'.

The server's own keys (``--api-key``, ``MEMFS_API_KEYS``: the operator's) have no rate; stored
keys and session tokens have :data:`RATE` requests a second on average, in bursts of up to
:data:`BURST` (``memfs serve --key-rate``, ``MEMFS_KEY_RATE``). With several replicas, each
counts its own requests: a key may send that rate to each."""

from __future__ import annotations

import ipaddress
import math
import os
import time
from collections.abc import Callable

from starlette.types import Scope

from .. import errors
from ..models import Grant
from ..store import KEY_PREFIX, SESSION_TOKEN_PREFIX

#: Requests a second a key may send on average, and in one burst.
RATE = 200.0
BURST = 400.0
#: Buckets kept at most (the oldest unused go first): a bound on memory, whatever keys come.
MAX_BUCKETS = 10_000


class _Buckets:
    """Token buckets by name: each holds up to ``burst`` tokens and gets ``rate`` more a
    second; the :data:`MAX_BUCKETS` counted last are kept (the oldest unused go first)."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        #: name -> (tokens, when counted)
        self._buckets: dict[str, tuple[float, float]] = {}

    def _tokens(self, name: str) -> tuple[float, float]:
        """The tokens ``name``'s bucket holds now, and now."""
        now = self.clock()
        tokens, then = self._buckets.get(name, (self.burst, now))
        return min(self.burst, tokens + (now - then) * self.rate), now

    def _keep(self, name: str, tokens: float, now: float) -> None:
        self._buckets.pop(name, None)
        self._buckets[name] = (tokens, now)  # re-inserted: the newest
        if len(self._buckets) > MAX_BUCKETS:
            del self._buckets[next(iter(self._buckets))]

    def _wait(self, tokens: float) -> int:
        """Seconds until a bucket holding ``tokens`` holds one."""
        return math.ceil((1.0 - tokens) / self.rate)


class KeyRates(_Buckets):
    """A token bucket per key id: :meth:`take` one request's token or raise."""

    def __init__(self, rate: float = RATE, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("a key's rate is more than 0 requests a second")
        super().__init__(rate, max(1.0, burst if burst is not None else 2 * rate), clock)

    @classmethod
    def from_env(cls) -> KeyRates:
        """:data:`RATE` unless ``MEMFS_KEY_RATE`` says another (requests a second)."""
        text = os.environ.get("MEMFS_KEY_RATE", "")
        try:
            rate = float(text) if text else RATE
        except ValueError:
            raise ValueError(f"MEMFS_KEY_RATE={text!r}: a number of requests a second") from None
        return cls(rate)

    def take(self, grant: Grant) -> None:
        """Count one request of ``grant``'s key.

        :raises RateLimited: the key's bucket is empty (``retry_after``: seconds until it
            holds a token again).
        """
        if grant.server:
            return
        tokens, now = self._tokens(grant.key_id)
        if tokens < 1.0:
            self._keep(grant.key_id, tokens, now)
            wait = self._wait(tokens)
            raise errors.RateLimited(
                f"API key {grant.key_id} sent more than {self.rate:g} requests a second "
                f"(bursts of {self.burst:g}): retry after {wait} s", retry_after=wait)
        self._keep(grant.key_id, tokens - 1.0, now)


#: Failed authentications a client address may make in one burst, and a second on average
#: after (issue 38 S4): a person who mistypes a key is never stopped, a guesser is, to one
#: guess every two seconds.
FAILURES_BURST = 20.0
FAILURES_RATE = 0.5


#: The prefixes of the credentials memfs makes (stored keys, session tokens): 256 random bits,
#: which no guessing finds. A failure with one is no guess worth a budget, and one is never
#: held up: else one client's junk would lock out every client of its address (a NAT, a
#: proxy), stored keys and session tokens included.
GENERATED_PREFIXES = (KEY_PREFIX, SESSION_TOKEN_PREFIX)


class AuthFailures(_Buckets):
    """A token bucket per client address, of failed authentications (a presented key that is
    not one, on the API; a refused Console sign-in): once it is empty, every request of that
    address that presents a key is a 429 until it refills, a good key's too (else guessing
    would go on, only slower to be told). One per server process, shared by the API and the
    Console. Behind a proxy every client has the proxy's address: they share its budget.

    What no guess can find is left alone (:data:`GENERATED_PREFIXES`), and so is a unix
    socket (the session API: its callers are the session's commands, with no address to tell
    them apart). IPv6 addresses count by their /64, which one client has whole."""

    def __init__(self, rate: float = FAILURES_RATE, burst: float = FAILURES_BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(rate, burst, clock)

    @staticmethod
    def _bucket(address: str, key: str) -> str | None:
        """Whose budget a try of ``key`` from ``address`` is (None: no one's)."""
        if not address or key.startswith(GENERATED_PREFIXES):
            return None
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address
        if ip.version == 6:
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return address

    def check(self, address: str, key: str) -> None:
        """May ``address`` try ``key`` now?

        :raises RateLimited: it failed too often (``retry_after``: seconds until it may try
            again).
        """
        bucket = self._bucket(address, key)
        if bucket is None:
            return
        tokens, _ = self._tokens(bucket)
        if tokens < 1.0:
            wait = self._wait(tokens)
            raise errors.RateLimited(
                f"too many failed authentications from this address: retry after {wait} s",
                retry_after=wait)

    def failed(self, address: str, key: str) -> None:
        """Count one failed authentication of ``address`` with ``key``."""
        bucket = self._bucket(address, key)
        if bucket is None:
            return
        tokens, now = self._tokens(bucket)
        self._keep(bucket, tokens - 1.0, now)


def client_address(scope: Scope) -> str:
    """The client address of a request (``""`` on a unix socket)."""
    client = scope.get("client")
    return str(client[0]) if client else ""
