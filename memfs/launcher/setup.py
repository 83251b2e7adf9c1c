"""Setting a session up: the isolation and the root, the refusal of a database the agent could
read or change, the session itself (its stores resolved, snapshots included), and the root
made scratch."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidRequest
from ..models import Session
from .agent import _allowed, _privileged, _readable_by, _replaceable_at
from .base import LauncherBase
from .plan import LaunchError
from .procs import _process_identity, _session_agents
from .prompt import SNAPSHOT_KEY, snapshot_note
from .sandbox import _at_or_below, _enter_private_namespace

#: The longest default title of a session (its command line), in characters.
TITLE_MAX = 200


def session_title(cmd: Sequence[str]) -> str:
    """A session's default title: its command line, cut at the last word that fits in
    :data:`TITLE_MAX` characters with an ellipsis (a word longer than that is cut)."""
    line = " ".join(cmd)
    if len(line) <= TITLE_MAX:
        return line
    head = line[: TITLE_MAX - 2]  # room for " …"
    if line[TITLE_MAX - 2] != " ":  # a word cut short: it goes
        head = head[: head.rindex(" ")] if " " in head else ""
    if head.strip():
        return head.rstrip() + " …"
    return line[: TITLE_MAX - 1] + "…"


class Setup(LauncherBase):
    """The steps before any mount: root, session, scratch."""

    def _choose_root(self) -> None:
        """Decide the isolation mode and the root, and check it; nothing is created but the
        private temporary root of the unprivileged default (removed at the end)."""
        iso = self.launch.isolation
        if iso not in ("auto", "namespace", "none"):
            raise InvalidRequest("isolation must be auto, namespace or none")
        self.namespace = iso == "namespace" or (iso == "auto" and _privileged())
        if self.namespace and not _privileged():
            raise LaunchError("--isolation namespace needs root (use --isolation none)")
        if self.launch.network not in ("host", "none"):
            raise InvalidRequest("network must be host or none")
        if self.launch.network == "none" and not self.namespace:
            raise LaunchError("--network none needs the private namespace (root, and not "
                              "--isolation none)")
        if self.launch.network == "none" and self.launch.url:
            # The mounts would work (their daemons are ours), but the agent's MEMFS_URL would
            # name a server it cannot reach: its token, and memfs inside, would be dead.
            raise LaunchError("--network none leaves the agent no way to the server of --url "
                              "(only a local database's session API is a unix socket)")
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

    def _refuse_a_neighbour_of_the_same_user(self) -> None:
        """Two agents of one user, one of them in the host's PID namespace, could read each
        other's environment (the session token) through ``/proc``, and walk into each other's
        mounts through ``/proc/PID/root``. In the private namespace the agent gets a PID
        namespace of its own (:mod:`.pidinit`), so only an agent left in ours is a danger;
        without it, ours would be one, beside any other. A root agent reaches everything
        anyway.

        Without root there are no namespaces to be had: the session is refused. As root the
        choice of ``--isolation none`` was made on purpose (a container runtime as CMD, say,
        which isolates the agent itself) or the danger is the other session's: a warning.

        :raises LaunchError: naming the other session, and the ways out.
        """
        uid = self.agent.uid if self.agent is not None else os.geteuid()
        if uid == 0:
            return
        found = [(pid, sid) for pid, sid, in_ours in _session_agents(uid)
                 if in_ours or not self.namespace]
        if not found:
            return
        pid, sid = found[0]
        other = f"another session's agent runs as uid {uid} (session {sid}, pid {pid})"
        if not _privileged():
            raise LaunchError(
                f"{other}: without namespaces (memfs runs without root) each could read the "
                "other's session token in /proc; run memfs as root (each agent then has a "
                "PID namespace of its own), or end that session first")
        whose = "that agent can read this one's" if self.namespace else "each can read the other's"
        print(f"memfs: warning: {other} in the host's PID namespace: {whose} session token "
              "in /proc, unless the command boxes its agent itself (a container runtime)",
              file=sys.stderr, flush=True)

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

    def _resources(self) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = []
        by_id: dict[str, dict[str, Any]] = {}
        for a in self.launch.attachments:
            store = a.resolve(self.store)
            if a.at is not None:
                # Resolved once, here: "now" stays the time the session started, and a bad AT
                # fails before anything is created.
                snap = self.store.versions.snapshot(store.id, a.at)
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
            store = self.store.stores.resolve(ref)
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
        return self.store.sessions.create(
            self._resources(),
            root=self.root,
            agent={"type": "agent", "id": "local", "name": os.path.basename(cmd[0])},
            environment_id="local",
            title=session_title(cmd) if self.launch.title is None else self.launch.title,
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
