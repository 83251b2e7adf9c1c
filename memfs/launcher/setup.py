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
from . import resume
from .agent import allowed, privileged, readable_by, replaceable_at
from .plan import LaunchError
from .procs import process_identity, session_agents
from .prompt import SNAPSHOT_KEY, snapshot_note
from .sandbox import at_or_below, enter_private_namespace
from .state import LaunchState, db_file

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


def choose_root(st: LaunchState) -> None:
    """Decide the isolation mode and the root, and check it; nothing is created but the
    private temporary root of the unprivileged default (removed at the end)."""
    iso = st.launch.isolation
    if iso not in ("auto", "namespace", "none"):
        raise InvalidRequest("isolation must be auto, namespace or none")
    st.namespace = iso == "namespace" or (iso == "auto" and privileged())
    if st.namespace and not privileged():
        raise LaunchError("--isolation namespace needs root (use --isolation none)")
    if st.launch.network not in ("host", "none"):
        raise InvalidRequest("network must be host or none")
    if st.launch.network == "none" and not st.namespace:
        raise LaunchError("--network none needs the private namespace (root, and not "
                          "--isolation none)")
    if st.launch.network == "none" and st.launch.url:
        # The mounts would work (their daemons are ours), but the agent's MEMFS_URL would
        # name a server it cannot reach: its token, and memfs inside, would be dead.
        raise LaunchError("--network none leaves the agent no way to the server of --url "
                          "(only a local database's session API is a unix socket)")
    if st.launch.root:
        st.root = os.path.abspath(st.launch.root)
    elif st.namespace:
        st.root = "/mnt/memory"
    else:
        # Unprivileged: a new root of our own, so two sessions never share scratch (and
        # apart from the launcher's state directory, which the agent has no business in).
        st.root = tempfile.mkdtemp(prefix="memfs-root-")
        st.root_created = True
    if st.root == "/":
        raise LaunchError("the session root cannot be /")
    db, real_root = db_file(st), os.path.realpath(st.root)
    if db and at_or_below(db, real_root):
        # A tmpfs over it would hide it; a scratch clean-up would delete it.
        raise LaunchError(f"the database {db} is inside the session root {st.root}")
    if not st.namespace and os.path.isdir(st.root) and os.listdir(st.root):
        raise LaunchError(
            f"{st.root} is not empty: without a private namespace the session root "
            "must be an empty or new directory (use --root)"
        )
    if os.path.exists(st.root) and not os.path.isdir(st.root):
        raise LaunchError(f"the session root {st.root} is not a directory")


def refuse_a_neighbour_of_the_same_user(st: LaunchState) -> None:
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
    uid = st.agent.uid if st.agent is not None else os.geteuid()
    if uid == 0:
        return
    found = [(pid, sid) for pid, sid, in_ours in session_agents(uid)
             if in_ours or not st.namespace]
    if not found:
        return
    pid, sid = found[0]
    other = f"another session's agent runs as uid {uid} (session {sid}, pid {pid})"
    if not privileged():
        raise LaunchError(
            f"{other}: without namespaces (memfs runs without root) each could read the "
            "other's session token in /proc; run memfs as root (each agent then has a "
            "PID namespace of its own), or end that session first")
    whose = "that agent can read this one's" if st.namespace else "each can read the other's"
    print(f"memfs: warning: {other} in the host's PID namespace: {whose} session token "
          "in /proc, unless the command boxes its agent itself (a container runtime)",
          file=sys.stderr, flush=True)


def refuse_a_readable_database(st: LaunchState) -> None:
    """An agent of another user that could read the database (or its WAL, which holds
    the latest writes) could read every store in it; one that could write it, or rename
    it (or a directory above it) away and put another in its place, could change every
    store: the session is refused.

    :raises LaunchError: with the fix.
    """
    db = db_file(st)
    if st.agent is None or not db:
        return
    name, directory = st.agent.name, os.path.dirname(db)
    files = [p for p in (db, db + "-wal", db + "-shm") if os.path.exists(p)]
    readable = [p for p in files if readable_by(p, st.agent)]
    if readable:
        raise LaunchError(
            f"--user {name} could read the database {db}, and every store in "
            f"it: make it its owner's only (chmod 600 {' '.join(readable)}) or move it "
            f"into a directory {name} cannot enter (chmod 700 {directory})")
    writable = [p for p in files if allowed(p, st.agent, 2)]
    at = None if writable else replaceable_at(db, st.agent)
    if writable or at is not None:
        fix = (f"chmod 600 {' '.join(writable)}" if writable else
               f"chmod 755 {at}, or move it into a directory only its owner may write")
        raise LaunchError(
            f"--user {name} could change the database {db}, and every store in it: "
            f"{fix}")


def _resources(st: LaunchState) -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for a in st.launch.attachments:
        store = a.resolve(st.store)
        if a.at is not None:
            # Resolved once, here: "now" stays the time the session started, and a bad AT
            # fails before anything is created.
            snap = st.store.versions.snapshot(store.id, a.at)
            st.snapshots[store.id] = snap.at
            st.snapshot_notes[SNAPSHOT_KEY + store.id] = snapshot_note(snap)
            warning = snap.pruned_warning()
            if warning:
                print(f"memfs: warning: {store.name}@{a.at}: {warning}", file=sys.stderr,
                      flush=True)
        res: dict[str, Any] = {
            "type": "memory_store", "memory_store_id": store.id, "access": a.access,
            "memfs_scope": a.scope,
        }
        if a.instructions is not None:
            res["instructions"] = a.instructions
        if a.pinned_budget is not None:
            res["memfs_pinned_budget"] = a.pinned_budget
        resources.append(res)
        by_id.setdefault(store.id, res)
    for ref, text in st.launch.instructions:
        store = st.store.stores.resolve(ref)
        if store.id not in by_id:
            raise InvalidRequest(f"--instructions names {ref!r}, which no --store attaches")
        by_id[store.id]["instructions"] = text
    return resources


def create_session(st: LaunchState) -> Session:
    cmd = st.launch.command
    # Only a local session records its launcher: a server's sessions outlive this host.
    owner: dict[str, Any] = {}
    resumed: dict[str, str] = {}
    where: dict[str, Any] = {}
    if st.launch.resume is not None:  # --resume: the old session's stores, unless others
        old, st.launch.attachments, resumed = resume.prepare(
            st.store, st.launch.resume, st.launch.attachments)
        where = resume.workspace_of(st.store, old.id)
    if not st.launch.url:
        launcher = process_identity(os.getpid())
        if st.root_created and not st.namespace:
            launcher["scratch"] = st.root  # ours to delete if we die (reap_sessions)
        owner["launcher"] = launcher
    return st.store.sessions.create(
        _resources(st),
        root=st.root,
        agent={"type": "agent", "id": "local", "name": os.path.basename(cmd[0])},
        environment_id="local",
        title=session_title(cmd) if st.launch.title is None else st.launch.title,
        metadata={**(st.launch.metadata or {}), **st.snapshot_notes, **resumed} or None,
        status="idle",
        **owner,
        **where,
    )


def make_scratch(st: LaunchState) -> None:
    if st.namespace:
        enter_private_namespace(st.root, st.agent)
    else:
        try:
            if not os.path.exists(st.root):
                st.root_created = True
            os.makedirs(st.root, exist_ok=True)
        except OSError as e:
            raise LaunchError(
                f"cannot create the session root {st.root}: {e.strerror}"
            ) from None
        if st.agent is not None:
            # The agent's only (its owner is put back at the end if it was not ours).
            if not st.root_created:
                st.root_stat = os.stat(st.root)
            os.chown(st.root, st.agent.uid, st.agent.gid)
            os.chmod(st.root, 0o700)
    st.scratch_made = True
