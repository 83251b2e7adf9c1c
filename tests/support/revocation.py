"""A stored key's revocation and expiry, measured across replicas (issue 22: "a revoked key's
next request fails, within 1 s across replicas", and the streams it opened end): how long after
a revocation made through one server another server refuses the key's plain requests, and ends
the SSE streams the key opened there; the same from a key's expiry.
``tests/integration/test_key_revocation.py`` asserts the second; ``scripts/revocation_latency``
prints the distribution over many revocations. Everything goes through real HTTP.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

#: How often the key's plain request is sent while waiting for its refusal (seconds).
PROBE_INTERVAL = 0.02


def _h(key: str) -> dict[str, str]:
    return {"x-api-key": key}


def _ok(r: httpx.Response) -> Any:
    if r.status_code >= 300:
        raise AssertionError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}")
    return r.json()


class Stream:
    """An SSE stream (``url``) opened with ``key``, read in a thread: its status, its frames
    (event, data), and when it ended (monotonic and wall clock) and how (``error``: None for
    a clean end of the body)."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.status: int | None = None
        self.frames: list[tuple[str, Any]] = []
        self.ended: float | None = None
        self.ended_wall: float | None = None
        self.error: BaseException | None = None
        self._client = httpx.Client(headers=_h(key), timeout=httpx.Timeout(30.0))
        self._opened = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        opened = self._opened.wait(10)
        if not opened or self.status != 200:
            self._client.close()  # a failed test leaves no socket to warn in a later one
            raise AssertionError(f"{url}: no answer in 10 s" if not opened
                                 else f"{url}: {self.status} ({self.error!r})")

    def _read(self) -> None:
        try:
            with self._client.stream("GET", self.url) as r:
                self.status = r.status_code
                self._opened.set()
                event = ""
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        self.frames.append((event, json.loads(line[6:])))
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
        finally:
            self.ended, self.ended_wall = time.monotonic(), time.time()
            self._opened.set()

    def saw(self, found: Callable[[str, Any], bool], timeout: float = 10.0) -> None:
        """Wait until a frame is ``found`` (the stream is live), or fail saying what came."""
        end = time.monotonic() + timeout
        while not any(found(e, d) for e, d in list(self.frames)):
            if self.ended is not None or time.monotonic() > end:
                raise AssertionError(f"{self.url}: the frame never came (ended: {self.ended}, "
                                     f"{self.error!r}); frames: {self.frames[-5:]}")
            time.sleep(0.01)  # a poll of the reader thread's list

    def wait_end(self, deadline: float) -> bool:
        """Wait until the stream ended or the monotonic ``deadline``; did it end?"""
        self.thread.join(max(0.0, deadline - time.monotonic()))
        return self.ended is not None

    def close(self) -> None:
        self._client.close()


class Replicas:
    """Two servers on one database (``a`` and ``b``: their URLs) and the server key: makes
    stored keys, stores and sessions through ``a``, and opens streams on either."""

    def __init__(self, a: str, b: str, server_key: str) -> None:
        self.a, self.b, self.server_key = a, b, server_key
        self.http = httpx.Client(headers=_h(server_key), timeout=30.0)
        try:
            self.store_id = _ok(self.http.post(
                a + "/v1/memory_stores", json={"name": f"revocation {time.time_ns()}"}))["id"]
            self.session_id = _ok(self.http.post(a + "/v1/sessions", json={}))["id"]
        except BaseException:
            self.http.close()
            raise
        self._n = 0

    def create_key(self, **body: Any) -> dict[str, Any]:
        """A stored key (POST /v1/memfs/keys with the server key): the answer, with its
        secret in ``key``."""
        self._n += 1
        made: dict[str, Any] = _ok(self.http.post(
            self.a + "/v1/memfs/keys", json={"name": f"revocation probe {self._n}", **body}))
        assert made["key"].startswith("memfs_key_"), made
        return made

    def probe_path(self) -> str:
        """A plain read the keys may make."""
        return f"/v1/memory_stores/{self.store_id}"

    def streams(self, url: str, key: str) -> dict[str, Stream]:
        """A change stream of the store and the event stream of the session, on ``url``."""
        changes = Stream(f"{url}/v1/memory_stores/{self.store_id}/changes/stream", key)
        try:
            return {"changes": changes,
                    "events": Stream(f"{url}/v1/sessions/{self.session_id}/events/stream", key)}
        except BaseException:
            changes.close()
            raise

    def prove_live(self, streams: dict[str, Stream]) -> None:
        """Write a memory and send an event through ``a``; wait until both reach the streams
        (so that a stream that ends later was serving, not stuck or never open)."""
        mark = f"live{time.time_ns()}"
        _ok(self.http.post(f"{self.a}/v1/memory_stores/{self.store_id}/memories",
                           json={"path": f"/{mark}.md", "content": "x"}))
        _ok(self.http.post(f"{self.a}/v1/sessions/{self.session_id}/events", json={
            "events": [{"type": "user.message", "content": [{"type": "text", "text": mark}]}]}))
        streams["changes"].saw(lambda e, d: e == "memfs.change"
                               and d.get("path") == f"/{mark}.md")
        streams["events"].saw(lambda e, d: e == "user.message"
                              and d["content"][0]["text"] == mark)

    def close(self) -> None:
        self.http.close()


@dataclass
class Revocation:
    """One revocation through ``a``, seen from ``b``: seconds from the revoke's answer (the
    revocation committed) until ``b`` refused the key's plain request with 401, and until
    each stream the key had open on ``b`` ended; ``revoke_took``: the revoke request itself;
    ``ok_before``: the key's requests ``b`` still answered (200) in between."""

    refused: float
    streams: dict[str, float] = field(default_factory=dict)
    revoke_took: float = 0.0
    ok_before: int = 0


def revoke_and_measure(r: Replicas, timeout: float = 5.0, jitter: float = 0.0) -> Revocation:
    """Make a key, open both streams with it on ``b``, see that they serve and that ``b``
    answers the key's requests, revoke the key through ``a`` (after a random pause of up to
    ``jitter`` seconds: a revocation comes at any moment of a stream's recheck period, and
    without it every round would hit the same one), then probe ``b`` every
    :data:`PROBE_INTERVAL` until it refuses the key and wait for both streams to end.

    :raises AssertionError: something else than 200 then 401, a stream that did not serve,
        ended before the revocation or not cleanly, or no refusal or end within ``timeout``.
    """
    made = r.create_key()
    key = made["key"]
    streams = r.streams(r.b, key)
    try:
        r.prove_live(streams)
        with httpx.Client(base_url=r.b, headers=_h(key), timeout=10.0) as b:
            for _ in range(3):
                _ok(b.get(r.probe_path()))
            time.sleep(random.uniform(0.0, jitter))  # the point: see the docstring
            for name, s in streams.items():
                assert s.ended is None, f"the {name} stream ended before the revocation"
            t0 = time.monotonic()
            revoked = _ok(r.http.post(f"{r.a}/v1/memfs/keys/{made['id']}/revoke"))
            t1 = time.monotonic()
            assert revoked["revoked_at"], revoked
            ok = 0
            while True:
                answer = b.get(r.probe_path())
                if answer.status_code == 401:
                    refused = time.monotonic() - t1
                    break
                assert answer.status_code == 200, (answer.status_code, answer.text)
                ok += 1
                assert time.monotonic() - t1 < timeout, f"{r.b} still lets the key in"
                time.sleep(PROBE_INTERVAL)  # the point: a request every 20 ms
            assert "revoked" in answer.json()["error"]["message"], answer.text
        result = Revocation(refused, revoke_took=t1 - t0, ok_before=ok)
        for name, s in streams.items():
            assert s.wait_end(t1 + timeout), f"the {name} stream on {r.b} outlived its key"
            assert s.error is None, f"the {name} stream was cut: {s.error!r}"
            assert s.ended is not None
            result.streams[name] = s.ended - t1
        return result
    finally:
        for s in streams.values():
            s.close()


@dataclass
class Expiry:
    """A key's expiry seen from each server (by URL): wall-clock seconds from ``expires_at``
    until the server refused the key's plain request with 401 (the answer's arrival), and
    until each stream the key opened there ended; ``ok_before``: the server's 200s before."""

    refused: dict[str, float] = field(default_factory=dict)
    streams: dict[str, float] = field(default_factory=dict)
    ok_before: dict[str, int] = field(default_factory=dict)


def expire_and_measure(r: Replicas, expires_in: int = 3, timeout: float = 5.0,
                       jitter: float = 0.0) -> Expiry:
    """Make a key that expires in ``expires_in`` seconds, open both streams with it on each
    server (after a random pause of up to ``jitter`` seconds, so that the expiry comes at any
    moment of their recheck period), then probe both every :data:`PROBE_INTERVAL` until each
    refuses it.

    :raises AssertionError: a refusal before ``expires_at`` or a stream ended before it, a
        server that never answered the key before its expiry, or no refusal or end within
        ``timeout`` of it.
    """
    made = r.create_key(expires_in=expires_in)
    key = made["key"]
    expires = datetime.fromisoformat(made["expires_at"].replace("Z", "+00:00")).timestamp()
    time.sleep(random.uniform(0.0, jitter))  # the point: see the docstring
    streams: dict[str, Stream] = {}
    result = Expiry()
    try:
        for url in (r.a, r.b):
            streams.update((f"{name} on {url}", s) for name, s in r.streams(url, key).items())
        clients = {url: httpx.Client(base_url=url, headers=_h(key), timeout=10.0)
                   for url in (r.a, r.b)}
        try:
            waiting = dict(clients)
            while waiting:
                for url, c in list(waiting.items()):
                    answer = c.get(r.probe_path())
                    now = time.time()
                    if answer.status_code == 401:
                        assert now >= expires, f"{url} refused the key before its expiry"
                        assert "expired" in answer.json()["error"]["message"], answer.text
                        result.refused[url] = now - expires
                        del waiting[url]
                    else:
                        assert answer.status_code == 200, (answer.status_code, answer.text)
                        result.ok_before[url] = result.ok_before.get(url, 0) + 1
                assert time.time() < expires + timeout, f"{list(waiting)} still let the key in"
                time.sleep(PROBE_INTERVAL)  # the point: a request every 20 ms
        finally:
            for c in clients.values():
                c.close()
        for url in (r.a, r.b):
            assert result.ok_before.get(url), f"{url} never answered the key before its expiry"
        deadline = time.monotonic() + max(0.0, expires + timeout - time.time())
        for name, s in streams.items():
            assert s.wait_end(deadline), f"the {name} stream outlived its key"
            assert s.error is None, f"the {name} stream was cut: {s.error!r}"
            assert s.ended_wall is not None and s.ended_wall >= expires, \
                f"the {name} stream ended before its key expired"
            result.streams[name] = s.ended_wall - expires
        return result
    finally:
        for s in streams.values():
            s.close()
