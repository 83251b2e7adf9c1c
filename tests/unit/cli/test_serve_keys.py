"""``memfs serve`` with keys kept in the database: a live admin key (neither revoked nor
expired, :meth:`memfs.store.Store.keys.has_live_admin`) lets it listen on any address without a
server key; ``--key-rate`` (or ``MEMFS_KEY_RATE``) bounds each stored key's requests."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from memfs import errors
from memfs.daemons.server import check_bind
from memfs.store import Store
from tests.support import wait_until
from tests.support.server import start_server, stop_server

KEY = "sk-serve-keys-test"

#: The environment of a server started here: no server keys or key rate but those given.
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("MEMFS_API_KEYS", "MEMFS_KEY_RATE", "MEMFS_URL", "MEMFS_API_KEY")}


@pytest.fixture
def store(backend) -> Store:
    """Every test that takes it runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


def test_a_live_admin_key_is_one_neither_revoked_nor_expired(store):
    assert not store.keys.has_live_admin()
    store.keys.create("w", role="read_write")
    store.keys.create("r", role="read_only", workspace="team-a")
    assert not store.keys.has_live_admin()
    store.keys.create("brief", role="admin", expires_in=1)
    assert store.keys.has_live_admin()
    wait_until(lambda: not store.keys.has_live_admin(), 5)
    admin = store.keys.create("a", role="admin")
    assert store.keys.has_live_admin()
    store.keys.revoke(admin.id)
    assert not store.keys.has_live_admin()


def test_another_workspace_s_admin_key_does_not_switch_off_the_server_key(store, tmp_path):
    """With only a team-a admin key in the database, `memfs serve --host 0.0.0.0` started
    with no key at all, and no key saw the default workspace (issue 38, a newcomer's trial):
    only an admin key of the default workspace (a server key's) stands in for one."""
    store.keys.create("team-a admin", role="admin", workspace="team-a")
    assert not store.keys.has_live_admin()
    store.keys.create("ops", role="admin")
    assert store.keys.has_live_admin()


def test_check_bind_names_both_ways_in():
    with pytest.raises(errors.InvalidRequest) as e:
        check_bind("0.0.0.0", [])
    assert "--api-key" in e.value.message
    assert "memfs keys create NAME --role admin" in e.value.message
    check_bind("0.0.0.0", [], stored_admin=True)
    check_bind("0.0.0.0", ["k" * 16])
    check_bind("127.0.0.1", [])


def test_a_server_key_off_loopback_is_at_least_16_characters(tmp_path):
    """A one-character server key was taken on any address (issue 38 S4): off loopback a
    server key has at least 16 characters; the refusal names the key by its id, never itself."""
    for short in (["k"], ["k" * 16, "short-key"]):
        with pytest.raises(errors.InvalidRequest) as e:
            check_bind("0.0.0.0", short)
        assert "16 characters" in e.value.message and "short-key" not in e.value.message
        check_bind("127.0.0.1", short)  # loopback: the operator's own machine
    db = tmp_path / "memfs.db"
    r = subprocess.run([sys.executable, "-m", "memfs", "--db", str(db), "serve", "--port", "0",
                        "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60,
                       env={**CLEAN_ENV, "MEMFS_API_KEYS": "abc"})
    assert r.returncode == 5 and r.stderr.count("\n") == 1, r.stderr
    assert "16 characters" in r.stderr and "abc" not in r.stderr.replace("MEMFS_API_KEYS", "")


def serve_cmd(db, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memfs", "--db", str(db), "serve", "--port",
                           "0", *args], capture_output=True, text=True, timeout=60,
                          env=CLEAN_ENV)


def test_serve_anywhere_needs_a_server_key_or_a_live_admin_key(tmp_path):
    db = tmp_path / "memfs.db"
    r = serve_cmd(db, "--host", "0.0.0.0")
    assert r.returncode == 5 and r.stderr.count("\n") == 1, r.stderr
    assert "or make an admin key with `memfs keys create NAME --role admin`" in r.stderr
    assert not db.exists()  # nothing made for a server that does not start
    with Store(str(db)) as store:
        reader = store.keys.create("reader", role="read_only")
        assert serve_cmd(db, "--host", "0.0.0.0").returncode == 5
        admin = store.keys.create("ops", role="admin")
    s = start_server(tmp_path, "--host", "0.0.0.0", env=CLEAN_ENV)
    try:
        said = s.stderr.read_text()
        assert "the keys kept in the database are the only ones" in said
        assert "generated" not in said
        url = s.url.replace("0.0.0.0", "127.0.0.1")
        assert httpx.get(url + "/v1/memory_stores").status_code == 401
        h = {"x-api-key": admin.key}
        assert httpx.post(url + "/v1/memory_stores", json={"name": "n"}, headers=h
                          ).status_code == 200
        h = {"x-api-key": reader.key}
        assert httpx.get(url + "/v1/memory_stores", headers=h).status_code == 200
        assert httpx.post(url + "/v1/memory_stores", json={"name": "n"}, headers=h
                          ).status_code == 403
    finally:
        assert stop_server(s) == 0


def test_key_rate(tmp_path):
    with Store(str(tmp_path / "memfs.db")) as store:
        k = store.keys.create("busy")
    for bad in (["--key-rate", "0"], ["--key-rate", "fast"]):
        r = serve_cmd(tmp_path / "memfs.db", "--api-key", KEY, *bad)
        assert r.returncode == 2 and "--key-rate" in r.stderr, r.stderr
    for bad in ("-1", "fast"):
        r = subprocess.run([sys.executable, "-m", "memfs", "--db", str(tmp_path / "memfs.db"),
                            "serve", "--port", "0"], capture_output=True, text=True,
                           timeout=60, env={**CLEAN_ENV, "MEMFS_KEY_RATE": bad,
                                            "MEMFS_API_KEYS": KEY})
        assert r.returncode == 5 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("memfs: invalid key rate (MEMFS_KEY_RATE): "), r.stderr
    s = start_server(tmp_path, "--api-key", KEY, "--key-rate", "1", env=CLEAN_ENV)
    try:
        with httpx.Client(base_url=s.url) as c:
            # A bucket of 2 (bursts of twice the rate): the third request at once is a 429.
            statuses = [c.get("/v1/memory_stores", headers={"x-api-key": k.key})
                        for _ in range(3)]
            assert [r.status_code for r in statuses[:2]] == [200, 200]
            over = statuses[2]
            assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
            assert over.json()["error"]["type"] == "rate_limit_error"
            # The server's own keys have no rate.
            assert {c.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code
                    for _ in range(5)} == {200}
    finally:
        assert stop_server(s) == 0


def test_a_key_on_serve_s_command_line_is_warned_of_and_no_doc_puts_one_there(tmp_path):
    """What is on a command line is anyone's to read (``ps``, ``/proc/*/cmdline``): a
    ``memfs serve --api-key …`` started as the docs showed gave its key to every process of the
    machine, an agent's too (issue 38 S2). The docs put it in the environment, and ``--api-key``
    on the command line is warned of, in one line."""
    import re
    from pathlib import Path

    r = serve_cmd(tmp_path / "memfs.db", "--host", "0.0.0.0", "--api-key", "short")
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, r.stderr
    assert "MEMFS_API_KEYS" in warnings[0] and "command line" in warnings[0]
    assert "short" not in warnings[0]
    root = Path(__file__).resolve().parents[3]
    texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    texts.append(root / "memfs" / "cli" / "launch.py")
    for path in texts:
        for line in path.read_text().splitlines():
            assert not re.search(r"\bserve\b[^`]*--api-key\s+[\"'$]", line), (path, line)
