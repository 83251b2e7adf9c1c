"""`memfs run` and its session daemon start fast (issue 11: a session of 8 stores reaches its
command in 0.5 s): the launcher and the daemon do not import the HTTP stacks they do not use.
Each check runs in a fresh interpreter, since this test process has imported everything."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memfs.store import Store

#: Needed only to migrate a database (sqlite-utils, with dateutil, pluggy and click behind it),
#: and to read a session spec file or front matter the fast path cannot (yaml: 9 ms).
MIGRATIONS = ("sqlite_utils", "yaml")
#: Needed only by `memfs serve`, the Console, `--url` sessions and remote mounts.
HEAVY = ("httpx", "starlette", "jinja2", "hypercorn", "pygments", "memfs.api",
         "memfs.daemons.server", "memfs.client", "memfs.console", *(
             # Needed only for a PostgreSQL database.
             "psycopg", "psycopg_pool", "psycopg_binary", "memfs.backends.postgresql"))


def imported_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import memfs.cli",  # every `memfs` command, `memfs run` included
    "import memfs.cli, memfs.launcher.runner",  # the launcher of `memfs run`
    "import memfs.daemons.sessionfs",  # the session daemon of a local session
    "import memfs.daemons.mount",  # `memfs mount` of a local store
])
def test_launcher_and_daemon_do_not_import_the_http_stacks(code: str) -> None:
    mods = imported_after(code)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY + MIGRATIONS
                   or any(m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"{code!r} imports {heavy}"


def test_opening_an_up_to_date_database_does_not_import_sqlite_utils(tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"
    Store(db).close()  # created and migrated here
    mods = imported_after(
        f"from memfs.store import open_store\nopen_store({str(db)!r}, create=False).close()")
    assert "sqlite_utils" not in mods
    assert not any(m.startswith("psycopg") for m in mods)


def test_a_database_behind_on_migrations_is_still_migrated(tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"
    sqlite3.connect(db).close()  # exists, no schema: every migration is pending
    with Store(db, create=False) as s:
        names = [r[0] for r in s.all("SELECT name FROM _sqlite_migrations")]  # noqa: SLF001
        assert s.stores.list().data == []
    assert names[0] == "m001_initial" and len(names) == len(set(names)) >= 6
