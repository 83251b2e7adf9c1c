"""A new database is its owner's only (issue 19 §1): every store is in that one file, and an
agent run as another user must not read it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from memfs.store import Store


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_database_and_the_directories_made_for_it_are_private(tmp_path):
    os.umask(0o022)  # the usual umask: it would have given 0644 / 0755
    path = tmp_path / "a" / "b" / "memfs.db"
    with Store(path) as s:
        s.stores.create("Notes")
        assert {p: mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", path,
                                     f"{path}-wal", f"{path}-shm")} == {
            tmp_path / "a": 0o700, tmp_path / "a" / "b": 0o700, path: 0o600,
            f"{path}-wal": 0o600, f"{path}-shm": 0o600}


def test_an_existing_database_and_directory_keep_their_modes(tmp_path):
    path = tmp_path / "memfs.db"
    Store(path).close()
    os.chmod(path, 0o640)
    os.chmod(tmp_path, 0o750)
    Store(path).close()
    assert mode(path) == 0o640 and mode(tmp_path) == 0o750


def test_the_cli_makes_the_default_database_private(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME="")
    done = subprocess.run([sys.executable, "-m", "memfs", "stores", "create", "Notes"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    db = tmp_path / ".local" / "share" / "memfs" / "memfs.db"
    assert mode(db) == 0o600
    for d in (tmp_path / ".local", tmp_path / ".local" / "share", db.parent):
        assert mode(d) == 0o700, d


def test_a_database_of_an_earlier_main_still_opens(backend):
    """main at 584d6b0 numbered the session tokens' migration m009_session_tokens (m005 on
    PostgreSQL); the Console's sign-outs then took that number and the tokens became
    m010_session_tokens (m006). A database made by that main holds session_tokens already,
    and the renamed migration failed on it ("table session_tokens already exists"): every
    command refused to open it. Both migrations make what they make only if it is missing."""
    pg = backend.name == "postgresql"
    s = backend.open()
    table = "_memfs_migrations" if pg else "_sqlite_migrations"
    renamed = ("m005_console_signouts", "m006_session_tokens", "m005_session_tokens") if pg \
        else ("m009_console_signouts", "m010_session_tokens", "m009_session_tokens")
    sid = s.stores.create("Notes").id
    with s.write() as c:  # the database as that main left it
        c.execute(f"DELETE FROM {table} WHERE name IN (?, ?)", renamed[:2])
        c.execute(f"INSERT INTO {table} (migration_set, name, applied_at) "
                  f"SELECT migration_set, ?, applied_at FROM {table} LIMIT 1", (renamed[2],))
        c.execute("DROP TABLE console_signouts")
    s.close()
    again = backend.open()
    try:
        assert again.stores.get(sid).name == "Notes"
        session = again.sessions.create([{"type": "memory_store", "memory_store_id": sid}],
                                       status="running")
        again.sessions.create_token(session.id)
        again.keys.revoke_signin("a" * 64, 2**31 - 1)
    finally:
        again.close()
