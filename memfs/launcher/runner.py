"""The session launcher: attach stores to a session, mount each one, run the agent in them.

``memfs run --store REF[:read_only|:read_write] ... -- CMD`` (SPEC §3):

1. creates the session through the store (which validates the attachments and derives every
   ``mount_path``); nothing is mounted or created on disk before that succeeds;
2. makes the root (``/mnt/memory`` by default when privileged) session scratch. Privileged, the
   launcher moves into a private mount namespace and mounts a tmpfs on the root, so whatever
   the agent writes outside a mount path vanishes with the namespace and no other session (nor
   the host) ever sees it. Unprivileged, the root is a new (or empty) directory that is deleted
   at the end;
3. mounts the stores. In the private namespace ONE daemon (:mod:`memfs.sessionfs`) serves
   them all: its filesystem (one directory per store) is mounted at a hidden place, each
   directory is bind-mounted onto its mount path, and the hidden mount is detached. Without a
   namespace, one ``memfs mount`` daemon per store, started concurrently. Either way the
   launcher waits until every store is mounted;
4. renders the memory section of the system prompt to a file, marks the session ``running``
   and runs CMD with ``MEMFS_SESSION_ID`` and ``MEMFS_SYSTEM_PROMPT_FILE``, forwarding
   SIGINT/SIGTERM/SIGHUP (a CMD that ignores SIGTERM/SIGHUP is killed after
   :data:`KILL_GRACE` seconds);
5. always cleans up: processes CMD left behind are stopped (the launcher is their subreaper),
   every mount is removed (SIGTERM to each daemon, then a lazy unmount of anything left),
   scratch is discarded, the session is marked ``terminated``, and ``memfs run`` exits with
   CMD's status (128+N when CMD died of signal N). If a mount daemon dies, CMD is stopped, a
   ``session.error`` event is recorded and the launcher fails with a clear error instead of
   leaving the agent on a dead mount.

Known limitations: stores are attached for the life of the session (as in the API); the
namespace mode needs root (CAP_SYS_ADMIN); a ``kill -9`` of the launcher itself cannot mark
the session terminated (the daemons and CMD still get a parent-death signal).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import grp
import logging
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import linux
from ..backends import is_url
from ..errors import InvalidRequest, MemfsError, NotFound
from ..models import MemoryStore, Session, SessionResource
from ..protocol import StoreAPI
from ..store import Store, check_token_ttl, open_store
from .prompt import SNAPSHOT_KEY, render_memory_prompt, snapshot_note

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger(__name__)

#: Seconds to wait for every mount to come up.
MOUNT_TIMEOUT = 30.0
#: Seconds a mount daemon gets to unmount after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
#: Seconds CMD gets after a forwarded SIGTERM/SIGHUP (or a dead mount) before SIGKILL.
KILL_GRACE = 5.0
#: Seconds processes left behind by CMD get after SIGTERM before SIGKILL.
LEFTOVER_GRACE = 2.0
#: Seconds to wait for a mount to answer the request that flushes its queue (see _barrier).
BARRIER_TIMEOUT = 2.0
#: The longest path of the session API's unix socket (sun_path: 108 bytes with its NUL).
SOCKET_PATH_MAX = 100

ACCESS_ALIASES = {"read_only": "read_only", "read_write": "read_write",
                  "ro": "read_only", "rw": "read_write"}


class LaunchError(MemfsError):
    """The session could not be set up, CMD could not be started, or a mount died.

    ``status`` is the exit status ``memfs run`` should end with (126/127 like a shell when
    CMD cannot be executed / is not found, else 1).
    """

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Attachment:
    """One ``--store REF[:access]``, or one ``resources`` entry of a spec file (memfs.spec),
    which may carry its ``instructions``."""

    ref: str
    access: str = "read_write"
    instructions: str | None = None
    #: Time travel (``NAME@AT``, README "Time travel"): the store as it was at AT, read-only;
    #: set by :meth:`resolve` when the whole REF names no store.
    at: str | None = None
    #: The access was given (``:read_write`` with ``@AT`` is an error, not a default).
    explicit_access: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, spec: str) -> Attachment:
        """``REF``, ``REF:read_only`` or ``REF:read_write`` (also ``:ro``/``:rw``). A REF may
        itself hold colons: only a known access suffix is split off."""
        ref, sep, access = spec.rpartition(":")
        if sep and ref and access in ACCESS_ALIASES:
            return cls(ref, ACCESS_ALIASES[access], explicit_access=True)
        return cls(spec)

    def resolve(self, store: StoreAPI) -> MemoryStore:
        """The store :attr:`ref` names. A REF no store has that ends in ``:WORD`` was most
        likely a mistyped access mode (``Docs:readonly``): the error says so. A REF no store
        has that holds ``@`` is ``NAME@AT`` (split at the last ``@``): a snapshot, read-only.

        :raises NotFound: no such store. :raises InvalidRequest: an ambiguous name, or
            the unknown access mode, or ``@AT`` with ``:read_write``.
        """
        try:
            return store.resolve_store(self.ref)
        except NotFound:
            name, sep, at = self.ref.rpartition("@")
            if sep and not name:
                raise InvalidRequest(f"--store {self.ref!r}: no store name before '@' "
                                     "(NAME@AT: the store NAME as it was at AT)") from None
            if sep and name and at and self.at is None:
                found = store.resolve_store(name)
                if self.explicit_access and self.access == "read_write":
                    raise InvalidRequest(
                        f"--store {self.ref!r}: a store as it was at {at} is a read-only "
                        "snapshot; drop ':read_write'") from None
                self.ref, self.at, self.access = name, at, "read_only"
                return found
            name, sep, mode = self.ref.rpartition(":")
            if not (sep and name):
                raise
            raise InvalidRequest(
                f"--store {self.ref!r}: no memory store has that id or name, and {mode!r} is "
                "not an access mode (':read_only' or ':ro', ':read_write' or ':rw')"
            ) from None


@dataclass
class _Mount:
    resource: SessionResource
    proc: subprocess.Popen[bytes]
    events_file: Path
    log_file: Path


@dataclass
class Launch:
    """What ``memfs run`` was asked to do.

    :param instructions: ``(REF, TEXT)`` pairs; REF names an attached store by id or name
        (matched after resolution, so ``--store notes`` and ``--instructions <its id>=…`` agree).
    """

    attachments: list[Attachment]
    command: Sequence[str]
    root: str | None = None
    db_path: str | None = None
    #: A memfs server (``memfs run --url``): the session lives there and every mount is a
    #: remote mount of it; ``db_path`` is then unused.
    url: str | None = None
    api_key: str | None = None
    isolation: str = "auto"  # auto | namespace | none
    instructions: list[tuple[str, str]] = field(default_factory=list)
    #: The session's title (default: the command line) and metadata (``--spec``).
    title: str | None = None
    metadata: dict[str, str] | None = None
    #: ``USER[:GROUP]`` (names or numbers) to run CMD as; None: the invoking user of a
    #: ``sudo`` (SUDO_UID/SUDO_GID), else the launcher's own user.
    user: str | None = None
    #: Seconds CMD's session token lives at most (None: the store's default, one day).
    token_ttl: float | None = None


@dataclass
class Agent:
    """The user CMD runs as, when it is not the launcher's."""

    uid: int
    gid: int
    groups: list[int]
    name: str
    home: str

    @classmethod
    def parse(cls, spec: str) -> Agent:
        """``USER[:GROUP]``: names or numbers. A number with no passwd entry is allowed (its
        group is then the same number unless GROUP says otherwise, home ``/``).

        :raises InvalidRequest: an unknown name, or an empty part.
        """
        user, sep, group = spec.partition(":")
        if not user or (sep and not group):
            raise InvalidRequest(f"--user must be USER or USER:GROUP, not {spec!r}")
        try:
            pw = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
        except KeyError:
            if not user.isdigit():
                raise InvalidRequest(f"--user: no user {user!r}") from None
            pw = None
        uid = pw.pw_uid if pw is not None else int(user)
        gid = pw.pw_gid if pw is not None else uid
        if group:
            try:
                gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
            except KeyError:
                raise InvalidRequest(f"--user: no group {group!r}") from None
        name = pw.pw_name if pw is not None else str(uid)
        groups = os.getgrouplist(pw.pw_name, gid) if pw is not None else [gid]
        return cls(uid, gid, sorted(set(groups)), name,
                   pw.pw_dir if pw is not None and pw.pw_dir else "/")


def choose_agent(spec: str | None) -> Agent | None:
    """Who CMD runs as (None: the launcher's own user, nothing to switch).

    ``spec`` given: that user. Else a launcher run as root through ``sudo`` runs CMD as the
    user who typed ``sudo`` (SUDO_UID/SUDO_GID): the agent gets what that user would get, and
    root is only for the mounts and the namespace. ``--user root`` keeps root.

    :raises InvalidRequest: an unknown user or group.
    :raises LaunchError: another user asked for by a launcher that is not root.
    """
    if spec is None:
        sudo_uid, sudo_gid = os.environ.get("SUDO_UID", ""), os.environ.get("SUDO_GID", "")
        if not (_privileged() and sudo_uid.isdigit() and sudo_uid != "0"):
            return None
        spec = sudo_uid + (f":{sudo_gid}" if sudo_gid.isdigit() else "")
    agent = Agent.parse(spec)
    if agent.uid == os.geteuid() and agent.gid == os.getegid():
        return None
    if not _privileged():
        raise LaunchError(f"--user {spec} needs root (the launcher runs as uid {os.geteuid()})")
    return agent


#: What CMD's environment keeps from the launcher's when it runs as another user (besides
#: the ``MEMFS_*`` variables it is given); HOME, USER and LOGNAME are the agent's.
KEPT_ENV = ("PATH", "TERM")
#: The launcher's credentials, never passed to CMD: it gets its session's token and URL
#: instead (:meth:`Launcher._agent_credentials`); the key of an embeddings service is the
#: mounts' (which index by meaning), not the agent's.
LAUNCHER_ONLY_ENV = frozenset({"MEMFS_DB", "MEMFS_URL", "MEMFS_API_KEY", "MEMFS_API_KEYS",
                               "MEMFS_EMBEDDINGS_API_KEY"})


def agent_env(env: dict[str, str], agent: Agent) -> dict[str, str]:
    """The clean environment of CMD run as ``agent``."""
    clean = {k: v for k, v in env.items() if k.startswith("MEMFS_") or k in KEPT_ENV}
    clean.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    clean.update(HOME=agent.home, USER=agent.name, LOGNAME=agent.name)
    return clean


def _readable_by(path: str, agent: Agent) -> bool:
    """Could ``agent`` open ``path`` for reading, judging by the modes and owners of the file
    and of every directory above it (ACLs and capabilities aside)?"""
    return _allowed(path, agent, 4)


def _replaceable_at(path: str, agent: Agent) -> str | None:
    """The directory in which ``agent`` could rename ``path``, or a directory above it, away
    and put another in its place (one it may write, not sticky, or sticky and the entry or
    the directory its own), or None."""
    child = path
    try:
        while child != "/":
            parent = os.path.dirname(child)
            st_parent, st_child = os.stat(parent), os.stat(child)
            sticky = st_parent.st_mode & stat.S_ISVTX
            if _allowed(parent, agent, 3) and (
                    not sticky or agent.uid in (st_child.st_uid, st_parent.st_uid)):
                return parent
            child = parent
    except OSError:
        return None
    return None


def _allowed(path: str, agent: Agent, bits: int) -> bool:
    """Do the modes and owners of ``path`` grant ``agent`` ``bits`` (4 read, 2 write, 1
    search), and those of every directory above it search?"""
    def allows(st: os.stat_result, bits: int) -> bool:
        if st.st_uid == agent.uid:
            return st.st_mode & (bits << 6) == bits << 6
        if st.st_gid in agent.groups or st.st_gid == agent.gid:
            return st.st_mode & (bits << 3) == bits << 3
        return st.st_mode & bits == bits

    try:
        if not allows(os.stat(path), bits):
            return False
        parent = os.path.dirname(path)
        while True:
            if not allows(os.stat(parent), 1):
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def _command_line() -> list[str]:
    """This process's command line as anyone may read it (``ps``, /proc/PID/cmdline)."""
    try:
        raw = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        return list(sys.argv)
    return [a.decode(errors="replace") for a in raw.split(b"\0")]


def _refuse_a_secret_on_the_command_line(launch: Launch, agent: Agent) -> None:
    """A server key, or a PostgreSQL password, on the launcher's command line is visible to
    every user of the machine, the agent's included (``ps``): with ``--user`` that hands the
    agent what the session was to keep from it.

    :raises LaunchError: with where to put it instead (the secret is not repeated).
    """
    words = _command_line()
    secrets = []  # (what, the word that carries it, where to put it instead)
    if launch.url and launch.api_key:
        secrets.append(("the server key (--api-key)", launch.api_key,
                        "pass it in $MEMFS_API_KEY instead"))
    db = launch.db_path or ""
    if is_url(db) and urllib.parse.urlsplit(db).password:
        secrets.append(("the database password (in --db)", db,
                        "pass the URL in $MEMFS_DB, or the password in $PGPASSWORD or "
                        "~/.pgpass, instead"))
    for what, secret, fix in secrets:
        if any(w == secret or w.endswith("=" + secret) for w in words):
            raise LaunchError(
                f"{what} is on memfs's command line, where --user {agent.name} can read it "
                f"(ps, /proc/{os.getpid()}/cmdline): {fix}")


def _privileged() -> bool:
    return os.geteuid() == 0


def _enter_private_namespace(root: str, agent: Agent | None = None) -> None:
    """Move this process into a private mount namespace with a tmpfs on ``root`` (the
    agent's only, mode 0700, when CMD runs as another user).

    Mount propagation is made private first, so nothing mounted here (tmpfs, FUSE) shows up
    in the parent namespace, and everything disappears when the last process in it exits.
    """
    try:
        linux.unshare_mounts()
    except OSError as e:
        raise LaunchError(f"cannot create a private mount namespace: {e.strerror}") from None
    try:
        linux.make_mounts_private()
    except OSError as e:
        raise LaunchError(f"cannot make mounts private: {e.strerror}") from None
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        raise LaunchError(f"cannot create the session root {root}: {e.strerror}") from None
    try:
        linux.mount_tmpfs("memfs-scratch", root, "mode=0755" if agent is None else
                          f"mode=0700,uid={agent.uid},gid={agent.gid}")
    except OSError as e:
        raise LaunchError(f"cannot mount session scratch on {root}: {e.strerror}") from None



def _in_proc_mounts(path: str) -> bool:
    return path in linux.mount_points()


def _unmount(path: str) -> None:
    """Lazily detach ``path`` and everything mounted on it (a dead FUSE mount too)."""
    for _ in range(8):  # stacked mounts come off one at a time
        if not _in_proc_mounts(path):
            return
        if _privileged():
            try:
                linux.detach(path)
            except OSError as e:
                log.warning("cannot unmount %s: %s", path, e.strerror)
                return
        else:
            done = subprocess.run(
                ["fusermount3", "-uz", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            if done.returncode != 0:
                log.warning("cannot unmount %s: %s", path, done.stderr.decode(errors="replace"))
                return


def _daemon_preexec(launcher: int) -> None:
    """In a mount daemon's child before exec: its own session, so our terminal's Ctrl-C
    reaches the launcher (which unmounts in order) rather than the daemons; and SIGTERM when
    the launcher (pid ``launcher``, taken before the fork) dies, so that even a ``kill -9``
    of the launcher unmounts everything. Use ``functools.partial(_daemon_preexec, pid)``."""
    os.setsid()
    linux.die_with_parent(launcher, signal.SIGTERM)


def _command_preexec(launcher: int) -> None:
    """In CMD's child before exec: SIGHUP (as when a terminal goes away) if the launcher
    (pid ``launcher``, taken before the fork) dies, since the session CMD belongs to is then
    over. Runs after :class:`subprocess.Popen` switched to the agent's user/groups (a change
    of user clears the parent-death signal, so it must come after)."""
    linux.die_with_parent(launcher, signal.SIGHUP)


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (scans /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                line = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        rest = line.rpartition(")")[2].split()
        if len(rest) > 1 and int(rest[1]) == pid:
            found.append(int(entry))
    return found


def _reap(pid: int) -> bool:
    """Collect ``pid`` if it has exited; True when it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _describe_status(status: int | None) -> str:
    if status is None:
        return "still running"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


class Launcher:
    """Runs one session: set up, run CMD, always clean up (see the module docstring)."""

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

    # -- set-up ------------------------------------------------------------------------------

    def _choose_root(self) -> None:
        """Decide the isolation mode and the root, and check it; nothing is created but the
        private temporary root of the unprivileged default (removed at the end)."""
        iso = self.launch.isolation
        if iso not in ("auto", "namespace", "none"):
            raise InvalidRequest("isolation must be auto, namespace or none")
        self.namespace = iso == "namespace" or (iso == "auto" and _privileged())
        if self.namespace and not _privileged():
            raise LaunchError("--isolation namespace needs root (use --isolation none)")
        if self.launch.root:
            self.root = os.path.abspath(self.launch.root)
        elif self.namespace:
            self.root = "/mnt/memory"
        else:
            # Unprivileged: a new root of our own, so two sessions never share scratch (and
            # apart from the launcher's state directory, which the agent has no business in).
            self.root = tempfile.mkdtemp(prefix="memfs-root-")
            self._root_created = True
        if self.root == "/":
            raise LaunchError("the session root cannot be /")
        db, real_root = self._db_file(), os.path.realpath(self.root)
        if db and _at_or_below(db, real_root):
            # A tmpfs over it would hide it; a scratch clean-up would delete it.
            raise LaunchError(f"the database {db} is inside the session root {self.root}")
        if not self.namespace and os.path.isdir(self.root) and os.listdir(self.root):
            raise LaunchError(
                f"{self.root} is not empty: without a private namespace the session root "
                "must be an empty or new directory (use --root)"
            )
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise LaunchError(f"the session root {self.root} is not a directory")

    def _refuse_a_readable_database(self) -> None:
        """An agent of another user that could read the database (or its WAL, which holds
        the latest writes) could read every store in it; one that could write it, or rename
        it (or a directory above it) away and put another in its place, could change every
        store: the session is refused.

        :raises LaunchError: with the fix.
        """
        db = self._db_file()
        if self.agent is None or not db:
            return
        name, directory = self.agent.name, os.path.dirname(db)
        files = [p for p in (db, db + "-wal", db + "-shm") if os.path.exists(p)]
        readable = [p for p in files if _readable_by(p, self.agent)]
        if readable:
            raise LaunchError(
                f"--user {name} could read the database {db}, and every store in "
                f"it: make it its owner's only (chmod 600 {' '.join(readable)}) or move it "
                f"into a directory {name} cannot enter (chmod 700 {directory})")
        writable = [p for p in files if _allowed(p, self.agent, 2)]
        at = None if writable else _replaceable_at(db, self.agent)
        if writable or at is not None:
            fix = (f"chmod 600 {' '.join(writable)}" if writable else
                   f"chmod 755 {at}, or move it into a directory only its owner may write")
            raise LaunchError(
                f"--user {name} could change the database {db}, and every store in it: "
                f"{fix}")

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

    def _agent_credentials(self) -> dict[str, str]:
        """What CMD gets to reach the API: the session's own token (never a server key, nor
        the database), with the server's URL, or on a local database the URL of the session
        API this launcher serves (:mod:`memfs.launcher.sessionapi`). Called once the session
        runs."""
        assert self.session is not None
        url = self.launch.url or self.api.url
        token = self.store.create_session_token(self.session.id,
                                                ttl_seconds=self.launch.token_ttl)
        return {"MEMFS_URL": url, "MEMFS_API_KEY": token.token}

    def _start_api(self) -> None:
        """On a local database: the session API's socket (:mod:`memfs.launcher.sessionapi`), in the
        state directory; it is served once CMD runs."""
        assert self.state_dir is not None and self.session is not None
        if self.launch.url:
            return
        from .sessionapi import SessionAPI

        path = self.state_dir / "api.sock"
        if len(os.fsencode(path)) > SOCKET_PATH_MAX:
            # A long $TMPDIR: a short directory of our own for it (sun_path holds 108 bytes).
            self._api_dir = Path(tempfile.mkdtemp(prefix="memfs-api-", dir="/tmp"))
            if self.agent is not None:
                self._api_dir.chmod(0o711)
            path = self._api_dir / "api.sock"
        owner = (self.agent.uid, self.agent.gid) if self.agent is not None else None
        self.api = SessionAPI(self.store, path, owner, session_id=self.session.id)
        try:
            self.api.listen()
        except MemfsError as e:
            self._fail(e.message)

    def _resources(self) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = []
        by_id: dict[str, dict[str, Any]] = {}
        for a in self.launch.attachments:
            store = a.resolve(self.store)
            if a.at is not None:
                # Resolved once, here: "now" stays the time the session started, and a bad AT
                # fails before anything is created.
                snap = self.store.snapshot(store.id, a.at)
                self.snapshots[store.id] = snap.at
                self.snapshot_notes[SNAPSHOT_KEY + store.id] = snapshot_note(snap)
                warning = snap.pruned_warning()
                if warning:
                    print(f"memfs: warning: {store.name}@{a.at}: {warning}", file=sys.stderr,
                          flush=True)
            res: dict[str, Any] = {
                "type": "memory_store", "memory_store_id": store.id, "access": a.access,
            }
            if a.instructions is not None:
                res["instructions"] = a.instructions
            resources.append(res)
            by_id.setdefault(store.id, res)
        for ref, text in self.launch.instructions:
            store = self.store.resolve_store(ref)
            if store.id not in by_id:
                raise InvalidRequest(f"--instructions names {ref!r}, which no --store attaches")
            by_id[store.id]["instructions"] = text
        return resources

    def _create_session(self) -> Session:
        cmd = self.launch.command
        # Only a local session records its launcher: a server's sessions outlive this host.
        owner: dict[str, Any] = {}
        if not self.launch.url:
            launcher = _process_identity(os.getpid())
            if self._root_created and not self.namespace:
                launcher["scratch"] = self.root  # ours to delete if we die (reap_sessions)
            owner["launcher"] = launcher
        return self.store.create_session(
            self._resources(),
            root=self.root,
            agent={"type": "agent", "id": "local", "name": os.path.basename(cmd[0])},
            environment_id="local",
            title=" ".join(cmd)[:200] if self.launch.title is None else self.launch.title,
            metadata={**(self.launch.metadata or {}), **self.snapshot_notes} or None,
            status="idle",
            **owner,
        )

    def _make_scratch(self) -> None:
        if self.namespace:
            _enter_private_namespace(self.root, self.agent)
        else:
            try:
                if not os.path.exists(self.root):
                    self._root_created = True
                os.makedirs(self.root, exist_ok=True)
            except OSError as e:
                raise LaunchError(
                    f"cannot create the session root {self.root}: {e.strerror}"
                ) from None
            if self.agent is not None:
                # The agent's only (its owner is put back at the end if it was not ours).
                if not self._root_created:
                    self._root_stat = os.stat(self.root)
                os.chown(self.root, self.agent.uid, self.agent.gid)
                os.chmod(self.root, 0o700)
        self._scratch_made = True

    def _start_mounts(self) -> None:
        if self.namespace:
            self._start_session_daemon()
            return
        assert self.session is not None and self.state_dir is not None
        exe = [sys.executable, "-m", "memfs"]
        env = self._memfs_env(dict(os.environ))
        for res in self.session.resources:
            os.makedirs(res.mount_path, exist_ok=True)
            events = self.state_dir / f"{res.memory_store_id}.events.jsonl"
            logf = self.state_dir / f"{res.memory_store_id}.log"
            args = [
                *exe, "mount", res.memory_store_id, res.mount_path,
                "--session", self.session.id, "--events", str(events),
            ]
            if res.access == "read_only" and not self.launch.url:
                # A remote mount learns the access from the server and refuses writes itself.
                args.append("--read-only")
            if res.memory_store_id in self.snapshots:
                args += ["--at", self.snapshots[res.memory_store_id]]
            if self.agent is not None:
                # Everything shows as the agent's, 0600/0700; the kernel lets the agent in
                # (allow_other) and checks those modes (default_permissions): nobody else
                # but root gets in.
                args += ["--owner", f"{self.agent.uid}:{self.agent.gid}", "--allow-other"]
            # The agent (when it is another user) may enter the state directory to read its
            # prompt file, never the event logs or the daemons' logs.
            os.close(os.open(events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            with open(os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as lf:
                proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                    env=env, preexec_fn=functools.partial(_daemon_preexec, os.getpid()),
                )
            self.mounts.append(_Mount(res, proc, events, logf))
            log.info("mounting %s (%s) on %s, pid %d", res.name, res.memory_store_id,
                     res.mount_path, proc.pid)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        pending = list(self.mounts)
        while pending:
            if self._stop_signal is not None:
                return
            for m in list(pending):
                if os.path.ismount(m.resource.mount_path):
                    pending.remove(m)
                elif m.proc.poll() is not None:
                    self._reported.add(m.proc.pid)
                    # The daemon's own line repeats the mount point: keep only its reason.
                    reason = self._last_log_line(m).removeprefix(
                        f"cannot mount on {m.resource.mount_path}: ")
                    self._fail(
                        f"cannot mount {m.resource.name!r} at {m.resource.mount_path}: {reason}"
                    )
            if pending and time.monotonic() > deadline:
                self._fail(
                    f"{pending[0].resource.mount_path} was not mounted within "
                    f"{MOUNT_TIMEOUT:.0f} s"
                )
            if pending:
                time.sleep(0.01)

    def _start_session_daemon(self) -> None:
        """In the private namespace: ONE daemon (:mod:`memfs.sessionfs`) serves every store,
        as the directories of one FUSE filesystem mounted on a hidden directory of the state
        directory; each ``<hidden>/<slug>`` is bind-mounted onto its mount path, then the
        hidden mount is detached, so the agent sees each store at its path and nothing else.
        (Without a namespace, binds would be the host's to clean up after a ``kill -9``: there
        each store keeps its own daemon.)"""
        assert self.session is not None and self.state_dir is not None
        hidden = self.state_dir / "fuse"
        hidden.mkdir(mode=0o700)
        args = [sys.executable, "-m", "memfs.sessionfs", "mount", str(hidden),
                "--session", self.session.id, "--events-dir", str(self.state_dir)]
        events = {}
        for res in self.session.resources:
            os.makedirs(res.mount_path, exist_ok=True)
            events[res.memory_store_id] = ev = (
                self.state_dir / f"{res.memory_store_id}.events.jsonl")
            os.close(os.open(ev, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            # Read-only is the daemon's to enforce, remote too (the server would refuse
            # anyway): the refused call must reach the event log.
            args += ["--store", res.memory_store_id, res.access, res.mount_path]
            if res.memory_store_id in self.snapshots:
                args += ["--at", res.memory_store_id, self.snapshots[res.memory_store_id]]
        if self.agent is not None:
            args += ["--owner", f"{self.agent.uid}:{self.agent.gid}", "--allow-other"]
        logf = self.state_dir / "session.log"
        with open(os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as lf:
            proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                env=self._memfs_env(dict(os.environ)),
                preexec_fn=functools.partial(_daemon_preexec, os.getpid()),
            )
        for res in self.session.resources:
            self.mounts.append(_Mount(res, proc, events[res.memory_store_id], logf))
        first = self.mounts[0]
        log.info("mounting %d stores, pid %d", len(self.mounts), proc.pid)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(hidden):
            if self._stop_signal is not None:
                return
            if proc.poll() is not None:
                self._reported.add(proc.pid)
                reason = self._last_log_line(first).removeprefix(f"cannot mount on {hidden}: ")
                self._fail(f"cannot mount {first.resource.name!r} at "
                           f"{first.resource.mount_path}: {reason}")
            if time.monotonic() > deadline:
                self._fail(f"{first.resource.mount_path} was not mounted within "
                           f"{MOUNT_TIMEOUT:.0f} s")
            time.sleep(0.005)
        try:
            for m in self.mounts:
                path = m.resource.mount_path
                try:
                    linux.bind_mount(str(hidden / os.path.basename(path)), path)
                except OSError as e:
                    self._fail(f"cannot mount {m.resource.name!r} at {path}: {e.strerror}")
        finally:
            try:
                linux.detach(str(hidden))
            except OSError as e:
                log.warning("cannot detach %s: %s", hidden, e.strerror)

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
            self.store.add_events(self.session.id, [{
                "type": "session.error",
                "error": {"type": "unknown_error", "message": message,
                          "retry_status": "terminal"},
            }])
        except MemfsError as e:
            log.error("cannot record the session error: %s", e)

    # -- running -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stop_signal = signum
        if signum != signal.SIGINT and self._kill_at is None:
            self._kill_at = time.monotonic() + KILL_GRACE
        child = self._child
        if child is None:
            self._unforwarded = signum
            return
        if signum == signal.SIGINT and self._terminal_sent_it():
            return  # CMD is in our foreground process group: it got this Ctrl-C already
        self._send(signum)

    def _terminal_sent_it(self) -> bool:
        try:
            fd = sys.stdin.fileno()
            return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            return False

    def _send(self, signum: int) -> None:
        child = self._child
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    def _run_command(self) -> int:
        assert self.session is not None and self.state_dir is not None
        prompt_file = self.state_dir / "system-prompt.md"
        prompt_file.write_text(render_memory_prompt(self.session), encoding="utf-8")
        # No credential of the launcher's reaches CMD: not the database, not a server key.
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ONLY_ENV}
        env["MEMFS_SESSION_ID"] = self.session.id
        env["MEMFS_SYSTEM_PROMPT_FILE"] = str(prompt_file)
        agent = self.agent
        as_agent: dict[str, Any] = {}
        if agent is not None:
            env = agent_env(env, agent)
            os.chown(prompt_file, agent.uid, agent.gid)
            prompt_file.chmod(0o400)
            self.state_dir.chmod(0o711)  # the prompt file by its name, nothing else
            as_agent = {"user": agent.uid, "group": agent.gid, "extra_groups": agent.groups}
        self.store.set_session_status(self.session.id, "running")
        try:
            env.update(self._agent_credentials())
        except MemfsError as e:
            self._fail(f"cannot give the session its credential: {e.message}")
        try:
            self._child = subprocess.Popen(
                list(self.launch.command), env=env,
                preexec_fn=functools.partial(_command_preexec, os.getpid()), **as_agent,
            )
        except FileNotFoundError:
            raise LaunchError(f"{self.launch.command[0]}: command not found", 127) from None
        except OSError as e:
            raise LaunchError(
                f"cannot run {self.launch.command[0]}: {e.strerror}",
                126 if e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 1,
            ) from None
        if self.api is not None:
            self.api.serve()
        if self._unforwarded is not None:  # a signal came while CMD was being started
            self._send(self._unforwarded)
            self._unforwarded = None
        dead: _Mount | None = None
        while True:
            try:
                status = self._child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if dead is None:
                dead = next((m for m in self.mounts if m.proc.poll() is not None), None)
                if dead is not None:
                    log.info("the mount daemon of %s died; stopping the command",
                             dead.resource.mount_path)
                    self._reported.add(dead.proc.pid)
                    self._send(signal.SIGTERM)
                    self._kill_at = time.monotonic() + KILL_GRACE
            if self._kill_at is not None and time.monotonic() > self._kill_at:
                log.warning("the command did not stop within %.0f s; killing it", KILL_GRACE)
                self._send(signal.SIGKILL)
                self._kill_at = None
        if dead is not None:
            self._fail(
                f"the mount of {dead.resource.name!r} at {dead.resource.mount_path} died "
                f"({_describe_status(dead.proc.returncode)}); the command was stopped"
            )
        return 128 - status if status < 0 else status

    # -- clean-up ----------------------------------------------------------------------------

    def _stop_command(self) -> None:
        """CMD itself, if set-up failed while it ran (it normally has exited already)."""
        child = self._child
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _stop_api(self) -> None:
        """The session API (local database): nobody of the session is left to use it."""
        if self.api is not None:
            self.api.stop()
        if self._api_dir is not None:
            shutil.rmtree(self._api_dir, ignore_errors=True)

    def _stop_leftovers(self) -> None:
        """Stop what CMD left running (orphans are reparented to us, the subreaper): SIGTERM,
        then SIGKILL after :data:`LEFTOVER_GRACE` seconds; reap them all."""
        ours = {m.proc.pid for m in self.mounts}
        if self._child is not None:
            ours.add(self._child.pid)
        deadline = time.monotonic() + LEFTOVER_GRACE
        give_up = deadline + 3 * LEFTOVER_GRACE
        signalled: set[int] = set()
        while True:
            left = [p for p in _children(os.getpid()) if p not in ours and not _reap(p)]
            if not left:
                return
            if time.monotonic() > give_up:
                log.error("pids %s, left behind by the command, do not die", left)
                return
            late = time.monotonic() > deadline
            for pid in left:
                if pid not in signalled or late:
                    log.info("stopping pid %d, left behind by the command", pid)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                    signalled.add(pid)
            if late:
                deadline = time.monotonic() + LEFTOVER_GRACE
            time.sleep(0.02)

    def _barrier(self, m: _Mount) -> None:
        """Make the daemon answer one request (statfs, never cached by the kernel) before it
        is stopped: the releases the kernel queued when CMD's files were closed come before
        it, so their tool events are recorded instead of dropped with the queue. Runs in a
        thread: a stuck daemon must not hang the clean-up."""
        def statfs() -> None:
            with contextlib.suppress(OSError):
                os.statvfs(m.resource.mount_path)

        t = threading.Thread(target=statfs, daemon=True)
        t.start()
        t.join(BARRIER_TIMEOUT)

    def _stop_mounts(self) -> None:
        for m in self.mounts:
            if m.proc.poll() is None:
                self._barrier(m)
        signalled: set[int] = set()  # one daemon may serve several mounts (sessionfs)
        for m in self.mounts:
            if m.proc.poll() is None and m.proc.pid not in signalled:
                m.proc.send_signal(signal.SIGTERM)
                signalled.add(m.proc.pid)
        deadline = time.monotonic() + STOP_TIMEOUT
        for m in self.mounts:
            try:
                m.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("mount daemon %d did not stop; killing it", m.proc.pid)
                m.proc.kill()
                m.proc.wait()
            if m.proc.returncode not in (0, -signal.SIGTERM) and m.proc.pid not in self._reported:
                self._reported.add(m.proc.pid)
                log.warning("the mount daemon of %s %s: %s", m.resource.mount_path,
                            _describe_status(m.proc.returncode), self._last_log_line(m))
            _unmount(m.resource.mount_path)

    def _discard_scratch(self) -> None:
        """Unmount the scratch tmpfs, or delete what the session wrote in its root directory
        (the directory too if we made it). A root that never became scratch is not touched."""
        if not (self._scratch_made or self._root_created):
            return  # set-up stopped before the root was ours: leave it exactly as it was
        if self.namespace:
            # The tmpfs goes away with the namespace when we exit; detach it now all the same.
            # The directory under it stays: another session may have its own tmpfs on it.
            _unmount(self.root)
        elif os.path.isdir(self.root):
            points = linux.mount_points()
            below = [p for p in points if _at_or_below(p, self.root)]
            if below:
                log.error("not deleting %s: %s is still mounted", self.root, below[0])
            elif self._root_created:
                shutil.rmtree(self.root, ignore_errors=True)
            else:
                for entry in os.listdir(self.root):
                    path = os.path.join(self.root, entry)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
                if self._root_stat is not None:  # lent to the agent: give it back
                    os.chown(self.root, self._root_stat.st_uid, self._root_stat.st_gid)
                    os.chmod(self.root, self._root_stat.st_mode & 0o7777)

    def _cleanup(self) -> None:
        """Every step runs even if an earlier one fails."""
        steps = (self._stop_command, self._stop_leftovers, self._stop_api, self._stop_mounts,
                 self._discard_scratch)
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("clean-up step %s failed", step.__name__)
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if self.session is not None:
            try:
                self.store.set_session_status(self.session.id, "terminated")
            except MemfsError as e:
                log.error("cannot mark session %s terminated: %s", self.session.id, e)

    def run(self) -> int:
        """Run the whole session; returns the exit status for ``memfs run``.

        :raises LaunchError: the session could not be set up, CMD could not be started, or a
            mount died (``status`` is the exit status to use).
        :raises MemfsError: the store refused the attachments (nothing was set up).
        """
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.signal(s, self._on_signal) for s in handled}
        # Orphans of CMD come to us, so that none outlives the session (see _stop_leftovers).
        try:
            linux.set_child_subreaper()
        except OSError as e:
            log.warning("cannot become the subreaper of the command: %s", e.strerror)
        try:
            if isinstance(self.store, Store):  # a server reaps its own sessions
                reap_sessions(self.store)
            self._choose_root()
            self._refuse_a_readable_database()
            self.session = self._create_session()
            log.info("session %s, root %s (%s)", self.session.id, self.root,
                     "private namespace" if self.namespace else "scratch directory")
            self._make_scratch()
            # After the scratch, so that a root over $TMPDIR (--root /tmp) cannot hide it.
            self.state_dir = _state_dir(self.session.id)
            self.state_dir.mkdir(mode=0o700)  # never an existing path (or a planted link)
            self._start_api()
            self._start_mounts()
            if self._stop_signal is not None:
                return 128 + self._stop_signal
            return self._run_command()
        finally:
            try:
                self._cleanup()
            finally:
                self.store.close()
                for s, h in previous.items():
                    signal.signal(s, h)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            line = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces and parentheses.
    return int(line.rpartition(")")[2].split()[19])


def _process_identity(pid: int) -> dict[str, Any]:
    """What tells this process apart from any other, even after its pid is reused."""
    return {"host": socket.gethostname(), "boot_id": _boot_id(), "pid": pid,
            "start": _start_ticks(pid)}


def _gone(owner: dict[str, Any]) -> bool:
    """Is the process ``owner`` (a :func:`_process_identity`) known to have ended? A process
    of another host is never known to have ended."""
    if owner.get("host") != socket.gethostname():
        return False
    if owner.get("boot_id") != _boot_id():
        return True  # this host rebooted since
    pid = owner.get("pid")
    return not isinstance(pid, int) or _start_ticks(pid) != owner.get("start")


def _at_or_below(path: str, top: str) -> bool:
    """Is ``path`` the directory ``top`` or inside it (by path, not by prefix string)?"""
    return path == top or path.startswith(top.rstrip("/") + "/")


def _state_dir(session_id: str) -> Path:
    """Where a session's launcher keeps its prompt file and the mounts' logs."""
    return Path(tempfile.gettempdir()) / f"memfs-session-{session_id}"


def _remove_left_behind(session_id: str, owner: dict[str, Any]) -> None:
    """Delete the state directory and the private scratch root of a dead launcher, unless
    something is still mounted below them."""
    points = linux.mount_points()
    for path in (str(_state_dir(session_id)), owner.get("scratch")):
        if not isinstance(path, str) or not os.path.isdir(path) or os.path.islink(path):
            continue
        if any(_at_or_below(p, path) for p in points):
            log.warning("not deleting %s: something is still mounted below it", path)
            continue
        shutil.rmtree(path, ignore_errors=True)


def reap_sessions(store: Store) -> list[str]:
    """End the sessions whose local launcher died without ending them (``kill -9``, a crash,
    a reboot): each gets a ``session.error`` event and the ``terminated`` status, and what the
    launcher would have deleted (its state directory, a private scratch root it made) is
    deleted. Its mounts went with the launcher already (each daemon gets SIGTERM when its
    launcher dies).

    :returns: the ids of the sessions ended.
    """
    ended = []
    for sid, owner in store.launched_sessions():
        if not _gone(owner):
            continue
        message = f"the launcher of this session (pid {owner.get('pid')}) ended without it"
        try:
            store.add_events(sid, [{
                "type": "session.error",
                "error": {"type": "unknown_error", "message": message,
                          "retry_status": "terminal"},
            }])
            store.set_session_status(sid, "terminated")
        except MemfsError as e:  # deleted meanwhile, say: nothing to end
            log.info("could not end session %s: %s", sid, e)
            continue
        log.warning("ended session %s: %s", sid, message)
        _remove_left_behind(sid, owner)
        ended.append(sid)
    return ended


def run(launch: Launch) -> int:
    """Run a session (see :class:`Launcher`); returns CMD's exit status.

    :raises LaunchError, MemfsError: see :meth:`Launcher.run`.
    """
    return Launcher(launch).run()
