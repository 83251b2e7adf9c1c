"""``memfs keys`` (create, list, revoke) on the local database and through a real server
(``--url``), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from memfs import errors
from memfs.cli import cli
from memfs.rules import parse_time
from memfs.store import Store, local_user_actor
from tests.support import wait_until
from tests.support.cli import assert_error
from tests.support.server import start_server, stop_server

KEY = "sk-keys-cli-test"

#: The environment of a server started here: no server keys or key rate but those given.
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("MEMFS_API_KEYS", "MEMFS_KEY_RATE", "MEMFS_URL", "MEMFS_API_KEY")}


@pytest.fixture
def store(backend) -> Store:
    """Every test that takes it runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def run(backend, monkeypatch):
    """Invoke the CLI on the test database, or with ``url`` through a server with ``key``."""
    for name in ("MEMFS_URL", "MEMFS_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(*args: str, url: str | None = None, key: str = KEY):
        where = ["--db", backend.url] if url is None else ["--url", url, "--api-key", key]
        return runner.invoke(cli, [*where, *args])

    return invoke


def made(result) -> dict:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return json.loads(result.stdout)


# -- on the local database ---------------------------------------------------------------------


def test_create_prints_the_secret_once_and_list_never(run, store):
    r = run("keys", "create", "ops", "--role", "admin")
    assert r.exit_code == 0, (r.stdout, r.stderr, r.exception)
    secret = r.stdout.strip()
    assert r.stdout == secret + "\n" and secret.startswith("memfs_key_")  # alone: $(...)
    said = r.stderr.splitlines()
    assert said[0].startswith("memfs: made API key apikey_") and "(ops)" in said[0]
    assert "workspace default, role admin, every store, never expires" in said[0]
    assert said[1] == ("memfs: this secret will not be shown again: keep it now (only its "
                       "SHA-256 is kept)")
    grant = store.keys.grant(secret)
    assert (grant.workspace_id, grant.role, grant.access) == ("default", "admin", None)
    [k] = store.keys.list()
    assert k.id == grant.key_id and k.created_by == local_user_actor()

    listed = run("keys", "list")
    assert listed.exit_code == 0 and secret not in listed.stdout
    header, row = listed.stdout.splitlines()
    assert re.split(r"\s{2,}", header) == [
        "ID", "NAME", "WORKSPACE", "ROLE", "STORES", "CREATED", "EXPIRES", "LAST USED",
        "REVOKED"]
    assert row.split()[:5] == [k.id, "ops", "default", "admin", "all"]
    as_json = made(run("--json", "keys", "list"))
    assert [d["id"] for d in as_json] == [k.id] and as_json[0]["key"] is None
    assert secret not in json.dumps(as_json)


def test_create_a_scoped_read_only_expiring_key_of_a_workspace(run, store):
    store.stores.create("notes")  # the default workspace's: not this one
    notes_a = store.stores.create("notes", workspace="team-a")
    before = datetime.now(UTC)
    d = made(run("--json", "keys", "create", "ci-reader", "--workspace", "team-a", "--read-only",
                 "--store", "notes", "--expires", "30d"))
    assert d["type"] == "memfs_api_key" and d["key"].startswith("memfs_key_")
    assert (d["name"], d["workspace_id"], d["role"], d["memory_store_ids"]) == (
        "ci-reader", "team-a", "read_only", [notes_a.id])
    expires = parse_time(d["expires_at"])
    assert before + timedelta(days=30) <= expires <= datetime.now(UTC) + timedelta(days=30)
    assert store.keys.grant(d["key"]).access == {notes_a.id: "read_only"}

    assert [k["id"] for k in made(run("--json", "keys", "list", "-w", "team-a"))] == [d["id"]]
    assert made(run("--json", "keys", "list", "--workspace", "default")) == []
    table = run("keys", "list", "-w", "team-a").stdout
    assert notes_a.id in table and "read_only" in table and d["key"] not in table
    two = made(run("--json", "keys", "create", "w", "-w", "team-a", "--role", "read_write",
                   "--store", notes_a.id, "--store", store.stores.create("x",
                                                                         workspace="team-a").id,
                   "--store", store.stores.create("y", workspace="team-a").id))
    row = next(line for line in run("keys", "list").stdout.splitlines() if two["id"] in line)
    assert f"{two['memory_store_ids'][0]},{two['memory_store_ids'][1]} +1" in row


def test_the_readme_sequence_on_a_fresh_database(run, store):
    """Issue 38 (newcomer): ``keys create --workspace team-a --store notes`` needs a store of
    team-a, and nothing made one locally: ``stores create --workspace`` does. A workspace
    needs no making of its own: its first store or key starts it."""
    made_a = made(run("--json", "stores", "create", "notes", "--workspace", "team-a"))
    assert [s.id for s in store.stores.list(workspace="team-a").data] == [made_a["id"]]
    assert store.stores.list(workspace="default").data == []
    shown = made(run("--json", "stores", "show", "notes", "--workspace", "team-a"))
    assert shown["id"] == made_a["id"]
    assert_error(run("stores", "show", "notes", "--workspace", "team-b"), 3, "'notes'",
                 "in workspace team-b")
    key = made(run("--json", "keys", "create", "ci-reader", "--workspace", "team-a",
                   "--read-only", "--store", "notes", "--expires", "30d"))
    assert key["memory_store_ids"] == [made_a["id"]]
    # A store of the default workspace by the same name is another store, not a namesake.
    r = run("stores", "create", "notes")
    assert r.exit_code == 0 and "warning" not in r.stderr, r.stderr
    assert_error(run("stores", "create", "x", "--workspace", "Team A"), 5,
                 "invalid workspace 'Team A'")


def test_stores_create_in_another_workspace_through_a_server_is_refused(run, server):
    """A server makes a store in the calling key's own workspace: --workspace is refused
    there, in one line, rather than ignored (the store would land in the wrong team)."""
    assert_error(run("stores", "create", "notes", "--workspace", "team-a", url=server.url), 2,
                 "--workspace")


def test_clear_errors_and_nothing_made(run, store, backend):
    other = store.stores.create("theirs", workspace="team-b")
    assert_error(run("keys", "create", "x", "--role", "owner"), 5,
                 "role must be one of admin, read_write, read_only (not 'owner')")
    assert_error(run("keys", "create", "x", "--expires", "soon"), 5, "invalid duration 'soon'")
    assert_error(run("keys", "create", "x", "--expires", "0"), 5, "1 second to 10 years")
    assert_error(run("keys", "create", "x", "--store", "nope"), 3, "'nope'",
                 "in workspace default")
    assert_error(run("keys", "create", "x", "--store", other.id), 3, other.id)
    assert_error(run("keys", "create", "x", "--read-only", "--role", "admin"), 2,
                 "--read-only or --role admin")
    assert_error(run("keys", "create", "x", "--workspace", "Team A"), 5,
                 "invalid workspace 'Team A'")
    assert_error(run("keys", "list", "--workspace", "Team A"), 5, "invalid workspace")
    assert_error(run("keys", "create", " "), 5, "a key's name is 1 to 200 characters")
    assert_error(run("keys", "revoke", "apikey_nope"), 3, "API key apikey_nope not found")
    assert store.keys.list() == []
    assert run("keys", "list").stdout == "no API keys (make one: memfs keys create NAME)\n"


def test_revoke_and_expiry_show_in_the_list(run, store):
    k = store.keys.create("x")
    short = store.keys.create("short", expires_in=1)
    secret = k.key
    r = run("keys", "revoke", k.id)
    assert r.exit_code == 0 and r.stdout == f"revoked API key {k.id} (x) of workspace default\n"
    revoked = store.keys.get(k.id)
    assert revoked.revoked_at is not None
    with pytest.raises(errors.Unauthorized, match="revoked"):
        store.keys.grant(secret)
    again = run("keys", "revoke", k.id)
    assert again.exit_code == 0 and "revoked already" in again.stdout
    assert made(run("--json", "keys", "revoke", k.id))["revoked_at"] == revoked.revoked_at
    row = next(line for line in run("keys", "list").stdout.splitlines() if k.id in line)
    assert row.rstrip().endswith(revoked.revoked_at[:19].replace("T", " "))
    wait_until(lambda: "(expired)" in next(
        line for line in run("keys", "list").stdout.splitlines() if short.id in line), 5)


def test_create_makes_a_missing_database_and_list_does_not(tmp_path):
    runner = CliRunner()
    db = tmp_path / "new.db"
    assert_error(runner.invoke(cli, ["--db", str(db), "keys", "list"]), 8)
    assert not db.exists()
    r = runner.invoke(cli, ["--db", str(db), "keys", "create", "ops", "--role", "admin"])
    assert r.exit_code == 0 and db.exists()
    with Store(str(db)) as store:
        assert store.keys.has_live_admin()


# -- through a server (--url) ------------------------------------------------------------------


@pytest.fixture
def server(backend, tmp_path):
    s = start_server(tmp_path, "--api-key", KEY, db=backend.url, env=CLEAN_ENV)
    try:
        yield s
    finally:
        assert stop_server(s) == 0


def test_keys_through_a_server(run, store, server):
    notes = store.stores.create("notes")
    notes_a = store.stores.create("notes", workspace="team-a")
    url = server.url
    # A server key: the default workspace's admin; names resolve in its own workspace.
    reader = made(run("--json", "keys", "create", "reader", "--read-only", "--store", "notes",
                      url=url))
    assert (reader["workspace_id"], reader["memory_store_ids"]) == ("default", [notes.id])
    assert store.keys.grant(reader["key"]).access == {notes.id: "read_only"}
    assert_error(run("keys", "create", "a", "-w", "team-a", "--store", "notes", url=url), 3,
                 "by its id")
    reader_a = made(run("--json", "keys", "create", "a", "-w", "team-a", "--store", notes_a.id,
                        url=url))
    assert reader_a["memory_store_ids"] == [notes_a.id] and reader_a["workspace_id"] == "team-a"
    admin_a = made(run("--json", "keys", "create", "team-a admin", "-w", "team-a", "--role",
                       "admin", url=url))
    r = run("keys", "create", "plain", url=url)
    assert r.exit_code == 0 and r.stdout.startswith("memfs_key_"), r.stderr
    assert "will not be shown again" in r.stderr
    plain = r.stdout.strip()
    assert [k["id"] for k in made(run("--json", "keys", "list", "-w", "team-a", url=url))] == [
        admin_a["id"], reader_a["id"]]
    listed = run("keys", "list", url=url)
    assert reader["id"] in listed.stdout and admin_a["id"] not in listed.stdout
    assert reader["key"] not in listed.stdout and plain not in listed.stdout

    # A stored admin key manages its own workspace only; another's key is unknown to it.
    as_a = {"url": url, "key": admin_a["key"]}
    assert [k["id"] for k in made(run("--json", "keys", "list", **as_a))] == [
        admin_a["id"], reader_a["id"]]
    assert_error(run("keys", "create", "x", "-w", "default", **as_a), 6, "its own workspace")
    assert_error(run("keys", "revoke", reader["id"], **as_a), 3, reader["id"])
    mine = made(run("--json", "keys", "create", "w", "--store", "notes", **as_a))
    assert (mine["workspace_id"], mine["memory_store_ids"]) == ("team-a", [notes_a.id])
    assert_error(run("keys", "create", "x", "--expires", "soon", url=url), 5, "duration")
    assert_error(run("keys", "create", "x", "--role", "owner", url=url), 5, "role")

    # Only admins manage keys; a revoked key is refused at once.
    assert_error(run("keys", "list", url=url, key=plain), 6)
    assert run("keys", "revoke", admin_a["id"], url=url).exit_code == 0
    assert_error(run("keys", "list", **as_a), 1, "revoked")
    assert store.keys.get(admin_a["id"]).revoked_at is not None
