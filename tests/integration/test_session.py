"""``memfs run``: real sessions through the real entry point, in both isolation modes.

Each test starts ``memfs run`` as a subprocess on a database in ``tmp_path`` with ``--root``
under ``tmp_path``; CMD is a ``bash -c`` script that uses plain tools and leaves what it saw in
files under ``$T`` (``tmp_path``, outside the root, so visible from every namespace). The test
then checks the store (sessions, versions, events) and that nothing is left: no mount in this
process's /proc/mounts, no daemon, no scratch.

FUSE missing: skipped locally, failed when CI=true (the ``fuse`` fixture).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.launcher.procs import _start_ticks
from memfs.models import Actor
from memfs.store import Store
from tests.support import need, wait_until
from tests.support.session import (
    ISOLATIONS,
    MEMFS,
    SESSION_DEADLINE,
    Run,
    cmd_pid,
    daemons_of,
    mounts_under,
    needs_root,
    processes_with,
)

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("fuse")]

def assert_ended(
    store: Store, sid: str, root: Path, tmp_path: Path, *, error: bool = False,
    ran: bool = True,
) -> None:
    """The session is over and nothing of it is left."""
    s = store.sessions.get(sid)
    assert s.status == "terminated"
    events = store.events.list(sid, limit=1000).data
    types = [e.type for e in events]
    assert ("session.status_running" in types) == ran
    assert types[-1] == "session.status_terminated"
    assert ("session.error" in types) == error
    assert mounts_under(tmp_path) == []
    assert daemons_of(sid) == []
    assert not (root / "scratch.txt").exists()
    for r in s.resources:
        assert not Path(r.mount_path).exists()


# -- the main scenario ---------------------------------------------------------------------


MAIN_SCRIPT = r"""
R=$ROOT
ls "$R" > "$T/ls-root"
cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/prompt.md"
ls "$R/ref" > "$T/ls-ref"
cat "$R/ref/guide.md" > "$T/cat-ref"
if (echo nope > "$R/ref/new.md") 2> "$T/erofs"; then exit 99; fi
echo "first note" > "$R/notes/n1.md"
mkdir -p "$R/notes-2/sub" && echo "second" > "$R/notes-2/sub/n2.md"
echo scratch > "$R/scratch.txt"
grep " $R/" /proc/self/mounts > "$T/mounts-inside"
touch "$T/ready"
wait_for "$T/go" || exit 98
cat "$R/scratch.txt" > "$T/scratch-inside"
exit 7
"""


def make_stores(store: Store) -> tuple[str, str, str]:
    notes = store.stores.create("Notes", "What the user told me.").id
    notes2 = store.stores.create("notes", "Another store with a colliding slug.").id
    ref = store.stores.create("Ref", "Reference material.").id
    store.memories.create(ref, "/guide.md", "# Guide\nBe brief.\n", actor=None)
    return notes, notes2, ref


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_session_end_to_end(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path, db: Path
) -> None:
    needs_root(isolation)
    notes, notes2, ref = make_stores(store)
    root = tmp_path / "root"
    r = launch(
        ["--store", notes, "--store", f"{notes2}:read_write", "--store", "Ref:read_only",
         "--instructions", "Ref=Only read this.\nNever guess.",
         "--root", str(root), "--isolation", isolation],
        MAIN_SCRIPT, env={"ROOT": str(root)},
    )
    r.wait_file("ready")
    sid = r.sid
    daemons = daemons_of(sid)
    # In the private namespace one daemon serves the whole session (memfs.daemons.sessionfs);
    # without one, each store has its own.
    assert len(daemons) == (1 if isolation == "namespace" else 3)
    if isolation == "namespace":
        # Private: neither the mounts nor the scratch are visible from here.
        assert mounts_under(tmp_path) == []
        assert not (root / "scratch.txt").exists()
        own_ns = os.readlink("/proc/self/ns/mnt")
        assert all(os.readlink(f"/proc/{p}/ns/mnt") != own_ns for p in daemons)
    else:
        assert sorted(mounts_under(root)) == [str(root / n) for n in ("notes", "notes-2", "ref")]
        assert (root / "scratch.txt").read_text() == "scratch\n"
    assert store.sessions.get(sid).status == "running"
    (tmp_path / "go").touch()
    assert r.wait() == 7, r.err
    assert r.err == ""

    # What CMD saw.
    assert (tmp_path / "ls-root").read_text().split() == ["notes", "notes-2", "ref"]
    assert (tmp_path / "ls-ref").read_text().split() == ["guide.md"]
    assert (tmp_path / "cat-ref").read_text() == "# Guide\nBe brief.\n"
    assert "Read-only file system" in (tmp_path / "erofs").read_text()
    assert (tmp_path / "scratch-inside").read_text() == "scratch\n"
    mounts_inside = {
        line.split()[1]: line.split()[3].split(",") for line in
        (tmp_path / "mounts-inside").read_text().splitlines()
    }
    # The read-only store is refused by its daemon (each refusal logged), not by the kernel.
    assert "rw" in mounts_inside[str(root / "ref")]
    assert "rw" in mounts_inside[str(root / "notes")]
    prompt = (tmp_path / "prompt.md").read_text()
    assert f"- Mount path: {root}/notes\n" in prompt
    assert f"- Mount path: {root}/notes-2\n" in prompt
    assert f"- Mount path: {root}/ref\n- Access: read_only" in prompt
    assert "- Description: Reference material." in prompt
    assert "- Instructions: Only read this.\n  Never guess." in prompt
    assert prompt.count("## ") == 3

    # The session in the store: snapshotted names, mount paths from slugs with a suffix.
    s = store.sessions.get(sid)
    assert [(x.name, x.mount_path, x.access) for x in s.resources] == [
        ("Notes", f"{root}/notes", "read_write"),
        ("notes", f"{root}/notes-2", "read_write"),
        ("Ref", f"{root}/ref", "read_only"),
    ]
    assert s.resources[2].instructions == "Only read this.\nNever guess."
    assert s.resources[0].description == "What the user told me."

    # Versions attributed to the session, and nothing else written by it.
    v1 = store.versions.list(notes, session_id=sid).data
    v2 = store.versions.list(notes2, session_id=sid).data
    assert [(v.operation, v.path) for v in v1] == [("created", "/n1.md")]
    assert [(v.operation, v.path) for v in v2] == [("created", "/sub/n2.md")]
    assert v1[0].created_by == Actor.session(sid)
    assert store.versions.list(ref, session_id=sid).data == []
    assert store.memories.get_by_path(notes, "/n1.md").content == "first note\n"

    # Paired tool events, joined to the versions they produced.
    events = store.events.list(sid, limit=1000).data
    uses = {e.body["id"]: e.body for e in events if e.type == "agent.tool_use"}
    results = [e.body for e in events if e.type == "agent.tool_result"]
    assert uses and len(results) == len(uses)
    assert {res["tool_use_id"] for res in results} == set(uses)
    by_op = {(u["input"]["operation"], u["input"]["file_path"]): u for u in uses.values()}
    create = by_op[("create", f"{root}/notes/n1.md")]
    result = next(res for res in results if res["tool_use_id"] == create["id"])
    assert result["is_error"] is False
    assert result["memory_version_id"] == v1[0].id
    assert by_op[("read", f"{root}/ref/guide.md")]["name"] == "cat"
    assert ("list", f"{root}/ref") in by_op
    assert ("mkdir", f"{root}/notes-2/sub") in by_op

    assert_ended(store, sid, root, tmp_path)
    if isolation == "none":
        assert not root.exists()  # the launcher made it, the launcher removed it
    else:
        assert root.is_dir() and os.listdir(root) == []  # the host's side never saw scratch

    # The CLI shows the launcher's sessions usefully.
    env = {**os.environ, "MEMFS_DB": str(db)}

    def cli(*args: str) -> str:
        done = subprocess.run([*MEMFS, *args], env=env, capture_output=True, text=True,
                              check=True)
        return done.stdout

    show = cli("session", "show", sid)
    assert "status:   terminated" in show and f"{root}/notes-2  read_write  notes" in show
    assert sid in cli("session", "list", "--store", "Ref")
    assert "/n1.md" in cli("versions", "list", notes, "--session", sid)
    timeline = cli("session", "events", sid, "--limit", "1000")
    assert f"cat read {root}/ref/guide.md" in timeline
    assert "session.status_terminated" in timeline
    assert cli("session", "prompt", sid) == prompt


# -- a session spec file ------------------------------------------------------------------------


SPEC_SCRIPT = r"""
R=$ROOT
ls "$R" > "$T/ls-root"
cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/prompt.md"
echo "from the spec" > "$R/notes/n.md"
cat "$R/ref/guide.md" > "$T/cat-ref"
if (echo nope > "$R/ref/new.md") 2> "$T/erofs"; then exit 99; fi
grep " $R/" /proc/self/mounts > "$T/mounts-inside"
"""


def test_session_from_a_spec_file(launch: Callable[..., Run], store: Store,
                                  tmp_path: Path) -> None:
    """memfs run --spec: two stores (one read_only, named by id), title, metadata and
    instructions as the file gives them."""
    notes, _, ref = make_stores(store)
    spec = tmp_path / "session.yaml"
    spec.write_text(
        "title: Spec test\n"
        "metadata: {team: support, ticket: '42'}\n"
        "resources:\n"
        "  - type: memory_store\n"
        "    memory_store: Notes\n"
        "    instructions: Write what you learn here.\n"
        "  - type: memory_store\n"
        f"    memory_store_id: {ref}\n"
        "    access: read_only\n"
        "    instructions: |\n"
        "      Only read this.\n"
        "      Never guess.\n"
    )
    root = tmp_path / "root"
    r = launch(["--spec", str(spec), "--root", str(root), "--isolation", "none"],
               SPEC_SCRIPT, env={"ROOT": str(root)})
    assert r.wait() == 0, r.err
    assert r.err == ""

    assert (tmp_path / "ls-root").read_text().split() == ["notes", "ref"]
    assert (tmp_path / "cat-ref").read_text() == "# Guide\nBe brief.\n"
    # The read-only store refuses in the daemon (no kernel `ro`), so the refusal is logged.
    assert "Read-only file system" in (tmp_path / "erofs").read_text()
    mounted = {line.split()[1] for line in
               (tmp_path / "mounts-inside").read_text().splitlines()}
    assert {str(root / "ref"), str(root / "notes")} <= mounted
    prompt = (tmp_path / "prompt.md").read_text()
    assert f"- Mount path: {root}/notes\n- Access: read_write" in prompt
    assert f"- Mount path: {root}/ref\n- Access: read_only" in prompt
    assert "- Instructions: Write what you learn here." in prompt
    assert "- Instructions: Only read this.\n  Never guess." in prompt

    (s,) = store.sessions.list().data
    assert s.title == "Spec test" and s.metadata == {"team": "support", "ticket": "42"}
    assert [(x.memory_store_id, x.access, x.mount_path) for x in s.resources] == [
        (notes, "read_write", f"{root}/notes"), (ref, "read_only", f"{root}/ref"),
    ]
    assert store.memories.get_by_path(notes, "/n.md").content == "from the spec\n"
    assert store.versions.list(ref, session_id=s.id).data == []
    assert_ended(store, s.id, root, tmp_path)


# -- stopping: CMD killed, launcher signalled, a daemon dies --------------------------------


# "ready" is made by a builtin, not touch(1): a SIGINT that reaches bash while it waits for a
# foreground child that then exits normally is ignored (bash's wait-and-cooperative-exit), and
# the test may signal as soon as the file appears, before touch has exited.
WAIT_SCRIPT = r"""
echo scratch > "$ROOT/scratch.txt"
echo hi > "$ROOT/notes/hello.md"
: > "$T/ready"
exec sleep 60
"""


@pytest.mark.parametrize(
    ("how", "isolation", "expected"),
    [
        ("cmd-kill-outside", "namespace", 128 + signal.SIGKILL),
        ("cmd-kill-outside", "none", 128 + signal.SIGKILL),
        ("cmd-kill-inside", "namespace", 128 + signal.SIGKILL),
        ("launcher-sigterm", "namespace", 128 + signal.SIGTERM),
        ("launcher-sigterm", "none", 128 + signal.SIGTERM),
        ("launcher-sigint", "namespace", 128 + signal.SIGINT),
        ("launcher-sigint", "none", 128 + signal.SIGINT),
    ],
)
def test_stopped_session_cleans_up(
    how: str, isolation: str, expected: int, launch: Callable[..., Run], store: Store,
    tmp_path: Path,
) -> None:
    needs_root(isolation)
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    script = WAIT_SCRIPT
    if how == "cmd-kill-inside":
        script = script.replace("exec sleep 60", "kill -9 $$")
    r = launch(["--store", notes, "--root", str(root), "--isolation", isolation], script,
               env={"ROOT": str(root)})
    r.wait_file("ready")
    if how == "cmd-kill-outside":
        os.kill(cmd_pid(tmp_path), signal.SIGKILL)
    elif how == "launcher-sigterm":
        r.proc.send_signal(signal.SIGTERM)
    elif how == "launcher-sigint":
        r.proc.send_signal(signal.SIGINT)
    assert r.wait() == expected, r.err
    assert r.err == ""
    assert_ended(store, r.sid, root, tmp_path)
    assert store.memories.get_by_path(notes, "/hello.md").content == "hi\n"
    assert processes_with(r.sid) == []


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_killed_launcher_unmounts_and_its_session_is_reaped(
    isolation: str, launch: Callable[..., Run], store: Store, db: Path, tmp_path: Path,
) -> None:
    """kill -9 of `memfs run` itself: its daemons unmount (they get SIGTERM when it dies) and
    CMD gets SIGHUP; the session, left running, is ended by the next `memfs session reap` (or
    `memfs run`), with a session.error event, while a live session is left alone."""
    needs_root(isolation)
    notes = store.stores.create("Notes").id
    # Without a namespace, the launcher's own private root (no --root): it is scratch the
    # launcher made, so reaping deletes it.
    root_args = ["--root", str(tmp_path / "root")] if isolation == "namespace" else []
    script = r"""
    mnt=$(sed -n 's/^- Mount path: //p' "$MEMFS_SYSTEM_PROMPT_FILE")
    echo scratch > "$(dirname "$mnt")/scratch.txt"
    echo hi > "$mnt/hello.md"
    : > "$T/ready"
    exec sleep 60
    """
    r = launch(["--store", notes, *root_args, "--isolation", isolation], script)
    r.wait_file("ready")
    sid = r.sid
    root = Path(store.sessions.get(sid).resources[0].mount_path).parent
    pid = cmd_pid(tmp_path)
    r.proc.kill()
    r.wait()
    wait_until(lambda: not daemons_of(sid) and not processes_with(sid), SESSION_DEADLINE)
    wait_until(lambda: not mounts_under(root), SESSION_DEADLINE)
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), SESSION_DEADLINE)
    assert store.sessions.get(sid).status == "running"
    assert store.memories.get_by_path(notes, "/hello.md").content == "hi\n"
    if isolation == "none":
        assert (root / "scratch.txt").exists()  # the dead launcher could not delete it

    live = store.sessions.create([], launcher={"host": socket.gethostname(), "pid": os.getpid(),
                                              "boot_id": Path("/proc/sys/kernel/random/boot_id")
                                              .read_text().strip(),
                                              "start": _start_ticks(os.getpid())})
    env = {**os.environ, "MEMFS_DB": str(db)}
    out = subprocess.run([*MEMFS, "session", "reap"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"ended {sid}"
    # What the launcher would have deleted is gone: its state, and a scratch root it made.
    assert not (Path(tempfile.gettempdir()) / f"memfs-session-{sid}").exists()
    if isolation == "none":
        assert not root.exists()
    assert store.sessions.get(sid).status == "terminated"
    errors_ = [e.body for e in store.events.list(sid, types=["session.error"]).data]
    assert len(errors_) == 1 and "ended without it" in errors_[0]["error"]["message"]
    assert store.sessions.get(live.id).status == "idle"
    again = subprocess.run([*MEMFS, "session", "reap"], env=env, capture_output=True,
                           text=True, timeout=30)
    assert again.stdout.strip() == "no stale sessions"


def test_command_ignoring_sigterm_is_killed(
    launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    r = launch(["--store", notes, "--root", str(root), "--isolation", "none"],
               "trap '' TERM; touch \"$T/ready\"; exec sleep 60", env={"ROOT": str(root)})
    r.wait_file("ready")
    r.proc.send_signal(signal.SIGTERM)
    assert r.wait() == 128 + signal.SIGKILL
    assert_ended(store, r.sid, root, tmp_path)


def test_leftover_processes_are_stopped(
    launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """A background job CMD leaves behind does not outlive the session (nor hold our pipes)."""
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    r = launch(["--store", notes, "--root", str(root), "--isolation", "none"],
               '(setsid sleep 60 & echo $! > "$T/bg.pid") ; wait_for "$T/bg.pid"; exit 3',
               env={"ROOT": str(root)})
    assert r.wait() == 3, r.err
    bg = int((tmp_path / "bg.pid").read_text())
    assert not Path(f"/proc/{bg}").exists()
    assert_ended(store, r.sid, root, tmp_path)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_dead_mount_daemon_stops_the_session(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    needs_root(isolation)
    notes = store.stores.create("Notes").id
    other = store.stores.create("Other").id
    root = tmp_path / "root"
    r = launch(["--store", notes, "--store", other, "--root", str(root),
                "--isolation", isolation], WAIT_SCRIPT, env={"ROOT": str(root)})
    r.wait_file("ready")
    victim = next(p for p in daemons_of(r.sid)
                  if notes in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace"))
    os.kill(victim, signal.SIGKILL)
    assert r.wait() == 1
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0] == (
        f"memfs: the mount of 'Notes' at {root}/notes died (killed by SIGKILL); "
        "the command was stopped"
    )
    assert_ended(store, r.sid, root, tmp_path, error=True)
    error = store.events.list(r.sid, types=["session.error"]).data[0].body["error"]
    assert error["type"] == "unknown_error" and "died" in error["message"]
    # What was written before the crash is kept.
    assert store.memories.get_by_path(notes, "/hello.md").content == "hi\n"
    assert processes_with(r.sid) == []


# -- concurrent sessions, rejections -----------------------------------------------------------


CONCURRENT_SCRIPT = r"""
R=${ROOT:-$(dirname "$(sed -n 's/^- Mount path: //p' "$MEMFS_SYSTEM_PROMPT_FILE" | head -1)")}
echo "$R" > "$T/$ME.root"
echo "$ME" > "$R/scratch.txt"
touch "$T/$ME.ready"
wait_for "$T/$OTHER.ready" || exit 98
[ "$(cat "$R/scratch.txt")" = "$ME" ] || exit 97
ls "$R" > "$T/$ME.ls"
touch "$T/$ME.done"
wait_for "$T/$OTHER.done" || exit 96
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_concurrent_sessions_have_private_scratch(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """Namespace: the same root for both, each with its own tmpfs. None: each gets a root of
    its own by default."""
    needs_root(isolation)
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    args = ["--store", notes, "--isolation", isolation]
    env: dict[str, str] = {}
    if isolation == "namespace":
        args += ["--root", str(root)]
        env["ROOT"] = str(root)
    a = launch(args, CONCURRENT_SCRIPT, env={**env, "ME": "a", "OTHER": "b"})
    b = launch(args, CONCURRENT_SCRIPT, env={**env, "ME": "b", "OTHER": "a"})
    assert a.wait() == 0, a.err
    assert b.wait() == 0, b.err
    for me in ("a", "b"):
        assert (tmp_path / f"{me}.ls").read_text().split() == ["notes", "scratch.txt"]
    roots = {(tmp_path / f"{me}.root").read_text().strip() for me in ("a", "b")}
    if isolation == "none":
        assert len(roots) == 2
        assert not any(Path(p).exists() for p in roots)
    else:
        assert roots == {str(root)} and os.listdir(root) == []
    assert mounts_under(tmp_path) == []
    sessions = store.sessions.list(memory_store_id=notes).data
    assert len(sessions) == 2 and {s.status for s in sessions} == {"terminated"}


def _reject_case(case: str, store: Store) -> list[str]:
    if case == "nine-stores":
        args = []
        for i in range(9):
            args += ["--store", store.stores.create(f"s{i}").id]
        return args
    notes = store.stores.create("Notes").id
    if case == "archived":
        old = store.stores.create("Old").id
        store.stores.archive(old)
        return ["--store", notes, "--store", old]
    if case == "twice":
        return ["--store", notes, "--store", "Notes:read_only"]
    if case == "long-instructions":
        return ["--store", notes, "--instructions", f"Notes={'x' * 4097}"]
    if case == "unknown-store":
        return ["--store", notes, "--store", "nope"]
    raise AssertionError(case)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("nine-stores", "at most 8 memory stores"),
        ("archived", "is archived"),
        ("twice", "attached twice"),
        ("long-instructions", "4097 characters; the limit is 4096"),
        ("unknown-store", "'nope'"),
    ],
)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_rejected_attachments(
    case: str, message: str, isolation: str, launch: Callable[..., Run], store: Store,
    tmp_path: Path,
) -> None:
    needs_root(isolation)
    root = tmp_path / "root"
    r = launch([*_reject_case(case, store), "--root", str(root), "--isolation", isolation],
               'touch "$T/ran"')
    assert r.wait() != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: ") and message in lines[0], r.err
    assert not (tmp_path / "ran").exists()
    assert not root.exists()
    assert mounts_under(tmp_path) == []
    assert store.sessions.list(include_archived=True).data == []


def test_command_not_found(launch: Callable[..., Run], store: Store, tmp_path: Path,
                           db: Path) -> None:
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    done = subprocess.run(
        [*MEMFS, "run", "--store", notes, "--root", str(root), "--isolation", "none", "--",
         "no-such-command-xyz"],
        env={**os.environ, "MEMFS_DB": str(db)}, capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 127
    assert done.stderr == "memfs: no-such-command-xyz: command not found\n"
    (s,) = store.sessions.list().data
    assert s.status == "terminated"
    assert mounts_under(tmp_path) == [] and not root.exists()


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_root_holding_the_database_is_refused(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """A tmpfs over the database would hide it, a scratch clean-up would delete it."""
    needs_root(isolation)
    notes = store.stores.create("Notes").id
    r = launch(["--store", notes, "--root", str(tmp_path), "--isolation", isolation],
               'touch "$T/ran"')
    assert r.wait() == 1
    assert r.err == f"memfs: the database {tmp_path}/memfs.db is inside the session root " \
        f"{tmp_path}\n"
    assert not (tmp_path / "ran").exists()
    assert store.sessions.list().data == []
    assert store.stores.get(notes).name == "Notes"
    # The refused root was never scratch: the clean-up left it, and the database, alone.
    assert (tmp_path / "memfs.db").exists()
    fresh = Store(tmp_path / "memfs.db")  # not only the connection opened before the run
    try:
        assert fresh.stores.get(notes).name == "Notes"
    finally:
        fresh.close()


def test_refused_root_is_left_untouched(
    launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """Without a namespace, a root that is not empty is refused, and what it holds is kept."""
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "keep.txt").write_text("precious\n")
    (root / "sub" / "also.txt").write_text("also\n")
    r = launch(["--store", notes, "--root", str(root), "--isolation", "none"], 'touch "$T/ran"')
    assert r.wait() == 1
    assert r.err.startswith(f"memfs: {root} is not empty"), r.err
    assert (root / "keep.txt").read_text() == "precious\n"
    assert (root / "sub" / "also.txt").read_text() == "also\n"
    assert not (tmp_path / "ran").exists()
    assert store.sessions.list().data == []


def test_root_over_the_temp_dir(
    launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """A namespace root that covers $TMPDIR does not hide the launcher's own state."""
    needs_root("namespace")
    notes = store.stores.create("Notes").id
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = launch(["--store", notes, "--root", str(tmp), "--isolation", "namespace"],
               'cat "$MEMFS_SYSTEM_PROMPT_FILE" > "$T/prompt.md"; echo hi > "$ROOT/notes/a.md"',
               env={"TMPDIR": str(tmp), "ROOT": str(tmp)})
    assert r.wait() == 0, r.err
    assert f"- Mount path: {tmp}/notes" in (tmp_path / "prompt.md").read_text()
    assert store.memories.get_by_path(notes, "/a.md").content == "hi\n"
    assert_ended(store, r.sid, tmp, tmp_path)
    assert os.listdir(tmp) == []


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_mount_failure_at_start(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """A daemon that cannot start (here: a broken pyfuse3 on its path): CMD never runs, the
    other mounts come down, one clear line says why."""
    needs_root(isolation)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyfuse3.py").write_text('raise ImportError("pyfuse3 is broken here")\n')
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    r = launch(["--store", notes, "--root", str(root), "--isolation", isolation],
               'touch "$T/ran"', env={"PYTHONPATH": str(broken)})
    assert r.wait() == 1
    assert r.err == (
        f"memfs: cannot mount 'Notes' at {root}/notes: ImportError: pyfuse3 is broken here\n"
    )
    assert not (tmp_path / "ran").exists()
    (s,) = store.sessions.list().data
    assert_ended(store, s.id, root, tmp_path, error=True, ran=False)


# Loaded into every Python process of the session (launcher and daemons) through PYTHONPATH:
# looking a library up in a child between fork and exec (a preexec_fn) fails that fork.
_NO_LOOKUP_AFTER_FORK = """
import ctypes.util, os
_parent = os.getpid()
_find_library = ctypes.util.find_library
def find_library(name):
    if os.getpid() != _parent:
        raise RuntimeError("find_library (ldconfig) between fork and exec")
    return _find_library(name)
ctypes.util.find_library = find_library
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_nothing_is_looked_up_between_fork_and_exec(
    isolation: str, launch: Callable[..., Run], store: Store, tmp_path: Path
) -> None:
    """The children's preexec_fn (setsid, the parent-death signal) runs no ldconfig."""
    needs_root(isolation)
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(_NO_LOOKUP_AFTER_FORK)
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    r = launch(["--store", notes, "--root", str(root), "--isolation", isolation],
               'echo hi > "$ROOT/notes/a.md"; touch "$T/ran"',
               env={"PYTHONPATH": str(guard), "ROOT": str(root)})
    assert r.wait() == 0, r.err
    assert (tmp_path / "ran").exists()
    assert store.memories.get_by_path(notes, "/a.md").content == "hi\n"
    assert_ended(store, r.sid, root, tmp_path)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_mount_failure_gives_libfuse_reason(
    isolation: str, store: Store, tmp_path: Path, db: Path
) -> None:
    """No FUSE device (a private /dev without one): the launcher's one line carries libfuse's
    reason, not only that the mount failed."""
    need(os.geteuid() == 0, "hiding /dev/fuse in a private mount namespace needs root")
    notes = store.stores.create("Notes").id
    root = tmp_path / "root"
    no_fuse = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs memfs-test-dev /dev && mknod /dev/null c 1 3 && exec "$@"', "sh"]
    done = subprocess.run(
        [*no_fuse, *MEMFS, "run", "--store", notes, "--root", str(root), "--isolation",
         isolation, "--", "touch", str(tmp_path / "ran")],
        env={**os.environ, "MEMFS_DB": str(db)}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"memfs: cannot mount 'Notes' at {root}/notes: "), done.stderr
    assert "device not found" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "ran").exists()
    (s,) = store.sessions.list().data
    assert_ended(store, s.id, root, tmp_path, error=True, ran=False)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_memfs_package_in_the_working_directory_is_never_imported(
    launch: Callable[..., Run], store: Store, tmp_path: Path, isolation: str
) -> None:
    """``memfs run`` (often as root) started where a ``memfs/`` folder lies, one an agent of an
    earlier session could have written: its mount daemons import the installed memfs, never
    that folder (``python -P``)."""
    notes = store.stores.create("Notes").id
    store.memories.create(notes, "/a.md", "from the store", actor=None)
    work = tmp_path / "work"
    (work / "memfs").mkdir(parents=True)
    marker = tmp_path / "imported"
    (work / "memfs" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit(9)\n")
    root = tmp_path / "root"
    r = launch(["--store", notes, "--root", str(root), "--isolation", isolation],
               'cat "$ROOT/notes/a.md"', env={"ROOT": str(root)}, cwd=work)
    assert r.wait() == 0, r.err
    assert r.out.endswith("from the store") and not marker.exists()
    assert_ended(store, r.sid, root, tmp_path)
