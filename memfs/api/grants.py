"""One look at the database per process and interval for the credentials of every open live
stream, however many (:class:`GrantWatch`).

A live stream (the API's SSE streams, the Console's live pages) is one request that lasts: the
credential it was opened with was checked when it came in, and must be looked at again while
it is open, so that a revoked or expired key ends its streams within a second on every server
of the database (issue 22). Each stream looking its own credential up every half second cost
a server two queries a second per stream (100 agent sessions with 8 mounted stores each: 800
streams, 1,600 look-ups a second). Instead each stream waits on the app's watch
(:meth:`GrantWatch.until_refused`) and the watch asks the database, every interval, in one
query per kind of credential, which of the credentials of all open streams are refused now:
stored keys (:meth:`Store.keys.refused`), session tokens
(:meth:`Store.sessions.refused_tokens`), Console sign-ins (:meth:`Store.keys.ended_signins`). A
refused credential ends all of its streams, and only them.

As :class:`memfs.api.streams.EventHub`'s poller, the watch's is one of its waiting streams (no
background task outlives the streams): it starts with the first, hands over to another when
its stream ends, and is gone with the last. A look the database cannot answer ends nothing: it
is tried again by the rule of background work (:mod:`memfs.background`: said once, retried
with a backoff of at most :data:`RETRY_MOST_SECONDS`, one line when it answers again), and so
is a bug.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..background import Failures

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger(__name__)

#: The kinds of credential a stream is held by. ``KEY``: a stored key (its ``apikey_`` id);
#: ``SESSION_TOKEN``: a session token (its ``sesstok_`` id); ``SIGNIN``: a Console sign-in
#: with a server key (the digest of its cookie's nonce), which ends when signed out;
#: ``STORED_SIGNIN``: a Console sign-in with a stored key, which also ends when no longer
#: recorded.
KEY = "key"
SESSION_TOKEN = "session_token"
SIGNIN = "signin"
STORED_SIGNIN = "stored_signin"
KINDS = (KEY, SESSION_TOKEN, SIGNIN, STORED_SIGNIN)
#: A credential: its kind and id.
Credential = tuple[str, str]

#: The longest wait between two looks while the database cannot answer (seconds).
RETRY_MOST_SECONDS = 1.0


@dataclass(eq=False)
class _Holder:
    """A stream waiting on the watch: its credentials, why it must end once it must, and the
    event that wakes it (set when it must end, or when the poller left)."""

    credentials: tuple[Credential, ...]
    why: str | None = None
    wake: anyio.Event = field(default_factory=anyio.Event)


class GrantWatch:
    """The credentials of the open live streams of one app, looked at again every
    ``interval`` seconds in one query per kind (the module says why and how).

    :param store: the database asked.
    :param interval: seconds between two looks: the longest a stream outlives its
        credential's refusal, but for the look itself.
    """

    #: The kinds of credential, on the watch too: for a holder handed the watch that never
    #: imports the API at run time (the Console's live pages).
    KEY, SESSION_TOKEN, SIGNIN, STORED_SIGNIN = KEY, SESSION_TOKEN, SIGNIN, STORED_SIGNIN

    def __init__(self, store: Store, interval: float) -> None:
        self.store = store
        self.interval = interval
        #: The waiting streams, by credential.
        self._holders: dict[Credential, set[_Holder]] = {}
        #: The stream that looks (None: none yet, or it just left).
        self._poller: _Holder | None = None
        #: When the next look is due (None: no stream is open).
        self.next_poll: float | None = None
        #: Looks made (one query per kind each), for tests and statistics.
        self.polls = 0
        self.failures = Failures("the live streams' credential checks", log,
                                 first=min(interval, RETRY_MOST_SECONDS),
                                 most=RETRY_MOST_SECONDS)

    def statistics(self) -> dict[str, int]:
        streams = {h for held in self._holders.values() for h in held}
        return {"credentials": len(self._holders), "streams": len(streams),
                "polls": self.polls}

    async def until_refused(self, *credentials: Credential) -> str:
        """Wait until one of ``credentials`` is refused (revoked, expired, signed out, ...);
        returns why. The stream is held by them meanwhile: cancel the wait when it ends."""
        for kind, _ in credentials:
            if kind not in KINDS:
                raise ValueError(f"not a kind of credential: {kind!r}")
        me = _Holder(tuple(credentials))
        if self.next_poll is None:  # the first stream: the first look an interval on
            self.next_poll = anyio.current_time() + self.interval
        for cred in me.credentials:
            self._holders.setdefault(cred, set()).add(me)
        try:
            while me.why is None:
                if self._poller is None:
                    self._poller = me
                if self._poller is me and anyio.current_time() >= self.next_poll:
                    await self._poll()
                    continue
                with anyio.move_on_at(self.next_poll if self._poller is me else float("inf")):
                    await me.wake.wait()
                if me.wake.is_set():
                    me.wake = anyio.Event()
            return me.why
        finally:
            for cred in me.credentials:
                held = self._holders.get(cred)
                if held is not None:
                    held.discard(me)
                    if not held:
                        del self._holders[cred]
            if self._poller is me:
                self._poller = None
                for held in self._holders.values():  # one of them takes over
                    for h in held:
                        h.wake.set()
            if not self._holders:  # stopped: the next stream starts a new watch
                self.next_poll = None

    async def _poll(self) -> None:
        """Ask the database which held credentials are refused, and end their streams; a
        look that fails ends nothing, and is tried again (:mod:`memfs.background`'s rule)."""
        asked: dict[str, set[str]] = {}
        for kind, cid in self._holders:
            asked.setdefault(kind, set()).add(cid)
        self.polls += 1
        wait = self.interval
        try:
            refused = await anyio.to_thread.run_sync(self._refused, asked)
        except Exception as e:  # an outage (or a bug): said once, and tried again
            wait = self.failures.failed(e)
        else:
            self.failures.recovered()
            for cred, why in refused.items():
                for h in self._holders.get(cred, ()):
                    if h.why is None:
                        h.why = why
                        h.wake.set()
        finally:
            if self.next_poll is not None:
                self.next_poll = anyio.current_time() + wait

    def _refused(self, asked: dict[str, set[str]]) -> dict[Credential, str]:
        """The refused credentials among ``asked`` (ids by kind), and why: one query per
        kind asked (sign-ins of both kinds: one)."""
        out: dict[Credential, str] = {}
        if asked.get(KEY):
            out.update(((KEY, i), why) for i, why in self.store.keys.refused(asked[KEY]).items())
        if asked.get(SESSION_TOKEN):
            out.update(((SESSION_TOKEN, i), why) for i, why in
                       self.store.sessions.refused_tokens(asked[SESSION_TOKEN]).items())
        signins: Collection[str] = asked.get(SIGNIN, set())
        stored: Collection[str] = asked.get(STORED_SIGNIN, set())
        if signins or stored:
            for s in self.store.keys.ended_signins(signins, recorded=stored):
                for kind in (SIGNIN, STORED_SIGNIN):
                    if s in asked.get(kind, ()):
                        out[(kind, s)] = "you signed out"
        return out
