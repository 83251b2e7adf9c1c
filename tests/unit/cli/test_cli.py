"""The ``memfs`` CLI: stores, memories, versions and sessions on the local database.

Most tests drive :data:`memfs.cli.cli` through click's CliRunner; the ``test_entry_point_*``
tests run the installed console script as a subprocess, as a newcomer would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from memfs import Actor
from memfs.cli import cli
from memfs.cli import common as cli_module  # _PAGE, _stdin_is_tty
from memfs.launcher.prompt import render_memory_prompt
from memfs.models import Session, SessionResource
from memfs.store import local_user_actor, sha256_hex
from tests.support.cli import assert_error


@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def run(backend):
    """Invoke the CLI on the test database; returns the click Result."""
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None):
        return runner.invoke(cli, ["--db", backend.url, *args], input=input, env=env)

    return invoke


@pytest.fixture
def ok(run):
    """Invoke the CLI and assert success; returns stdout."""

    def invoke(*args: str, input: str | bytes | None = None) -> str:
        result = run(*args, input=input)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        return result.stdout

    return invoke


@pytest.fixture
def js(ok):
    """Invoke the CLI with --json and parse stdout."""

    def invoke(*args: str, input: str | bytes | None = None):
        return json.loads(ok("--json", *args, input=input))

    return invoke


# -- stores ------------------------------------------------------------------------------------


def test_store_lifecycle_by_name_and_id(run, ok, js):
    created = js("stores", "create", "User Preferences", "-d", "Per-user prefs", "-m", "team=docs")
    assert created["type"] == "memory_store"
    assert created["name"] == "User Preferences"
    assert created["metadata"] == {"team": "docs"}
    sid = created["id"]

    assert js("stores", "show", "User Preferences")["id"] == sid
    shown = ok("stores", "show", sid)
    assert "Per-user prefs" in shown and "memories:    0" in shown and "team=docs" in shown

    updated = js(
        "stores", "update", "User Preferences", "--name", "Prefs", "-m", "owner=ana",
        "--unset-metadata", "team",
    )
    assert updated["name"] == "Prefs" and updated["metadata"] == {"owner": "ana"}
    assert_error(run("stores", "show", "User Preferences"), 3, "User Preferences")

    archived = js("stores", "archive", "Prefs")
    assert archived["archived_at"] is not None
    assert js("stores", "list") == []
    assert [s["id"] for s in js("stores", "list", "--all")] == [sid]
    assert "no memory stores" in ok("stores", "list")
    table = ok("stores", "list", "--include-archived")
    assert table.splitlines()[0].split() == ["ID", "NAME", "MEMORIES", "CREATED", "ARCHIVED"]
    assert sid in table and "Prefs" in table


def test_stores_list_walks_pages_and_limits(js, ok, monkeypatch):
    monkeypatch.setattr(cli_module, "_PAGE", 2)
    for i in range(5):
        ok("stores", "create", f"s{i}")
    names = [s["name"] for s in js("stores", "list")]
    assert names == ["s4", "s3", "s2", "s1", "s0"]  # newest first, across 3 pages
    assert [s["name"] for s in js("stores", "list", "--limit", "3")] == ["s4", "s3", "s2"]


def test_store_delete_needs_confirmation(run, ok, js, monkeypatch):
    sid = js("stores", "create", "doomed")["id"]
    ok("memories", "create", "doomed", "/a.md", "--content", "x")
    # CliRunner's stdin is not a terminal: --yes is required.
    assert_error(run("stores", "delete", "doomed"), 2, "--yes")
    assert js("stores", "show", sid)["id"] == sid

    monkeypatch.setattr(cli_module, "_stdin_is_tty", lambda: True)
    result = run("stores", "delete", "doomed", input="n\n")
    assert result.exit_code == 1 and "aborted" in result.stderr
    assert "1 memories" in result.stdout  # the question says what is lost
    assert js("stores", "show", sid)["id"] == sid

    assert run("stores", "delete", "doomed", input="y\n").exit_code == 0
    assert_error(run("stores", "show", sid), 3)


def test_store_delete_with_yes(run, js):
    sid = js("stores", "create", "doomed")["id"]
    assert js("stores", "delete", sid, "--yes") == {"id": sid, "type": "memory_store_deleted"}
    assert_error(run("stores", "show", sid), 3)


def test_errors_are_one_line_with_exit_codes(run, ok, backend):
    if backend.name == "sqlite":  # a PostgreSQL database always exists (made by its owner)
        assert_error(run("stores", "show", "nope"), 8, "no database at")  # a read creates none
    ok("stores", "create", "twin")
    assert_error(run("stores", "show", "nope"), 3, "nope")
    ok("stores", "create", "twin")
    assert_error(run("stores", "show", "twin"), 5, "use an id")  # ambiguous name
    assert_error(run("stores", "create", ""), 5, "name")
    bad = run("stores", "create", "x", "-m", "novalue")
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.stderr  # a usage error


# -- memories ----------------------------------------------------------------------------------


def test_memory_create_show_is_exact(run, ok, js, tmp_path):
    ok("stores", "create", "notes")
    m = js("memories", "create", "notes", "/a.md", "--content", "no newline")
    assert m["type"] == "memory" and m["path"] == "/a.md" and m["content"] == "no newline"
    assert ok("memories", "show", "notes", "/a.md") == "no newline"
    assert ok("memories", "show", "notes", m["id"]) == "no newline"
    assert js("memories", "show", "notes", "/a.md")["content_sha256"] == sha256_hex(b"no newline")

    f = tmp_path / "in.md"
    f.write_bytes("héllo\n\n".encode())
    ok("memories", "create", "notes", "/from-file.md", "--file", str(f))
    assert ok("memories", "show", "notes", "/from-file.md") == "héllo\n\n"

    out = ok("memories", "create", "notes", "/piped.md", input="from stdin\n")
    assert out.startswith("created /piped.md (mem_")
    assert ok("memories", "show", "notes", "/piped.md") == "from stdin\n"

    ok("memories", "create", "notes", "/dash.md", "-f", "-", input=b"dash\n")
    assert ok("memories", "show", "notes", "/dash.md") == "dash\n"


def test_memory_create_content_errors(run, ok, monkeypatch, tmp_path):
    ok("stores", "create", "notes")
    both = run("memories", "create", "notes", "/a.md", "--content", "x", "--file", "f")
    assert both.exit_code == 2 and "not both" in both.stderr
    assert_error(
        run("memories", "create", "notes", "/a.md", "--file", str(tmp_path / "missing")),
        1,
        "cannot read",
    )
    assert_error(run("memories", "create", "notes", "/bad.md", input=b"\xff\xfe"), 5, "UTF-8")
    big = b"x" * 102_401
    assert_error(run("memories", "create", "notes", "/big.md", input=big), 5, "102400")
    assert_error(run("memories", "create", "notes", "no-slash", "--content", "x"), 5, "/")
    ok("memories", "create", "notes", "/a.md", "--content", "x")
    assert_error(run("memories", "create", "notes", "/a.md", "--content", "y"), 4, "/a.md")
    assert_error(run("memories", "create", "notes", "/a.md/b", "--content", "y"), 4, "/a.md")
    # Nothing on a stdin that is not a terminal (a script's </dev/null, a cron job): no empty
    # memory made in silence; empty content is asked for explicitly.
    empty = run("memories", "create", "notes", "/e.md", input=b"")
    assert empty.exit_code == 2 and "--content ''" in empty.stderr, empty.stderr
    empty = run("memories", "update", "notes", "/a.md", input=b"")
    assert empty.exit_code == 2 and "--content ''" in empty.stderr, empty.stderr
    assert ok("memories", "show", "notes", "/a.md") == "x"
    ok("memories", "create", "notes", "/e.md", "--content", "")
    ok("memories", "create", "notes", "/e2.md", "--file", "-", input=b"")
    assert ok("memories", "show", "notes", "/e.md") == ""
    # On a terminal with no content given, nothing is read: a usage error.
    monkeypatch.setattr(cli_module, "_stdin_is_tty", lambda: True)
    none = run("memories", "create", "notes", "/c.md")
    assert none.exit_code == 2 and "no content" in none.stderr


def test_memory_create_is_attributed_to_the_local_user(ok, js, store):
    sid = js("stores", "create", "notes")["id"]
    ok("memories", "create", "notes", "/a.md", "--content", "x")
    [v] = store.versions.list(sid).data
    assert v.created_by == local_user_actor()
    assert v.created_by.type == "user_actor"


def test_memory_update_content_path_and_precondition(run, ok, js):
    ok("stores", "create", "notes")
    m = js("memories", "create", "notes", "/a.md", "--content", "one")

    u = js("memories", "update", "notes", "/a.md", "--content", "two")
    assert u["id"] == m["id"] and u["content"] == "two"
    assert u["memory_version_id"] != m["memory_version_id"]

    moved = js("memories", "update", "notes", m["id"], "--path", "/b.md", input="ignored")
    assert moved["path"] == "/b.md" and moved["content"] == "two"  # stdin not read with --path

    same = ok("memories", "update", "notes", "/b.md", "--content", "two")
    assert same.startswith("unchanged /b.md")
    assert len(js("versions", "list", "notes")) == 3  # created, modified, renamed; no-op: none

    piped = js("memories", "update", "notes", "/b.md", input="three")
    assert piped["content"] == "three"

    assert_error(
        run("memories", "update", "notes", "/b.md", "--content", "x", "--if-sha256", "0" * 64),
        4,
        "content_sha256",
    )
    assert_error(
        run("memories", "update", "notes", "/b.md", "--content", "x", "--if-sha256", "nothex"),
        5,
    )
    good = sha256_hex(b"three")
    assert js("memories", "update", "notes", "/b.md", "-c", "four", "--if-sha256", good)[
        "content"
    ] == "four"
    assert_error(run("memories", "update", "notes", "/missing.md", "-c", "x"), 3, "/missing.md")


def test_memory_update_path_conflict(run, ok):
    ok("stores", "create", "notes")
    ok("memories", "create", "notes", "/a.md", "--content", "a")
    ok("memories", "create", "notes", "/b.md", "--content", "b")
    assert_error(run("memories", "update", "notes", "/a.md", "--path", "/b.md"), 4, "/b.md")
    assert ok("memories", "show", "notes", "/b.md") == "b"


def test_memory_update_needs_something(run, ok, monkeypatch):
    ok("stores", "create", "notes")
    ok("memories", "create", "notes", "/a.md", "--content", "a")
    monkeypatch.setattr(cli_module, "_stdin_is_tty", lambda: True)
    result = run("memories", "update", "notes", "/a.md")
    assert result.exit_code == 2 and "nothing to change" in result.stderr


def test_memory_delete(run, ok, js):
    ok("stores", "create", "notes")
    m = js("memories", "create", "notes", "/a.md", "--content", "a")
    assert_error(run("memories", "delete", "notes", "/a.md", "--if-sha256", "0" * 64), 4)
    out = js("memories", "delete", "notes", "/a.md", "--if-sha256", sha256_hex(b"a"))
    assert out == {"id": m["id"], "type": "memory_deleted"}
    assert_error(run("memories", "show", "notes", "/a.md"), 3)
    assert_error(run("memories", "delete", "notes", "/a.md"), 3)


def test_memory_list_prefix_and_depth(ok, js):
    ok("stores", "create", "notes")
    for path in ("/top.md", "/projects/a/x.md", "/projects/b.md", "/projects-old.md"):
        ok("memories", "create", "notes", path, "--content", path)
    assert [m["path"] for m in js("memories", "list", "notes")] == [
        "/projects-old.md", "/projects/a/x.md", "/projects/b.md", "/top.md",
    ]
    listed = js("memories", "list", "notes", "--prefix", "/projects/", "--depth", "1")
    assert [(m["type"], m["path"]) for m in listed] == [
        ("memory_prefix", "/projects/a/"),
        ("memory", "/projects/b.md"),
    ]
    assert all(m.get("content") is None for m in listed)
    human = ok("memories", "list", "notes", "--depth", "1").splitlines()
    assert human[0].split() == ["SIZE", "UPDATED", "PATH"]
    assert [line.split()[-1] for line in human[1:]] == ["/projects-old.md", "/projects/", "/top.md"]
    top = next(line for line in human if line.endswith("/top.md"))
    assert top.split()[0] == str(len("/top.md"))


def test_memory_list_errors(run, ok):
    ok("stores", "create", "notes")
    assert "no memories" in ok("memories", "list", "notes")
    assert_error(run("memories", "list", "notes", "--prefix", "/no-slash"), 5, "end with '/'")
    assert run("memories", "list", "notes", "--depth", "-1").exit_code == 2


# -- versions ----------------------------------------------------------------------------------


@pytest.fixture
def history(ok, js):
    """A store 'notes' where /a.md was created, edited and renamed to /c.md, and /b.md was
    created then deleted. Returns the version ids, oldest first, by name."""
    ok("stores", "create", "notes")
    a1 = js("memories", "create", "notes", "/a.md", "--content", "one\ntwo\n")
    a2 = js("memories", "update", "notes", "/a.md", "--content", "one\nTWO\n")
    a3 = js("memories", "update", "notes", "/a.md", "--path", "/c.md")
    b1 = js("memories", "create", "notes", "/b.md", "--content", "bee")
    js("memories", "delete", "notes", "/b.md")
    b2 = js("versions", "list", "notes", "--limit", "1")[0]
    assert b2["operation"] == "deleted"
    return {
        "a1": a1["memory_version_id"],
        "a2": a2["memory_version_id"],
        "a3": a3["memory_version_id"],
        "b1": b1["memory_version_id"],
        "b2": b2["id"],
        "a_id": a1["id"],
        "b_id": b1["id"],
    }


def test_versions_list_and_filters(ok, js, history, monkeypatch):
    all_ = js("versions", "list", "notes")
    assert [v["id"] for v in all_] == [
        history[k] for k in ("b2", "b1", "a3", "a2", "a1")
    ]
    assert all_[0]["created_by"] == local_user_actor().to_dict()
    monkeypatch.setattr(cli_module, "_PAGE", 2)  # walk several pages
    assert [v["id"] for v in js("versions", "list", "notes", "--memory", "/c.md")] == [
        history["a3"], history["a2"], history["a1"],
    ]
    # A deleted memory is found by its last path, or by id.
    assert [v["id"] for v in js("versions", "list", "notes", "--memory", "/b.md")] == [
        history["b2"], history["b1"],
    ]
    assert len(js("versions", "list", "notes", "--memory", history["b_id"])) == 2
    created = js("versions", "list", "notes", "--operation", "created")
    assert {v["id"] for v in created} == {history["a1"], history["b1"]}
    assert js("versions", "list", "notes", "--since", "2999-01-01T00:00:00Z") == []
    assert len(js("versions", "list", "notes", "--until", "2999-01-01T00:00:00Z")) == 5
    assert len(js("versions", "list", "notes", "--limit", "3")) == 3
    uid = local_user_actor().id
    assert len(js("versions", "list", "notes", "--user-id", uid)) == 5
    assert js("versions", "list", "notes", "--session", "sesn_nope") == []

    table = ok("versions", "list", "notes").splitlines()
    assert table[0].split() == ["ID", "OPERATION", "PATH", "SIZE", "ACTOR", "CREATED"]
    first = table[1].split()
    assert first[:4] == [history["b2"], "deleted", "/b.md", "-"]
    assert first[4] == f"user:{uid}"


def test_versions_list_errors(run, history):
    assert_error(run("versions", "list", "notes", "--memory", "/never.md"), 3, "/never.md")
    assert_error(run("versions", "list", "notes", "--since", "yesterday"), 5, "RFC 3339")
    assert run("versions", "list", "notes", "--operation", "renamed").exit_code == 2


def test_versions_list_by_session(ok, js, store):
    sid = js("stores", "create", "notes")["id"]
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    store.memories.create(sid, "/s.md", "by agent", actor=Actor.session(sess.id))
    ok("memories", "create", "notes", "/u.md", "--content", "by me")
    [v] = js("versions", "list", "notes", "--session", sess.id)
    assert v["path"] == "/s.md" and v["created_by"] == {"type": "session_actor",
                                                        "session_id": sess.id}
    assert f"session:{sess.id}" in ok("versions", "list", "notes")


def test_versions_show(run, ok, js, history):
    assert ok("versions", "show", "notes", history["a1"]) == "one\ntwo\n"
    v = js("versions", "show", "notes", history["a2"])
    assert v["type"] == "memory_version" and v["content"] == "one\nTWO\n"
    assert_error(run("versions", "show", "notes", history["b2"]), 5, "deletion")
    assert js("versions", "show", "notes", history["b2"])["operation"] == "deleted"
    assert_error(run("versions", "show", "notes", "memver_nope"), 3)


def test_versions_diff(run, ok, js, history):
    modified = ok("versions", "diff", "notes", history["a2"])
    assert modified.splitlines() == [
        f"--- a/a.md ({history['a1']})",
        f"+++ b/a.md ({history['a2']})",
        "@@ -1,2 +1,2 @@",
        " one",
        "-two",
        "+TWO",
    ]
    created = ok("versions", "diff", "notes", history["b1"]).splitlines()
    assert created[:2] == ["--- /dev/null", f"+++ b/b.md ({history['b1']})"]
    assert created[-2:] == ["+bee", "\\ No newline at end of file"]
    deleted = ok("versions", "diff", "notes", history["b2"]).splitlines()
    assert deleted[:2] == [f"--- a/b.md ({history['b1']})", "+++ /dev/null"]
    assert "-bee" in deleted

    two = ok("versions", "diff", "notes", history["a1"], history["a3"]).splitlines()
    assert two[:2] == [f"--- a/a.md ({history['a1']})", f"+++ b/c.md ({history['a3']})"]

    rename = run("versions", "diff", "notes", history["a3"])
    assert rename.exit_code == 0 and rename.stdout == ""
    assert "renamed /a.md -> /c.md" in rename.stderr

    as_json = js("versions", "diff", "notes", history["a2"])
    assert as_json["from"]["id"] == history["a1"] and as_json["to"]["id"] == history["a2"]
    assert as_json["diff"] == modified
    assert_error(run("versions", "diff", "notes", "memver_nope"), 3)


def test_versions_diff_finds_the_previous_version_pages_away(ok, history, monkeypatch):
    monkeypatch.setattr(cli_module, "_PAGE", 1)  # a3, a2, a1: a1 is two pages after a2
    diff = ok("versions", "diff", "notes", history["a2"]).splitlines()
    assert diff[:2] == [f"--- a/a.md ({history['a1']})", f"+++ b/a.md ({history['a2']})"]


def test_versions_restore_live_memory(run, ok, js, history):
    out = ok("versions", "restore", "notes", history["a1"])
    assert out.startswith(f"restored {history['a1']} to /c.md")
    assert ok("memories", "show", "notes", "/c.md") == "one\ntwo\n"  # content back, path kept
    latest = js("versions", "list", "notes", "--limit", "1")[0]
    assert latest["operation"] == "modified" and latest["memory_id"] == history["a_id"]
    again = ok("versions", "restore", "notes", history["a1"])
    assert "nothing to do" in again
    assert len(js("versions", "list", "notes", "--memory", "/c.md")) == 4
    moved = js("versions", "restore", "notes", history["a2"], "--path", "/a.md")
    assert moved["path"] == "/a.md" and moved["content"] == "one\nTWO\n"


def test_versions_restore_deleted_memory(run, ok, js, history):
    assert_error(run("versions", "restore", "notes", history["b2"]), 5, "deletion")
    ok("memories", "create", "notes", "/b.md", "--content", "squatter")
    assert_error(run("versions", "restore", "notes", history["b1"]), 4, "/b.md")
    m = js("versions", "restore", "notes", history["b1"], "--path", "/b-restored.md")
    assert m["content"] == "bee" and m["path"] == "/b-restored.md"
    assert ok("memories", "show", "notes", "/b-restored.md") == "bee"
    # Undelete keeps the memory: the same id, its whole history one memory's.
    assert m["id"] == history["b_id"]
    listed = js("versions", "list", "notes", "--memory", history["b_id"])
    assert [v["operation"] for v in listed] == ["created", "deleted", "created"]
    assert {v["memory_id"] for v in listed} == {history["b_id"]}


def test_versions_restore_of_a_deleted_memory_at_its_own_path(ok, js, history):
    out = ok("versions", "restore", "notes", history["b1"])
    assert out.startswith(f"restored {history['b1']} as /b.md")
    m = js("memories", "show", "notes", "/b.md")
    assert (m["id"], m["content"]) == (history["b_id"], "bee")
    assert len(js("versions", "list", "notes", "--memory", "/b.md")) == 3


def test_versions_redact(run, ok, js, history):
    assert_error(run("versions", "redact", "notes", history["b1"]), 2, "--yes")
    v = js("versions", "redact", "notes", history["b1"], "--yes")
    assert v["redacted_at"] is not None and v["content"] is None and v["path"] is None
    assert_error(run("versions", "show", "notes", history["b1"]), 5, "redacted")
    assert_error(run("versions", "restore", "notes", history["b1"]), 5, "redacted")
    assert_error(run("versions", "diff", "notes", history["b1"]), 5, "redacted")
    assert "(redacted)" in ok("versions", "list", "notes")
    # The current content of a live memory cannot be redacted (a store rule).
    assert_error(run("versions", "redact", "notes", history["a3"], "--yes"), 5)


def test_versions_prune(run, ok, js, history, monkeypatch):
    assert js("versions", "prune") == {"pruned": 0}
    monkeypatch.setenv("MEMFS_RETENTION_DAYS", "0")
    monkeypatch.setenv("MEMFS_RETENTION_KEEP", "1")
    out = ok("versions", "prune")
    assert out.startswith("pruned 3 versions")  # /c.md keeps 1 of 3, /b.md keeps 1 of 2
    assert len(js("versions", "list", "notes")) == 2


# -- sessions ----------------------------------------------------------------------------------


@pytest.fixture
def a_session(store):
    """A terminated session with two stores attached and a few tool events."""
    prefs = store.stores.create("User Preferences", "Per-user preferences.")
    docs = store.stores.create("Team Docs", "")
    sess = store.sessions.create(
        [
            {"type": "memory_store", "memory_store_id": prefs.id,
             "instructions": "Check before starting any task.\nKeep it short."},
            {"type": "memory_store", "memory_store_id": docs.id, "access": "read_only"},
        ]
    )
    store.events.add(
        sess.id,
        [
            {"type": "agent.tool_use", "id": "sevt_use1", "name": "cat",
             "input": {"operation": "read",
                       "file_path": "/mnt/memory/user-preferences/a.md", "pid": 42}},
            {"type": "agent.tool_result", "tool_use_id": "sevt_use1", "is_error": False,
             "content": [{"type": "text", "text": "read 12 bytes"}]},
            {"type": "agent.tool_use", "id": "sevt_use2", "name": "sed",
             "input": {"operation": "write", "file_path": "/mnt/memory/team-docs/b.md"}},
            {"type": "agent.tool_result", "tool_use_id": "sevt_use2", "is_error": True,
             "content": [{"type": "text", "text": "EROFS: the mount is read-only"}]},
        ],
    )
    store.sessions.set_status(sess.id, "terminated")
    return store.sessions.get(sess.id)


def test_session_list_and_show(run, ok, js, a_session, store):
    listed = js("session", "list")
    assert [s["id"] for s in listed] == [a_session.id]
    assert listed[0]["resources"][1]["access"] == "read_only"
    assert js("session", "list", "--store", "Team Docs")[0]["id"] == a_session.id
    other = store.stores.create("other")
    assert js("session", "list", "--store", other.id) == []
    assert js("session", "list", "--status", "idle") == []
    assert len(js("session", "list", "--status", "terminated", "--status", "idle")) == 1
    human = ok("session", "list")
    assert a_session.id in human and "User Preferences, Team Docs" in human
    assert "no sessions" in ok("session", "list", "--status", "running")

    shown = ok("session", "show", a_session.id)
    assert "status:   terminated" in shown
    assert "/mnt/memory/user-preferences  read_write  User Preferences" in shown
    assert "/mnt/memory/team-docs  read_only  Team Docs" in shown
    assert "Check before starting any task." in shown
    assert js("session", "show", a_session.id)["type"] == "session"
    assert_error(run("session", "show", "sesn_nope"), 3, "sesn_nope")


def test_session_list_by_metadata(run, js, store):
    a = store.sessions.create([], metadata={"thread": "t1", "user": "ann"}).id
    b = store.sessions.create([], metadata={"thread": "t1", "user": "a=b"}).id
    store.sessions.create([], metadata={"thread": "t2"})
    assert {s["id"] for s in js("session", "list", "--metadata", "thread=t1")} == {a, b}
    assert [s["id"] for s in js("session", "list", "--metadata", "thread=t1",
                                "--metadata", "user=ann")] == [a]
    assert [s["id"] for s in js("session", "list", "--metadata", "user=a=b")] == [b]
    assert js("session", "list", "--metadata", "thread=") == []
    assert_error(run("session", "list", "--metadata", "thread"), 2, "KEY=VALUE")
    assert_error(run("session", "list", "--metadata", "k=1", "--metadata", "k=2"), 2, "twice")
    assert_error(run("session", "list", "--metadata", "=v"), 5, "1 to 64")


def test_session_show_keeps_multi_line_values_in_their_column(ok, store):
    notes = store.stores.create("Notes", "First line.\nSecond line.")
    sess = store.sessions.create(
        [{"type": "memory_store", "memory_store_id": notes.id, "instructions": "Do.\nDon't."}]
    )
    shown = ok("session", "show", sess.id)
    assert "    description:  First line.\n                  Second line.\n" in shown
    assert "    instructions: Do.\n                  Don't.\n" in shown


def test_session_events_timeline(run, ok, js, a_session, monkeypatch):
    monkeypatch.setattr(cli_module, "_PAGE", 2)
    lines = ok("session", "events", a_session.id).splitlines()
    assert lines[0].split() == ["TIME", "TYPE", "ID", "WHAT"]
    rows = [line.split(None, 4)[2:] for line in lines[1:]]
    assert rows[0][1] == "sevt_use1"
    body = [[kind, *what] for kind, _id, *what in rows]
    assert body[:4] == [
        ["agent.tool_use", "cat read /mnt/memory/user-preferences/a.md"],
        ["agent.tool_result", "ok: read 12 bytes"],
        ["agent.tool_use", "sed write /mnt/memory/team-docs/b.md"],
        ["agent.tool_result", "error: EROFS: the mount is read-only"],
    ]
    assert body[4][0] == "session.status_terminated"
    only = js("session", "events", a_session.id, "--type", "agent.tool_use")
    assert [e["id"] for e in only] == ["sevt_use1", "sevt_use2"]
    assert len(js("session", "events", a_session.id, "--limit", "3")) == 3
    assert_error(run("session", "events", "sesn_nope"), 3)


def test_session_events_by_type_time_and_around(run, ok, js, store):
    sess = store.sessions.create([]).id
    ids = []
    for i in range(5):
        kind = "user.message" if i % 2 == 0 else "agent.message"
        ids += [e.id for e in store.events.send(
            sess, [{"type": kind, "content": [{"type": "text", "text": f"say\n{i} " + "x" * i}]}],
            as_session=sess)]
        store.events.add(sess, [{"type": "agent.tool_use", "name": "cat", "input": {}}])
    store.events.send(sess, [{"type": "user.message",
                              "content": [{"type": "text", "text": "long " * 100}]}])
    msgs = ("--type", "user.message", "--type", "agent.message")
    shown = ok("session", "events", sess, *msgs).splitlines()
    assert shown[0].split() == ["TIME", "TYPE", "ID", "WHAT"]
    assert shown[1].split()[2:] == ["user.message", ids[0], "say", "0"]
    assert shown[2].split()[2:] == ["agent.message", ids[1], "say", "1", "x"]
    assert len(shown[-1]) < 200 and shown[-1].endswith("…")
    listed = js("session", "events", sess, *msgs)
    middle = listed[2]["processed_at"]
    assert [e["id"] for e in js("session", "events", sess, *msgs, "--after", middle)] == (
        ids[3:] + [listed[-1]["id"]])
    assert [e["id"] for e in js("session", "events", sess, *msgs, "--before", middle)] == ids[:2]
    assert [e["id"] for e in js("session", "events", sess, *msgs, "--around", ids[2],
                                "--context", "1")] == ids[1:4]
    every = [e["id"] for e in js("session", "events", sess)]
    at = every.index(ids[2])
    assert [e["id"] for e in js("session", "events", sess, "--around", ids[2])] == every[
        max(0, at - 5):at + 6]
    assert_error(run("session", "events", sess, "--around", "sevt_nope"), 3, "sevt_nope")
    assert_error(run("session", "events", sess, "--context", "2"), 2, "--around")
    assert_error(run("session", "events", sess, "--around", ids[0], "--limit", "2"), 2)
    assert_error(run("session", "events", sess, "--after", "yesterday"), 5, "yesterday")
    assert run("session", "events", sess, "--around", ids[0], "--context", "101").exit_code == 2


def test_session_prompt(ok, js, a_session):
    text = ok("session", "prompt", a_session.id)
    assert text == render_memory_prompt(a_session)
    assert js("session", "prompt", a_session.id) == {"session_id": a_session.id, "prompt": text}


# -- session spec files (memfs.launcher.spec) ---------------------------------------------------

SPEC = """\
title: Triage
metadata: {team: support}
resources:
  - type: memory_store
    memory_store: User Preferences
    instructions: Check first.
  - type: memory_store
    memory_store_id: {docs}
    access: read_only
"""


@pytest.fixture
def spec_file(tmp_path, store):
    """A spec naming one store by name and one by id; the stores exist."""
    store.stores.create("User Preferences", "Per-user preferences.")
    docs = store.stores.create("Team Docs")
    path = tmp_path / "session.yaml"
    path.write_text(SPEC.replace("{docs}", docs.id))
    return path


def test_session_create_from_a_spec(run, ok, js, spec_file, store):
    sid = ok("session", "create", "--spec", str(spec_file)).strip()
    s = store.sessions.get(sid)
    assert s.status == "idle" and s.title == "Triage" and s.metadata == {"team": "support"}
    assert [(r.name, r.access, r.instructions, r.mount_path) for r in s.resources] == [
        ("User Preferences", "read_write", "Check first.", "/mnt/memory/user-preferences"),
        ("Team Docs", "read_only", None, "/mnt/memory/team-docs"),
    ]
    created = js("session", "create", "--spec", str(spec_file))
    assert created["type"] == "session" and created["status"] == "idle"
    assert created["title"] == "Triage" and created["metadata"] == {"team": "support"}
    assert [r["access"] for r in created["resources"]] == ["read_write", "read_only"]
    shown = ok("session", "show", sid)
    assert "title:    Triage" in shown and "  team=support" in shown


def test_session_create_spec_errors_are_one_line(run, spec_file, store, tmp_path):
    text = spec_file.read_text()
    spec_file.write_text(text.replace("access: read_only", "access: readonly"))
    assert_error(run("session", "create", "--spec", str(spec_file)), 5,
                 f"{spec_file}: resources[1]: access must be 'read_write' or 'read_only'")
    spec_file.write_text(text.replace("User Preferences", "User Prefs"))
    assert_error(run("session", "create", "--spec", str(spec_file)), 3,
                 f"{spec_file}: resources[0]: no memory store with id or name 'User Prefs'")
    spec_file.write_text(text + "agent: x\n")
    assert_error(run("session", "create", "--spec", str(spec_file)), 5, "unknown key 'agent'")
    spec_file.write_text(text.replace("    access: read_only\n", "    access: read_only\n" * 2))
    assert_error(run("session", "create", "--spec", str(spec_file)), 5,
                 f"{spec_file}: line 10, column 5: the key 'access' is given twice")
    assert_error(run("session", "create", "--spec", str(tmp_path / "nope.yaml")), 5,
                 "cannot read the session spec", "nope.yaml")
    assert store.sessions.list().data == []
    result = run("session", "create")
    assert result.exit_code == 2 and "--spec" in result.stderr


def test_session_history_through_a_server(store, monkeypatch):
    """--around, --type and --metadata with --url: the client's events.around and
    sessions.list(metadata=) on the wire."""
    import functools

    from starlette.testclient import TestClient

    from memfs import client
    from memfs.api import create_app
    from tests.support.asgi import through

    sess = store.sessions.create([], metadata={"thread": "t1"}).id
    store.sessions.create([], metadata={"thread": "t2"})
    ids = [e.id for e in store.events.send(sess, [
        {"type": kind, "content": [{"type": "text", "text": f"m{i}"}]}
        for i, kind in enumerate(["user.message", "agent.message"] * 3)], as_session=sess)]
    with TestClient(create_app(store, ["k"])) as tc:
        monkeypatch.setattr(client, "Client",
                            functools.partial(client.Client, transport=through(tc)))
        runner = CliRunner()

        def js(*args: str) -> object:
            result = runner.invoke(cli, ["--url", "http://memfs", "--api-key", "k", "--json",
                                         *args])
            assert result.exit_code == 0, (result.stderr, result.exception)
            return json.loads(result.stdout)

        assert [e["id"] for e in js("session", "events", sess, "--around", ids[2],
                                    "--context", "1")] == ids[1:4]
        assert [e["id"] for e in js("session", "events", sess, "--type", "agent.message")] == (
            ids[1::2])
        assert [s["id"] for s in js("session", "list", "--metadata", "thread=t1")] == [sess]


def test_session_create_from_a_spec_through_a_server(spec_file, store, monkeypatch):
    """With --url the spec's stores are looked up and the session created on the server."""
    import functools

    from starlette.testclient import TestClient

    from memfs import client
    from memfs.api import create_app
    from tests.support.asgi import through

    with TestClient(create_app(store, ["k"])) as tc:
        monkeypatch.setattr(client, "Client",
                            functools.partial(client.Client, transport=through(tc)))
        runner = CliRunner()
        result = runner.invoke(cli, ["--url", "http://memfs", "--api-key", "k", "session",
                                     "create", "--spec", str(spec_file)])
        assert result.exit_code == 0, (result.stderr, result.exception)
        s = store.sessions.get(result.stdout.strip())
        assert s.title == "Triage" and [r.access for r in s.resources] == [
            "read_write", "read_only"]
        spec_file.write_text(spec_file.read_text().replace("User Preferences", "Nope"))
        result = runner.invoke(cli, ["--url", "http://memfs", "--api-key", "k", "session",
                                     "create", "--spec", str(spec_file)])
        assert_error(result, 3, f"{spec_file}: resources[0]: ", "'Nope'")


def test_run_takes_the_spec(run, spec_file, store, monkeypatch):
    """memfs run --spec hands the launcher the spec's stores (by id), title and metadata."""
    from memfs.launcher import plan, runner

    launched = []
    monkeypatch.setattr(runner, "run", lambda launch: launched.append(launch) or 0)
    result = run("run", "--spec", str(spec_file), "--", "true")
    assert result.exit_code == 0, (result.stderr, result.exception)
    [launch] = launched
    prefs, docs = (store.stores.resolve(n).id for n in ("User Preferences", "Team Docs"))
    assert launch.attachments == [
        plan.Attachment(prefs, "read_write", "Check first."),
        plan.Attachment(docs, "read_only"),
    ]
    assert launch.title == "Triage" and launch.metadata == {"team": "support"}
    assert launch.instructions == [] and launch.command == ["true"]


def test_run_resume_options(run, store, monkeypatch):
    """--resume SESSION alone attaches the old session's stores (the launcher reads them);
    --last-messages and --history-budget go with it, within their ranges."""
    from memfs.launcher import plan, runner

    launched = []
    monkeypatch.setattr(runner, "run", lambda launch: launched.append(launch) or 0)
    result = run("run", "--resume", "sesn_01", "--", "true")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert launched[-1].resume == plan.Resume("sesn_01", 10, 8000)
    assert launched[-1].attachments == []
    result = run("run", "--resume", "sesn_01", "--last-messages", "3", "--history-budget", "500",
                 "--store", "notes", "--", "true")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert launched[-1].resume == plan.Resume("sesn_01", 3, 500)
    assert launched[-1].attachments == [plan.Attachment("notes")]
    for bad in (["--last-messages", "2"], ["--resume", "s", "--history-budget", "-1"],
                ["--resume", "s", "--last-messages", "1001"]):
        result = run("run", *bad, "--store", "notes", "--", "true")
        assert result.exit_code == 2, result.stderr
    assert "--last-messages and --history-budget go with --resume SESSION" in run(
        "run", "--history-budget", "9", "--store", "notes", "--", "true").stderr
    assert len(launched) == 2


def test_run_spec_and_store_flags_do_not_mix(run, spec_file, store):
    for extra in (["--store", "Team Docs"], ["--instructions", "Team Docs=x"]):
        result = run("run", "--spec", str(spec_file), *extra, "--", "true")
        assert result.exit_code == 2 and "not both" in result.stderr, result.stderr
    result = run("run", "--", "true")
    assert result.exit_code == 2 and "--store REF (repeatable), --spec or --resume SESSION" \
        in result.stderr
    spec_file.write_text(spec_file.read_text().replace("read_only", "ro"))
    assert_error(run("run", "--spec", str(spec_file), "--", "true"), 5,
                 f"{spec_file}: resources[1]: access must be")
    assert store.sessions.list().data == []


def _resource(name, access, description="", instructions=None, mount="/mnt/memory/x"):
    return SessionResource("sesrsc_1", "sesn_1", "memstore_1", access, instructions, name,
                           description, mount)


def _session(*resources):
    return Session("sesn_1", "idle", tuple(resources), None, None, {}, None, "t", "t", None)


def test_render_memory_prompt_notes():
    text = render_memory_prompt(
        _session(
            _resource("User Preferences", "read_write", "Per-user preferences.",
                      "Check first.\nKeep it short.", "/mnt/memory/user-preferences"),
            _resource("Team Docs", "read_only", mount="/mnt/memory/team-docs"),
        )
    )
    assert text.startswith("# Memory\n") and text.endswith("\n")
    assert "2 memory stores are mounted as directories under /mnt/memory/" in text
    prefs, docs = text.split("## ")[1:]
    assert prefs.startswith("User Preferences\n")
    assert "- Mount path: /mnt/memory/user-preferences" in prefs
    assert "- Access: read_write" in prefs
    assert "- Description: Per-user preferences." in prefs
    assert "- Instructions: Check first.\n  Keep it short." in prefs
    assert "- Access: read_only" in docs and "rejected" in docs
    assert "Description" not in docs and "Instructions" not in docs


def test_render_memory_prompt_without_stores():
    assert render_memory_prompt(_session()) == ""
    one = render_memory_prompt(_session(_resource("N", "read_write", mount="/r/n")))
    assert "A memory store is mounted as a directory under /r/" in one


# -- global behaviour --------------------------------------------------------------------------


def test_json_is_global_and_lists_are_arrays(js, ok):
    ok("stores", "create", "notes")
    assert isinstance(js("stores", "list"), list)
    assert isinstance(js("memories", "list", "notes"), list)
    assert isinstance(js("session", "list"), list)


def test_usage_error_exits_2(run):
    result = run("memories", "show", "notes")
    assert result.exit_code == 2 and "Missing argument" in result.stderr


def test_run_rejects_instructions_without_ref(run, ok, store):
    """Checked before anything is set up: no session is created."""
    ok("stores", "create", "notes")
    for bad in ("no equals sign", "=text without a ref"):
        result = run("run", "--store", "notes", "--instructions", bad, "--", "true")
        assert result.exit_code == 2 and "expected REF=TEXT" in result.stderr, result.stderr
        assert "--instructions" in result.stderr
    assert store.sessions.list().data == []


# -- the real entry point ----------------------------------------------------------------------


def _memfs_exe() -> str:
    exe = shutil.which("memfs", path=os.path.dirname(sys.executable))
    assert exe, f"no memfs console script beside {sys.executable}"
    return exe


@pytest.fixture
def sh(tmp_path):
    """Run the installed ``memfs`` with MEMFS_DB in tmp_path; returns CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env["MEMFS_DB"] = str(tmp_path / "cli.db")
    exe = _memfs_exe()

    def run(*args: str, input: bytes | None = None, code: int = 0):
        p = subprocess.run(
            [exe, *args], input=input if input is not None else b"", capture_output=True,
            env=env, timeout=60,
        )
        assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
        return p

    return run


def test_entry_point_newcomer_flow(sh):
    out = sh("stores", "create", "Demo Memory", "--description", "Notes for the demo").stdout
    assert out.startswith(b"created memory store memstore_")
    sh("memories", "create", "Demo Memory", "/prefs.md", input=b"Use ISO dates.\n")
    sh("memories", "create", "Demo Memory", "/todo.md", "--content", "buy milk")
    sh("memories", "update", "Demo Memory", "/prefs.md", "--content", "Use ISO-8601 dates.\n")
    sh("memories", "update", "Demo Memory", "/prefs.md", "--path", "/preferences.md")
    sh("memories", "delete", "Demo Memory", "/todo.md")
    listing = sh("memories", "list", "Demo Memory").stdout.decode()
    assert listing.splitlines()[1].split()[-1] == "/preferences.md"
    assert "/todo.md" not in listing
    assert sh("memories", "show", "Demo Memory", "/preferences.md").stdout == (
        b"Use ISO-8601 dates.\n"
    )

    history = json.loads(sh("--json", "versions", "list", "Demo Memory").stdout)
    assert [v["operation"] for v in history] == [
        "deleted", "modified", "modified", "created", "created",
    ]
    prefs = [v for v in history if v["memory_id"] == history[1]["memory_id"]]
    first = prefs[-1]["id"]
    edit = prefs[1]["id"]
    diff = sh("versions", "diff", "Demo Memory", edit).stdout.decode()
    assert "-Use ISO dates.\n+Use ISO-8601 dates.\n" in diff

    restored = sh("versions", "restore", "Demo Memory", first).stdout.decode()
    assert restored.startswith(f"restored {first} to /preferences.md")
    assert sh("memories", "show", "Demo Memory", "/preferences.md").stdout == b"Use ISO dates.\n"

    todo_deleted = history[0]["id"]
    sh("versions", "restore", "Demo Memory", todo_deleted, code=5)
    todo_created = [v for v in history if v["path"] == "/todo.md"][-1]["id"]
    sh("versions", "restore", "Demo Memory", todo_created)
    assert sh("memories", "show", "Demo Memory", "/todo.md").stdout == b"buy milk"
    table = sh("stores", "list").stdout.decode()
    assert "Demo Memory" in table and table.splitlines()[1].split()[3] == "2"  # memories


def test_entry_point_errors(sh, tmp_path):
    def one_line_error(p, *fragments: str) -> None:
        err = p.stderr.decode()
        assert err.count("\n") == 1 and err.startswith("memfs: "), err
        assert p.stdout == b""
        for f in fragments:
            assert f in err

    one_line_error(sh("stores", "show", "nope", code=8), "no database at")
    sh("stores", "create", "s")
    one_line_error(sh("stores", "show", "nope", code=3), "nope")
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 102_401)
    one_line_error(sh("memories", "create", "s", "/big.md", "--file", str(big), code=5), "102400")
    sh("memories", "create", "s", "/a.md", "--content", "a")
    one_line_error(sh("memories", "create", "s", "/a.md", "--content", "b", code=4), "/a.md")
    one_line_error(
        sh("memories", "create", "s", "/bad.md", input=b"caf\xe9\n", code=5), "UTF-8"
    )
    one_line_error(sh("stores", "delete", "s", code=2), "--yes")
    assert sh("memories", "show", "s", "/a.md").stdout == b"a"  # nothing was lost
    usage = sh("memories", "bogus", code=2)
    assert b"No such command" in usage.stderr
