"""Real mounts for the integration tests: ``memfs mount`` in a subprocess
(:class:`tests.support.mount.Mount`), always unmounted, and ``memfs run`` sessions
(:class:`tests.support.session.Run`), whose mounts are checked gone.

FUSE missing (no /dev/fuse, no fusermount3): the tests skip locally and fail when CI=true.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import pytest

from memfs.store import Limits, Store
from tests.support import need
from tests.support.mount import Mount, require_fuse
from tests.support.remote import KEY, MAX_MEMORIES, remote_env
from tests.support.server import Server, start_server, stop_server
from tests.support.session import AGENT, AGENT_PY, Run, mounts_under


@pytest.fixture
def fuse() -> None:
    require_fuse()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memfs.db"


@pytest.fixture
def open_store(db: Path) -> Iterator[Callable[..., Store]]:
    """Open (and later close) Store objects on the test database."""
    opened: list[Store] = []

    def open_(limits: Limits | None = None) -> Store:
        s = Store(db, limits=limits or Limits())
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def mounter(fuse: None, db: Path, tmp_path: Path) -> Iterator[Callable[..., Mount]]:
    """``mounter(store_ref, *args, name=..., env=..., wait=True)`` starts a mount; every mount
    is stopped and unmounted at teardown."""
    mounts: list[Mount] = []

    def start(store_ref: str, *args: str, name: str = "mnt", env: dict[str, str] | None = None,
              wait: bool = True) -> Mount:
        m = Mount(db, store_ref, tmp_path / name, list(args), env)
        mounts.append(m)
        return m.wait_mounted() if wait else m

    yield start
    for m in mounts:
        m.stop()


@pytest.fixture
def setup(open_store: Callable[..., Store], mounter: Callable[..., Mount]
          ) -> tuple[Store, str, Mount]:
    """A store in the test database, mounted: ``(store, store_id, mount)``."""
    store = open_store()
    s = store.stores.create("fuse test")
    m = mounter(s.id)
    return store, s.id, m


@pytest.fixture
def launch(db: Path, tmp_path: Path) -> Iterator[Callable[..., Run]]:
    """``launch(args, script, env=None, cwd=None)`` starts ``memfs run``; at teardown a
    launcher still running is killed and any mount left under tmp_path is removed (and the
    test fails)."""
    runs: list[Run] = []

    def start(args: list[str], script: str, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Run:
        r = Run(db, tmp_path, args, script, env, cwd)
        runs.append(r)
        return r

    yield start
    for r in runs:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.communicate()
    left = mounts_under(tmp_path)
    for p in left:
        subprocess.run(["fusermount3", "-uz", p], check=False, capture_output=True)
    assert not left, f"mounts left behind: {left}"


# -- remote mounts of a module's server ------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A module's ``memfs serve`` for remote mounts, with a memory limit (MAX_MEMORIES, for
    ENOSPC); test_server.py and others have a ``server`` of their own."""
    require_fuse()
    s = start_server(tmp_path_factory.mktemp("remote"), "--api-key", KEY,
                     env={"MEMFS_MAX_MEMORIES": str(MAX_MEMORIES)})
    yield s
    assert stop_server(s) == 0


@pytest.fixture
def sdk(server: Server) -> Iterator[anthropic.Anthropic]:
    """The official SDK on the module's ``server``."""
    with anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0) as client:
        yield client


@pytest.fixture
def mounts(server: Server, tmp_path: Path) -> Iterator[Callable[..., Mount]]:
    """``mounts(store_id, *args, name=, remote=True)``: a remote mount of the module's server
    (or, with remote=False, a local mount of the server's own database)."""
    started: list[Mount] = []
    db = Path(server.stderr).parent / "memfs.db"

    def start(store_id: str, *args: str, name: str = "mnt", remote: bool = True,
              url: str | None = None) -> Mount:
        env = remote_env(url or server.url) if remote else {"MEMFS_URL": ""}
        m = Mount(db, store_id, tmp_path / name, list(args), env)
        started.append(m)
        return m.wait_mounted()

    yield start
    for m in started:
        m.stop()


# The agent in a sandbox (test_sandbox.py, test_session_isolation.py): root, a user for the
# agent, and a directory both may write.

@pytest.fixture
def root_user(fuse: None) -> None:
    need(os.geteuid() == 0, "switching users and allow_other need root")
    need(os.path.exists(AGENT_PY), f"{AGENT_PY} (runs the agent-side checks)")


@pytest.fixture(scope="module")
def agent_user() -> Iterator[pwd.struct_passwd]:
    """An ordinary user for the agent, made for these tests (and removed after) when there
    is none: a name, a home, a group of its own."""
    made = False
    try:
        pw = pwd.getpwnam(AGENT)
    except KeyError:
        need(os.geteuid() == 0 and shutil.which("useradd"),
             "no user for the agent (useradd needs root)")
        subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/sh",
                        AGENT], check=True)
        made = True
        pw = pwd.getpwnam(AGENT)
    yield pw
    if made:
        subprocess.run(["userdel", "--remove", AGENT], check=False,
                       stderr=subprocess.DEVNULL)


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A directory every user can enter and write (sticky, like /tmp): the agent's way to
    hand results to the test. tmp_path itself is root's only, which keeps the database and
    the event logs there out of the agent's reach."""
    d = Path(tempfile.mkdtemp(prefix="memfs-sandbox-test-"))
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)
