"""The state of a launcher (the first part of :class:`~memfs.launcher.runner.Launcher`): the
store it opened, the session, its mounts and its command, and what every part uses (the
environment of a mount daemon, failing with a recorded ``session.error``)."""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..backends import is_url
from ..errors import InvalidRequest, MemfsError
from ..models import Session, SessionResource
from ..store import Store, check_token_ttl, open_store
from .agent import _refuse_a_secret_on_the_command_line, choose_agent
from .plan import Launch, LaunchError
from .procs import _describe_status

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


@dataclass
class _Mount:
    resource: SessionResource
    proc: subprocess.Popen[bytes]
    events_file: Path
    log_file: Path


class LauncherBase:
    """A launcher's state, from its start to its clean-up."""

    def __init__(self, launch: Launch) -> None:
        if not launch.command:
            raise InvalidRequest("no command to run")
        self.launch = launch
        self.agent = choose_agent(launch.user)  # before anything is opened
        if self.agent is not None:
            _refuse_a_secret_on_the_command_line(launch, self.agent)
        check_token_ttl(launch.token_ttl)
        if launch.url:
            from ..client import Client  # httpx: only a session on a server pays its import

            self.store: Store | Client = Client(launch.url, launch.api_key)
        else:
            self.store = open_store(launch.db_path, create=False)
        self.session: Session | None = None
        self.mounts: list[_Mount] = []
        #: Time travel: store id -> the AT its snapshot resolved to, and the session metadata
        #: that records it (the prompt and `memfs session show` tell it from there).
        self.snapshots: dict[str, str] = {}
        self.snapshot_notes: dict[str, str] = {}
        self._root_stat: os.stat_result | None = None  # an existing root given to the agent
        self.state_dir: Path | None = None
        self.namespace = False
        self.root = ""
        self._root_created = False
        #: The root has become session scratch (_make_scratch succeeded): only then may the
        #: clean-up unmount or empty it. Before that it is the user's, and set-up may have
        #: refused it precisely because of what it holds (files, the database, a mount).
        self._scratch_made = False
        self._child: subprocess.Popen[bytes] | None = None
        self._stop_signal: int | None = None
        self._unforwarded: int | None = None
        self._kill_at: float | None = None
        self._reported: set[int] = set()  # pids of daemons whose death is the error already
        #: The API served to CMD on a local database (memfs.launcher.sessionapi), while it runs, and
        #: the directory made for its socket when the state directory's path is too long.
        self.api: Any = None
        self._api_dir: Path | None = None

    def _db_file(self) -> str | None:
        """The local database file (None for a session on a server or on PostgreSQL)."""
        if not isinstance(self.store, Store) or is_url(self.store.path):
            return None
        return os.path.realpath(self.store.path)

    def _memfs_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` of a mount daemon (the launcher's own, never the agent's): the database, or
        the server and its key (in the environment rather than on a command line that ``ps``
        shows)."""
        env = dict(env)
        if not isinstance(self.store, Store):  # a server's client (launch.url)
            env.pop("MEMFS_DB", None)
            env["MEMFS_URL"] = self.store.base_url
            if self.launch.api_key:
                env["MEMFS_API_KEY"] = self.launch.api_key
        else:
            env.pop("MEMFS_URL", None)
            env.pop("MEMFS_API_KEY", None)
            env["MEMFS_DB"] = (self.store.path if is_url(self.store.path)
                               else os.path.abspath(self.store.path))
        return env

    @staticmethod
    def _last_log_line(m: _Mount) -> str:
        try:
            lines = [ln for ln in m.log_file.read_text(errors="replace").splitlines() if ln]
        except OSError:
            lines = []
        if lines:
            return lines[-1].removeprefix("memfs: ")
        return f"the daemon {_describe_status(m.proc.returncode)}"

    def _fail(self, message: str) -> NoReturn:
        self._record_error(message)
        raise LaunchError(message)

    def _record_error(self, message: str) -> None:
        """A ``session.error`` event (API.md §4.8: ``unknown_error`` when the whole session is
        affected); best effort, the launcher's own error line matters more."""
        if self.session is None:
            return
        try:
            self.store.events.add(self.session.id, [{
                "type": "session.error",
                "error": {"type": "unknown_error", "message": message,
                          "retry_status": "terminal"},
            }])
        except MemfsError as e:
            log.error("cannot record the session error: %s", e)
