"""``memfs session revert`` (CLI), ``POST /v1/sessions/{id}/memfs/revert`` (API) and
``Client.revert``, in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from memfs import Actor
from memfs.api import create_app
from memfs.cli import cli
from memfs.client import Client
from memfs.rules import api_key_id
from memfs.store import Store, local_user_actor
from memfs.store.revert import EXIT_LEFT
from tests.support.asgi import through

KEY = "sk-revert-test"
USER = Actor.user("user_alice")
OTHER = Actor.user("user_bob")


@pytest.fixture
def store(backend) -> Store:
    return backend.open()


@pytest.fixture
def world(store):
    """A store with /keep.md, /edit.md (edited by the session, then by bob) and /gone.md
    (deleted by the session); the session also created /new.md."""
    sid = store.stores.create("notes").id
    ses = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}]).id
    S = Actor.session(ses)
    store.memories.write_path(sid, "/keep.md", "keep", actor=USER)
    store.memories.write_path(sid, "/edit.md", "line 1\nline 2\n", actor=USER)
    store.memories.write_path(sid, "/gone.md", "was here", actor=USER)
    store.memories.write_path(sid, "/edit.md", "line 1\nsession\n", actor=S)
    store.memories.delete_path(sid, "/gone.md", actor=S)
    store.memories.write_path(sid, "/new.md", "new", actor=S)
    store.memories.write_path(sid, "/edit.md", "line 1\nbob\n", actor=OTHER)
    return sid, ses


def contents(store: Store, sid: str) -> dict[str, str]:
    return {m.path: store.memories.get(sid, m.id).content or "" for m in store.memories.tree(sid)}


def test_cli_dry_run_then_revert_then_undo(backend, store, world) -> None:
    sid, ses = world
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, ["--db", backend.url, "session", "revert", *args])

    before = contents(store, sid)
    r = run(ses, "--dry-run")
    assert r.exit_code == EXIT_LEFT, (r.stdout, r.stderr)
    assert contents(store, sid) == before
    out = r.stdout
    assert out.startswith(f"dry run: would revert session {ses}: 2 memories, 1 conflict")
    assert "  recreate  /gone.md" in out and "  delete    /new.md" in out
    assert "CONFLICT  /edit.md: changed: changed by user_actor:user_bob" in out
    assert "-session" in out and "+bob" in out and "revert id" not in out

    r = run(ses, "--json")
    assert r.exit_code == EXIT_LEFT
    data = json.loads(r.stdout)
    assert data["created_by"] == local_user_actor().to_dict() and data["id"]
    assert contents(store, sid) == {"/keep.md": "keep", "/edit.md": "line 1\nbob\n",
                                    "/gone.md": "was here"}
    r = run(data["id"])  # undo the revert: the session's result is back
    assert r.exit_code == 0, r.stdout
    assert f"reverted revert {data['id']}" in r.stdout and "revert id: memrevert_" in r.stdout
    assert contents(store, sid) == before

    r = run(ses, "--force")
    assert r.exit_code == 0 and "(forced)" in r.stdout
    assert contents(store, sid) == {"/keep.md": "keep", "/edit.md": "line 1\nline 2\n",
                                    "/gone.md": "was here"}


def test_cli_errors_are_one_line(backend, store) -> None:
    runner = CliRunner()
    for target, code, text in (("sesn_missing", 3, "sesn_missing"),
                               ("memrevert_missing", 3, "memrevert_missing"),
                               ("../x", 5, "session id")):
        r = runner.invoke(cli, ["--db", backend.url, "session", "revert", target])
        assert r.exit_code == code, (r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("memfs: ") and text in r.stderr


def test_api_and_client(store, world) -> None:
    sid, ses = world
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as http:
        r = http.post(f"/v1/sessions/{ses}/memfs/revert", json={"dry_run": True})
        assert r.status_code == 200
        dry = r.json()
        assert dry["type"] == "memfs_revert" and dry["dry_run"] and dry["id"] is None
        assert [c["reason"] for c in dry["conflicts"]] == ["changed"]
        with Client("http://memfs", KEY, transport=through(http)) as remote:
            done = remote.undo.revert(ses, actor=None)
            assert done["created_by"] == Actor.api(api_key_id(KEY)).to_dict()
            assert [a["action"] for a in done["actions"]] == [
                a["action"] for a in dry["actions"]]
            assert "/new.md" not in contents(store, sid)
            undo = remote.undo.revert(done["id"], actor=None)
            assert undo["complete"] and contents(store, sid)["/new.md"] == "new"
        # hostile input: 4xx envelopes, never a 500
        for path, body in ((f"/v1/sessions/{ses}/memfs/revert", {"force": "yes"}),
                           (f"/v1/sessions/{ses}/memfs/revert", {"dry_run": 1}),
                           (f"/v1/sessions/{ses}/memfs/revert", {"bogus": True}),
                           (f"/v1/sessions/{ses}/memfs/revert", [1]),
                           ("/v1/sessions/sesn_nope/memfs/revert", {}),
                           ("/v1/sessions/memrevert_nope/memfs/revert", {}),
                           ("/v1/sessions/%00%ff/memfs/revert", {}),
                           ("/v1/sessions/" + "x" * 5000 + "/memfs/revert", {})):
            r = http.post(path, json=body)
            assert 400 <= r.status_code < 500, (path, body, r.status_code, r.text)
            assert r.json()["type"] == "error"
        r = http.post(f"/v1/sessions/{ses}/memfs/revert", content=b"{not json")
        assert r.status_code == 400
        # dry_run in the query string is not silently ignored (that would revert for real).
        before = store.feed.last(sid)
        r = http.post(f"/v1/sessions/{ses}/memfs/revert?dry_run=true", json={})
        assert r.status_code == 400 and "query" in r.json()["error"]["message"], r.text
        assert store.feed.last(sid) == before
        doc = http.get("/openapi.json").json()
        op = doc["paths"]["/v1/sessions/{session_id}/memfs/revert"]["post"]
        assert op["x-memfs-extension"] and "Revert" in doc["components"]["schemas"]
