"""A database the CLI cannot use: one line, exit code 8, and nothing created by mistake.

Each case runs ``python -m memfs`` in a subprocess (so a traceback would show on its stderr)
with HOME and the working directory in tmp_path: whatever a command wrongly creates lands there.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memfs import errors
from memfs.cli import cli
from memfs.store import Store, check_database, default_db_path
from tests.support import need

EXIT_DATABASE = 8
READ_ONLY_COMMANDS = [
    ["stores", "list"],
    ["stores", "show", "notes"],
    ["memories", "list", "notes"],
    ["memories", "show", "notes", "/a.md"],
    ["versions", "list", "notes"],
    ["session", "list"],
    ["session", "show", "sesn_x"],
    ["session", "events", "sesn_x"],
    ["session", "prompt", "sesn_x"],
]


def memfs(tmp_path: Path, db: str | None, *args: str, env: dict[str, str] | None = None,
          pre: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MEMFS_") and k != "XDG_DATA_HOME"}
    base["HOME"] = str(tmp_path / "home")
    if db is not None:
        base["MEMFS_DB"] = db
    base.update(env or {})
    return subprocess.run([*(pre or []), sys.executable, "-m", "memfs", *args],
                          capture_output=True, text=True, env=base, cwd=tmp_path, timeout=60)


def assert_one_line(p: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: "), p.stderr
    assert p.stdout == ""
    for f in fragments:
        assert f in lines[0], lines[0]


def listing(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("command", [["stores", "list"], ["stores", "create", "notes"]])
def test_a_database_under_proc(tmp_path, command):
    assert_one_line(memfs(tmp_path, "/proc/x.db", *command), EXIT_DATABASE, "/proc/x.db")


@pytest.mark.parametrize("command", [["stores", "list"], ["stores", "create", "notes"]])
def test_a_directory(tmp_path, command):
    d = tmp_path / "dir"
    d.mkdir()
    assert_one_line(memfs(tmp_path, str(d), *command), EXIT_DATABASE, str(d), "directory")
    assert os.listdir(d) == []


@pytest.mark.parametrize("command", [["stores", "list"], ["stores", "create", "notes"]])
def test_a_file_that_is_not_a_database(tmp_path, command):
    f = tmp_path / "notes.txt"
    f.write_text("my notes, not a database\n" * 10)
    assert_one_line(memfs(tmp_path, str(f), *command), EXIT_DATABASE, str(f),
                    "not an SQLite database")
    assert f.read_text() == "my notes, not a database\n" * 10


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_a_mistyped_path_creates_nothing(tmp_path, command):
    """A read-only command on a missing database says so; it does not create an empty one."""
    typo = tmp_path / "tpyo" / "memfs.db"
    assert_one_line(memfs(tmp_path, str(typo), *command), EXIT_DATABASE, str(typo),
                    "memfs stores create")
    assert listing(tmp_path) == []


def test_the_default_database_is_not_created_by_a_read(tmp_path):
    assert_one_line(memfs(tmp_path, None, "stores", "list"), EXIT_DATABASE,
                    ".local/share/memfs/memfs.db")
    assert listing(tmp_path) == []


def test_create_makes_the_database_and_its_directory(tmp_path):
    """...and says which directories it made (a mistyped path shows at once)."""
    db = tmp_path / "new" / "dir" / "memfs.db"
    p = memfs(tmp_path, str(db), "stores", "create", "notes")
    assert p.returncode == 0, p.stderr
    assert p.stderr == (f"memfs: made the directory {tmp_path / 'new' / 'dir'} "
                        f"for the new database {db}\n")
    p = memfs(tmp_path, str(tmp_path / "new" / "other.db"), "stores", "create", "notes")
    assert p.returncode == 0 and p.stderr == "", p.stderr  # its directory was there
    p = memfs(tmp_path, str(db), "stores", "list")
    assert p.returncode == 0 and "notes" in p.stdout, p.stderr


def test_an_import_into_a_store_of_a_missing_database_creates_nothing(tmp_path):
    """A restore (no --into) is what makes a new database; --into names a store of an
    existing one."""
    typo = tmp_path / "tpyo.db"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("a")
    p = memfs(tmp_path, str(typo), "import", "notes", "--into", "Notes")
    assert_one_line(p, EXIT_DATABASE, str(typo))
    assert listing(tmp_path) == ["notes", "notes/a.md"]
    p = memfs(tmp_path, str(typo), "import", "notes")
    assert p.returncode == 0, p.stderr
    assert typo.exists()


def test_a_mount_of_a_missing_database_creates_nothing(tmp_path):
    (tmp_path / "mnt").mkdir()
    typo = tmp_path / "tpyo.db"
    p = memfs(tmp_path, str(typo), "mount", "notes", str(tmp_path / "mnt"))
    assert_one_line(p, EXIT_DATABASE, str(typo))
    assert listing(tmp_path) == ["mnt"]


def test_a_run_on_a_missing_database_creates_nothing(tmp_path):
    typo = tmp_path / "tpyo.db"
    p = memfs(tmp_path, str(typo), "run", "--store", "notes", "--isolation", "none",
              "--root", str(tmp_path / "root"), "--", "true")
    assert_one_line(p, EXIT_DATABASE, str(typo))
    assert listing(tmp_path) == []


def test_no_usable_home(tmp_path):
    """Neither XDG_DATA_HOME nor an absolute HOME: no database path (not one relative to
    the working directory). HOME="" (a database under /) is checked in-process below, so
    that a regression cannot write to /."""
    home = "relative/home"
    p = memfs(tmp_path, None, "stores", "create", "notes", env={"HOME": home})
    assert_one_line(p, EXIT_DATABASE, "MEMFS_DB")
    assert listing(tmp_path) == []
    assert_one_line(memfs(tmp_path, None, "stores", "list", env={"HOME": home}),
                    EXIT_DATABASE, "MEMFS_DB")


def test_help_works_without_a_home(tmp_path):
    p = memfs(tmp_path, None, "--help", env={"HOME": "relative"})
    assert p.returncode == 0, p.stderr
    assert "MEMFS_DB" in p.stdout


@pytest.mark.parametrize("home", ["", "relative", None])
def test_default_db_path_needs_a_home(monkeypatch, home):
    monkeypatch.delenv("MEMFS_DB", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(errors.DatabaseUnavailable, match="MEMFS_DB"):
        default_db_path()


def test_default_db_path_ignores_a_relative_xdg_data_home(monkeypatch, tmp_path):
    """The XDG spec: a relative path in these variables is invalid and ignored."""
    monkeypatch.delenv("MEMFS_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_db_path() == tmp_path / ".local" / "share" / "memfs" / "memfs.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_db_path() == tmp_path / "data" / "memfs" / "memfs.db"


def test_check_database(tmp_path):
    db = tmp_path / "memfs.db"
    with pytest.raises(errors.DatabaseUnavailable, match="memfs stores create"):
        check_database(db, create=False)
    check_database(db, create=True)
    assert not db.exists()  # checking never creates
    Store(db).close()
    check_database(db, create=False)
    empty = tmp_path / "empty.db"
    empty.touch()
    check_database(empty, create=True)  # SQLite makes an empty file a database
    with pytest.raises(errors.DatabaseUnavailable, match="empty"):
        check_database(empty, create=False)
    with pytest.raises(errors.DatabaseUnavailable, match="(?i)not a directory"):
        check_database(db / "x.db", create=True)


def test_the_library_creates_no_database_from_a_mistyped_memfs_db(tmp_path, monkeypatch):
    """Store() opens MEMFS_DB (or the default path): a missing file there is an error, not a
    new empty database, unless asked to create one."""
    typo = tmp_path / "tpyo.db"
    monkeypatch.setenv("MEMFS_DB", str(typo))
    with pytest.raises(errors.DatabaseUnavailable, match="memfs stores create"):
        Store()
    with pytest.raises(errors.DatabaseUnavailable):
        Store(typo, create=False)
    assert listing(tmp_path) == []
    Store(create=True).close()
    Store().close()
    Store(tmp_path / "named.db").close()  # a path named by the caller: made if missing
    assert listing(tmp_path) == ["named.db", "tpyo.db"]


def test_cli_runner_read_only_command(tmp_path):
    typo = tmp_path / "tpyo.db"
    result = CliRunner().invoke(cli, ["--db", str(typo), "stores", "list"])
    assert result.exit_code == EXIT_DATABASE
    assert result.stderr.count("\n") == 1 and str(typo) in result.stderr
    assert not typo.exists()


@pytest.mark.parametrize("command", [["stores", "list"], ["stores", "create", "other"]])
def test_a_read_only_file_system(tmp_path, command):
    """A database on a read-only file system (root ignores a directory's mode bits: a
    read-only bind mount, in a private mount namespace, stands in for a read-only directory)."""
    need(os.geteuid() == 0, "mounts a read-only file system (needs root)")
    data = tmp_path / "data"
    data.mkdir()
    assert memfs(tmp_path, str(data / "memfs.db"), "stores", "create", "notes").returncode == 0
    for f in data.iterdir():
        if f.name != "memfs.db":
            f.unlink()
    ro = tmp_path / "ro"
    ro.mkdir()
    script = (f"mount --bind {data} {ro} && mount -o remount,bind,ro {ro} && exec "
              '"$@"')
    p = memfs(tmp_path, str(ro / ("memfs.db" if command[1] == "list" else "new.db")),
              *command, pre=["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                             "sh"])
    assert_one_line(p, EXIT_DATABASE, str(ro))
