"""The state of a launch, which every step of it (:mod:`~.setup`, :mod:`~.credential`,
:mod:`~.mounts`, :mod:`~.command`, :mod:`~.runner`) is a function of: the store it opened, the
session, its root, its mounts and its command; and what every step uses (the environment of a
mount daemon, failing with a recorded ``session.error``)."""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..backends import is_url
from ..errors import InvalidRequest, MemfsError
from ..models import Session, SessionResource
from ..store import Store, check_token_ttl, open_store
from .agent import Agent, choose_agent, refuse_a_secret_on_the_command_line
from .plan import Launch, LaunchError
from .procs import describe_status

if TYPE_CHECKING:
    from ..client import Client
    from .sessionapi import SessionAPI

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


@dataclass
class Mount:
    """One store's mount: its daemon (one may serve several, :mod:`memfs.daemons.sessionfs`), the
    event log it appends to and its own log."""

    resource: SessionResource
    proc: subprocess.Popen[bytes]
    events_file: Path
    log_file: Path


@dataclass(eq=False)
class LaunchState:
    """A launch's state, from its start to its clean-up (:func:`open_state` makes it)."""

    launch: Launch
    agent: Agent | None  # the user CMD runs as (None: ours)
    store: Store | Client
    session: Session | None = None
    mounts: list[Mount] = field(default_factory=list)
    #: Time travel: store id -> the AT its snapshot resolved to, and the session metadata
    #: that records it (the prompt and `memfs session show` tell it from there).
    snapshots: dict[str, str] = field(default_factory=dict)
    snapshot_notes: dict[str, str] = field(default_factory=dict)
    root_stat: os.stat_result | None = None  # an existing root given to the agent
    state_dir: Path | None = None
    namespace: bool = False
    root: str = ""
    root_created: bool = False
    #: The root has become session scratch (make_scratch succeeded): only then may the
    #: clean-up unmount or empty it. Before that it is the user's, and set-up may have
    #: refused it precisely because of what it holds (files, the database, a mount).
    scratch_made: bool = False
    child: subprocess.Popen[bytes] | None = None
    stop_signal: int | None = None
    unforwarded: int | None = None
    kill_at: float | None = None
    reported: set[int] = field(default_factory=set)  # pids of daemons whose death is the error
    #: The API served to CMD on a local database (memfs.launcher.sessionapi), while it runs, and
    #: the directory made for its socket when the state directory's path is too long.
    api: SessionAPI | None = None
    api_dir: Path | None = None


def open_state(launch: Launch) -> LaunchState:
    """Check ``launch`` and open its store (a server's client with ``launch.url``).

    :raises InvalidRequest, LaunchError: nothing to run, a bad user, token lifetime or secret.
    """
    if not launch.command:
        raise InvalidRequest("no command to run")
    agent = choose_agent(launch.user)  # before anything is opened
    if agent is not None:
        refuse_a_secret_on_the_command_line(launch, agent)
    check_token_ttl(launch.token_ttl)
    if launch.url:
        from ..client import Client  # httpx: only a session on a server pays its import

        store: Store | Client = Client(launch.url, launch.api_key)
    else:
        store = open_store(launch.db_path, create=False)
    return LaunchState(launch, agent, store)


def db_file(st: LaunchState) -> str | None:
    """The local database file (None for a session on a server or on PostgreSQL)."""
    if not isinstance(st.store, Store) or is_url(st.store.path):
        return None
    return os.path.realpath(st.store.path)


def memfs_env(st: LaunchState, env: dict[str, str]) -> dict[str, str]:
    """``env`` of a mount daemon (the launcher's own, never the agent's): the database, or
    the server and its key (in the environment rather than on a command line that ``ps``
    shows)."""
    env = dict(env)
    if not isinstance(st.store, Store):  # a server's client (launch.url)
        env.pop("MEMFS_DB", None)
        env["MEMFS_URL"] = st.store.base_url
        if st.launch.api_key:
            env["MEMFS_API_KEY"] = st.launch.api_key
    else:
        env.pop("MEMFS_URL", None)
        env.pop("MEMFS_API_KEY", None)
        env["MEMFS_DB"] = (st.store.path if is_url(st.store.path)
                           else os.path.abspath(st.store.path))
    return env


def last_log_line(m: Mount) -> str:
    try:
        lines = [ln for ln in m.log_file.read_text(errors="replace").splitlines() if ln]
    except OSError:
        lines = []
    if lines:
        return lines[-1].removeprefix("memfs: ")
    return f"the daemon {describe_status(m.proc.returncode)}"


def fail(st: LaunchState, message: str) -> NoReturn:
    _record_error(st, message)
    raise LaunchError(message)


def _record_error(st: LaunchState, message: str) -> None:
    """A ``session.error`` event (API.md §4.8: ``unknown_error`` when the whole session is
    affected); best effort, the launcher's own error line matters more."""
    if st.session is None:
        return
    try:
        st.store.events.add(st.session.id, [{
            "type": "session.error",
            "error": {"type": "unknown_error", "message": message,
                      "retry_status": "terminal"},
        }])
    except MemfsError as e:
        log.error("cannot record the session error: %s", e)
