"""The CLI as a newcomer types it (issue 10, "A newcomer's path with no rough edge"):
``--json`` after the subcommand, hints for a mistyped access mode and a path without its
leading '/', help text that is neither cut nor rewrapped, a warning for a duplicate store name.
"""

from __future__ import annotations

import json
import logging
import os
import re

import click
import pytest
from click.testing import CliRunner

from memfs.cli import cli
from tests.support.cli import commands

#: Every command, with its full name.
ALL = list(commands(cli))


@pytest.fixture
def run(db_path):
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(cli, ["--db", str(db_path), *args], input=input)

    return invoke


def _one_line_error(result, code: int, *fragments: str) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


# -- --json after the subcommand ------------------------------------------------------------

#: Commands that print no object (a session's command, a mount, a server) take no --json.
NO_JSON = {"memfs", "memfs run", "memfs mount", "memfs serve"}
LEAVES = [(n, c) for n, c in ALL if not isinstance(c, click.Group) and n not in NO_JSON]


@pytest.mark.parametrize("name,cmd", LEAVES, ids=[n for n, _ in LEAVES])
def test_every_printing_command_takes_json_after_it(name: str, cmd: click.Command):
    opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
    assert "--json" in opts, f"{name} --json is not accepted"


def test_json_after_the_subcommand_is_the_same_as_before(run):
    assert run("stores", "create", "notes", "--json").exit_code == 0
    after = run("stores", "list", "--json")
    before = run("--json", "stores", "list")
    assert after.exit_code == 0, (after.stdout, after.stderr)
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert json.loads(after.stdout)[0]["name"] == "notes"
    shown = run("memories", "create", "notes", "/a.md", "--content", "hi", "--json")
    assert json.loads(shown.stdout)["path"] == "/a.md"


# -- --store NAME:MODE with a mistyped mode ------------------------------------------------


def test_a_mistyped_access_mode_names_the_valid_ones(run, tmp_path):
    assert run("stores", "create", "Docs").exit_code == 0
    r = run("run", "--root", str(tmp_path / "r"), "--isolation", "none",
            "--store", "Docs:readonly", "--", "true")
    line = _one_line_error(r, 5, "'readonly'", "read_only", "ro", "read_write", "rw")
    assert "Docs:readonly" in line


# -- a memory path without its leading '/' --------------------------------------------------


def test_a_path_without_slash_gets_a_hint(run):
    assert run("stores", "create", "X").exit_code == 0
    assert run("memories", "create", "X", "/hello.md", "--content", "hi").exit_code == 0
    hint = "paths start with '/': did you mean /hello.md?"
    _one_line_error(run("memories", "show", "X", "hello.md"), 3, hint)
    _one_line_error(run("memories", "delete", "X", "hello.md"), 3, hint)
    _one_line_error(run("memories", "create", "X", "hello.md", "--content", "x"), 5, hint)


def test_an_id_that_is_not_found_gets_no_path_hint(run):
    assert run("stores", "create", "X").exit_code == 0
    r = run("memories", "show", "X", "mem_01nothere")
    assert "did you mean" not in _one_line_error(r, 3)


# -- help text ------------------------------------------------------------------------------


def _help(*args: str) -> str:
    r = CliRunner().invoke(cli, [*args, "--help"], terminal_width=60)
    assert r.exit_code == 0, r.output
    return r.output


def _squash(text: str) -> str:
    return " ".join(text.split())


GROUPS = [(n, c) for n, c in ALL if isinstance(c, click.Group)]


@pytest.mark.parametrize("name,group", GROUPS, ids=[n for n, _ in GROUPS])
def test_group_help_does_not_cut_summaries(name: str, group: click.Group):
    out = _help(*name.split()[1:])
    listing = out.split("Commands:", 1)[1]
    assert "..." not in listing, listing
    ctx = click.Context(group)
    for sub in group.list_commands(ctx):
        cmd = group.get_command(ctx, sub)
        assert cmd is not None and cmd.help
        first = _squash(cmd.help.split("\n\n", 1)[0])
        first = re.split(r"(?<=\.)\s", first, maxsplit=1)[0]
        assert first in _squash(listing), f"{name} {sub}: {first!r} is cut in {listing}"


@pytest.mark.parametrize("name,cmd", ALL, ids=[n for n, _ in ALL])
def test_examples_are_shown_as_written(name: str, cmd: click.Command):
    out = _help(*name.split()[1:])
    example = (cmd.help or "").split("Example:", 1)[1]
    shown = {line.strip() for line in out.splitlines()}
    for line in example.splitlines():
        line = line.strip().replace("\\\\", "\\")
        if line and line != "\b":
            assert line in shown, f"{name}: example line {line!r} is rewrapped:\n{out}"


def test_mount_help_hides_the_launchers_options():
    out = _help("mount")
    for launcher_only in ("--ready-fd", "--display-root", "--mount-path"):
        assert launcher_only not in out


# -- duplicate store names --------------------------------------------------------------------


def test_a_duplicate_store_name_is_warned_at_creation(run):
    first = run("stores", "create", "Notes")
    assert first.exit_code == 0 and first.stderr == ""
    second = run("stores", "create", "Notes")
    assert second.exit_code == 0, second.stderr
    lines = second.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: warning:"), second.stderr
    assert "Notes" in lines[0] and "id" in lines[0]
    ids = re.findall(r"memstore_\w+", first.stdout + second.stdout)
    assert len(ids) == 2
    assert ids[0] in lines[0]  # the other store, by the id that names it unambiguously
    # Naming it now is ambiguous: the error lists both ids and says how to pick one.
    line = _one_line_error(run("stores", "show", "Notes"), 5, *ids)
    assert "id" in line and "rename" in line
    assert run("stores", "show", ids[0]).exit_code == 0


def _warning(result, *fragments: str) -> str:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: warning: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def test_a_rename_to_a_name_in_use_is_warned(run):
    notes = run("stores", "create", "Notes", "--json")
    other = run("stores", "create", "Other", "--json")
    a, b = json.loads(notes.stdout)["id"], json.loads(other.stdout)["id"]
    line = _warning(run("stores", "update", b, "--name", "Notes"), a, "'Notes'")
    assert b not in line
    # Changing something else, or renaming to a free name, says nothing.
    assert run("stores", "update", b, "-d", "more").stderr == ""
    assert run("stores", "update", b, "--name", "Free").stderr == ""
    # An archived store of that name is not in the way.
    run("stores", "archive", a)
    assert run("stores", "update", b, "--name", "Notes").stderr == ""


def test_an_import_into_a_new_store_of_a_name_in_use_is_warned(run, tmp_path):
    import zipfile

    first = json.loads(run("stores", "create", "Notes", "--json").stdout)["id"]
    z = tmp_path / "notes.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("a.md", "alpha")
    _warning(run("import", str(z), "--name", "Notes"), first, "'Notes'")
    assert run("import", str(z), "--name", "Fresh").stderr == ""
    assert run("import", str(z), "--into", first).stderr == ""  # no new store: no new name


def test_a_name_in_use_is_warned_through_a_server(store, monkeypatch):
    """With --url the server's store decides, as for a local database."""
    import functools

    from starlette.testclient import TestClient

    from memfs import client
    from memfs.api import create_app
    from tests.support.asgi import through

    first = store.stores.create("Notes")
    with TestClient(create_app(store, ["k"])) as tc:
        monkeypatch.setattr(client, "Client",
                            functools.partial(client.Client, transport=through(tc)))
        runner = CliRunner()
        remote = ["--url", "http://memfs", "--api-key", "k", "stores"]
        _warning(runner.invoke(cli, [*remote, "create", "Notes"]), first.id)
        other = store.stores.create("Other")
        _warning(runner.invoke(cli, [*remote, "update", other.id, "--name", "Notes"]), first.id)


# -- a missing API key names MEMFS_API_KEY ----------------------------------------------------


def test_a_missing_api_key_names_the_env_var(store):
    from starlette.testclient import TestClient

    from memfs.api import create_app

    with TestClient(create_app(store, ["k" * 32])) as anon:
        missing = anon.get("/v1/memory_stores")
        wrong = anon.get("/v1/memory_stores", headers={"x-api-key": "nope"})
    assert missing.status_code == wrong.status_code == 401
    assert "MEMFS_API_KEY" in missing.json()["error"]["message"]
    assert "MEMFS_API_KEY" in wrong.json()["error"]["message"]


# -- a mount point whose parent is missing (issue 19) ---------------------------------------


def test_a_missing_parent_of_a_mount_point_is_named(run, tmp_path):
    """`memfs mount` makes the mount point, not its parents: the line names the parent that
    is missing (it said the mount point "does not exist"), or the one that is a file."""
    assert run("stores", "create", "X").exit_code == 0
    parent = tmp_path / "no" / "such"
    line = _one_line_error(run("mount", "X", str(parent / "mnt")), 1, str(parent))
    assert "parent" in line and "does not exist" in line and f"mkdir -p {parent}" in line
    assert not (tmp_path / "no").exists()
    afile = tmp_path / "a-file"
    afile.write_text("x")
    line = _one_line_error(run("mount", "X", str(afile / "mnt")), 1, str(afile))
    assert "not a directory" in line


# -- the global options after the subcommand (issue 19) -------------------------------------

#: Every global option of `memfs`, and a value for it.
GLOBAL = {"--db": "x.db", "--url": "http://memfs", "--api-key": "k", "--json": None,
          "-v": None, "--verbose": None, "--log-format": "json"}
#: A command's own option of that name wins after it: serve's --api-key is a key it accepts.
OWN = {("memfs serve", "--api-key")}
SUBCOMMANDS = ALL[1:]


@pytest.mark.parametrize("name,cmd", SUBCOMMANDS, ids=[n for n, _ in SUBCOMMANDS])
def test_every_command_takes_every_global_option_after_it(name: str, cmd: click.Command):
    """Each global option parses after each command and subgroup, and its help lists them."""
    opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
    for opt, value in GLOBAL.items():
        if (name, opt) in OWN:
            continue
        assert opt in opts, f"{name} {opt}: no such option"
        args = [opt] if value is None else [opt, value]
        ctx = click.Context(cli)
        ctx.obj = None
        cmd.make_context(name.split()[-1], [*args, "--help"], parent=ctx,
                         resilient_parsing=True)
    shown = _help(*name.split()[1:])
    assert "Global options" in shown, shown
    section = shown.split("Global options", 1)[1]
    for opt in GLOBAL:
        if (name, opt) not in OWN:
            assert opt in section, f"{name} --help does not show {opt}"


@pytest.fixture
def two_dbs(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(a), "stores", "create", "in-a"]).exit_code == 0
    assert runner.invoke(cli, ["stores", "create", "in-b", "--db", str(b)]).exit_code == 0
    return a, b


def _names(result) -> list[str]:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return [s["name"] for s in json.loads(result.stdout)]


def test_db_after_the_subcommand_wins_over_before_and_over_the_environment(two_dbs):
    a, b = two_dbs
    runner = CliRunner()
    assert _names(runner.invoke(cli, ["stores", "list", "--db", str(b), "--json"])) == ["in-b"]
    assert _names(runner.invoke(cli, ["--db", str(a), "stores", "list", "--db", str(b),
                                      "--json"])) == ["in-b"]
    assert _names(runner.invoke(cli, ["stores", "--db", str(b), "list", "--json"],
                                env={"MEMFS_DB": str(a)})) == ["in-b"]
    # Given only before, or by the environment, it holds as before.
    assert _names(runner.invoke(cli, ["--db", str(a), "--json", "stores", "list"])) == ["in-a"]
    assert _names(runner.invoke(cli, ["stores", "list", "--json"],
                                env={"MEMFS_DB": str(a)})) == ["in-a"]
    assert _names(runner.invoke(cli, ["dream", "--db", str(b), "list", "--json"])) == []


def test_url_and_api_key_after_the_subcommand(tmp_path, monkeypatch):
    import functools

    from starlette.testclient import TestClient

    from memfs import client
    from memfs.api import create_app
    from memfs.store import Store
    from tests.support.asgi import through

    server = Store(tmp_path / "server.db")
    server.stores.create("on-the-server")
    runner = CliRunner()
    with TestClient(create_app(server, ["k"])) as tc:
        monkeypatch.setattr(client, "Client",
                            functools.partial(client.Client, transport=through(tc)))
        listed = runner.invoke(cli, ["stores", "list", "--url", "http://memfs",
                                     "--api-key", "k", "--json"])
        assert _names(listed) == ["on-the-server"]
        wrong = runner.invoke(cli, ["--api-key", "k", "stores", "list", "--url",
                                    "http://memfs", "--api-key", "wrong"])
        assert wrong.exit_code == 1 and "memfs: " in wrong.stderr, wrong.stderr
    server.close()


def test_run_mount_and_serve_take_them_where_the_readme_puts_them(db_path, tmp_path,
                                                                  monkeypatch):
    """`memfs run --url …`, `memfs mount --url …`, `memfs serve --db …` (they answered "No
    such option")."""
    from memfs.daemons import mount as daemon
    from memfs.daemons import server
    from memfs.launcher import runner

    got: dict[str, object] = {}
    monkeypatch.setattr(runner, "run", lambda launch: got.update(run=launch) or 0)
    monkeypatch.setattr(daemon, "mount", lambda opts: got.update(mount=opts))
    monkeypatch.setattr(server, "serve", lambda db, *a, **kw: got.update(serve=db))
    runner = CliRunner()
    r = runner.invoke(cli, ["run", "--url", "http://memfs", "--api-key", "k", "--store", "X",
                            "--", "true"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert (got["run"].url, got["run"].api_key) == ("http://memfs", "k")
    r = runner.invoke(cli, ["mount", "--url", "http://memfs", "--api-key", "k", "X",
                            str(tmp_path / "m"), "-v"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert (got["mount"].url, got["mount"].api_key) == ("http://memfs", "k")
    pg = "postgresql://memfs@db.example/memfs"
    r = runner.invoke(cli, ["serve", "--db", pg, "--port", "0", "--api-key", "served"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert got["serve"] == pg
    r = runner.invoke(cli, ["serve", "--url", "http://memfs", "--json"])
    _one_line_error(r, 2, "serve uses a local database")


def test_verbosity_and_log_format_after_the_subcommand(db_path, monkeypatch):

    from memfs.daemons import logs

    monkeypatch.delenv("MEMFS_LOG_FORMAT", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    assert CliRunner().invoke(cli, ["stores", "create", "X"]).exit_code == 0
    r = CliRunner().invoke(cli, ["-v", "stores", "list", "-v", "--log-format", "json"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert root.level == logging.DEBUG  # -v twice: before and after
    assert isinstance(root.handlers[0].formatter, logs.JsonFormatter)
    assert os.environ["MEMFS_LOG_FORMAT"] == "json"  # for the daemons it starts


# -- warnings read like the errors (issue 19) -------------------------------------------------


def test_a_warning_is_one_line_like_an_error(db_path, monkeypatch):
    """`memfs session reap` warns of each session it ends: `memfs: warning: ...`, one line (it
    was Python's `<time> memfs.session WARNING: ...`); with --log-format json, a JSON line."""
    import socket

    from memfs.store import Store

    with Store(db_path) as s:
        dead = {"host": socket.gethostname(), "pid": None, "boot_id": "", "start": 0}
        sid = s.sessions.create([], launcher=dead).id
    monkeypatch.delenv("MEMFS_LOG_FORMAT", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    r = CliRunner().invoke(cli, ["session", "reap"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stderr.splitlines() == [
        f"memfs: warning: ended session {sid}: the launcher of this session (pid None) "
        "ended without it"], r.stderr


def test_a_launcher_run_in_process_leaves_the_process_no_subreaper(run, tmp_path):
    """The launcher adopts CMD's orphans only while its session runs: run in-process (as here,
    or from Python), it must not leave the caller the adopter of every later orphan, which
    would stay zombies in /proc (a later test's killed launcher's command did)."""
    from memfs.linux import is_child_subreaper

    before = is_child_subreaper()
    assert run("stores", "create", "Docs").exit_code == 0
    r = run("run", "--root", str(tmp_path / "r"), "--isolation", "none",
            "--store", "Docs", "--", "true")
    assert r.exit_code == 0, r.output
    assert is_child_subreaper() == before
