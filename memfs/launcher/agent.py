"""The agent: the user CMD runs as (``--user``, or the user behind ``sudo``), its clean
environment, and the checks that it gets nothing of the launcher's (no credential in its
environment, no secret on the launcher's command line, no way into the database file)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ..backends import is_url
from ..errors import InvalidRequest
from .plan import Launch, LaunchError


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
        if not (privileged() and sudo_uid.isdigit() and sudo_uid != "0"):
            return None
        spec = sudo_uid + (f":{sudo_gid}" if sudo_gid.isdigit() else "")
    agent = Agent.parse(spec)
    if agent.uid == os.geteuid() and agent.gid == os.getegid():
        return None
    if not privileged():
        raise LaunchError(f"--user {spec} needs root (the launcher runs as uid {os.geteuid()})")
    return agent


#: What CMD's environment keeps from the launcher's when it runs as another user (besides
#: the ``MEMFS_*`` variables it is given); HOME, USER and LOGNAME are the agent's.
KEPT_ENV = ("PATH", "TERM")
#: The launcher's credentials, never passed to CMD: it gets its session's token and URL
#: instead (:func:`.credential.agent_credentials`); the key of an embeddings service is the
#: mounts' (which index by meaning), not the agent's.
LAUNCHER_ONLY_ENV = frozenset({"MEMFS_DB", "MEMFS_URL", "MEMFS_API_KEY", "MEMFS_API_KEYS",
                               "MEMFS_EMBEDDINGS_API_KEY"})


def agent_env(env: dict[str, str], agent: Agent) -> dict[str, str]:
    """The clean environment of CMD run as ``agent``."""
    clean = {k: v for k, v in env.items() if k.startswith("MEMFS_") or k in KEPT_ENV}
    clean.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    clean.update(HOME=agent.home, USER=agent.name, LOGNAME=agent.name)
    return clean


def readable_by(path: str, agent: Agent) -> bool:
    """Could ``agent`` open ``path`` for reading, judging by the modes and owners of the file
    and of every directory above it (ACLs and capabilities aside)?"""
    return allowed(path, agent, 4)


def replaceable_at(path: str, agent: Agent) -> str | None:
    """The directory in which ``agent`` could rename ``path``, or a directory above it, away
    and put another in its place (one it may write, not sticky, or sticky and the entry or
    the directory its own), or None."""
    child = path
    try:
        while child != "/":
            parent = os.path.dirname(child)
            st_parent, st_child = os.stat(parent), os.stat(child)
            sticky = st_parent.st_mode & stat.S_ISVTX
            if allowed(parent, agent, 3) and (
                    not sticky or agent.uid in (st_child.st_uid, st_parent.st_uid)):
                return parent
            child = parent
    except OSError:
        return None
    return None


def allowed(path: str, agent: Agent, bits: int) -> bool:
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


def refuse_a_secret_on_the_command_line(launch: Launch, agent: Agent) -> None:
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


def privileged() -> bool:
    return os.geteuid() == 0
