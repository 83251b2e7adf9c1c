"""The agent in a sandbox (issue 9): an unprivileged user (``memfs run --user``), a bubblewrap
container, and what the agent can and cannot reach from there.

Real mounts, real users: these tests need root (to switch users, to mount with
``allow_other``); without it they skip locally and fail when CI=true, like every FUSE test.
The agent side of each check is a small stdlib-only Python script run by the system's
``/usr/bin/python3`` (the test's own interpreter may live where the agent cannot enter),
which prints the errno of each attempt as JSON.
"""

from __future__ import annotations

import errno
import grp
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.models import Actor
from memfs.store import Store
from tests.support import need, wait_until
from tests.support.mount import Mount
from tests.support.repo import copy_of_the_repo
from tests.support.session import AGENT, MEMFS, memfs_run
from tests.support.session import AGENT_PY as PY

pytestmark = pytest.mark.fuse

RO_SYSCALLS = Path(__file__).with_name("ro_syscalls.py")
STRANGER = 65533  # a third uid, neither root nor the agent
# For each path: the errno of stat, then of opening it to read (0: it worked).
PROBE = r"""
import json, os, sys
out = {}
for p in sys.argv[1:]:
    r = []
    for fn in (os.stat, lambda p: os.close(os.open(p, os.O_RDONLY))):
        try:
            fn(p)
            r.append(0)
        except OSError as e:
            r.append(e.errno)
    out[p] = r
print(json.dumps(out))
"""


def probe_result(folder: Path) -> dict[str, Any]:
    """What the API probe wrote to ``folder/api.json``, checked against PROBE_EXPECTED. A
    probe that failed before writing its JSON (an empty api.json) fails with its stderr
    (``api.err``), which tells why, instead of a JSONDecodeError that hides it."""
    err = (folder / "api.err").read_text() if (folder / "api.err").exists() else "(no api.err)"
    try:
        found = json.loads((folder / "api.json").read_text())
    except (OSError, ValueError) as e:
        raise AssertionError(f"the API probe wrote no JSON ({e}); its stderr:\n{err}") from None
    assert {k: found.get(k) for k in PROBE_EXPECTED} == PROBE_EXPECTED, err
    return found  # type: ignore[no-any-return]


def test_a_probe_that_wrote_no_json_fails_with_its_stderr(tmp_path):
    (tmp_path / "api.json").write_text("")
    (tmp_path / "api.err").write_text("Traceback ...\nConnectionRefusedError: no socket\n")
    with pytest.raises(AssertionError, match="ConnectionRefusedError: no socket"):
        probe_result(tmp_path)


@pytest.fixture
def ro_syscalls(shared: Path) -> Path:
    """ro_syscalls.py where the agent can read it: the repository may be in a directory the
    agent's user cannot enter (a clone under a 0700 home), so the agent gets a copy."""
    copy = shared / RO_SYSCALLS.name
    shutil.copyfile(RO_SYSCALLS, copy)
    copy.chmod(0o644)
    return copy


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "memfs.db")
    yield s
    s.close()


def as_user(uid: int, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           *cmd], capture_output=True, text=True, timeout=30)


def probe(uid: int, *paths: str | Path) -> dict[str, list[int]]:
    done = as_user(uid, PY, "-c", PROBE, *map(str, paths))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def tool_pairs(store: Store, sid: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    events = store.events.list(sid, limit=1000).data
    results = {e.body["tool_use_id"]: e.body for e in events if e.type == "agent.tool_result"}
    return [(e.body, results[e.body["id"]]) for e in events
            if e.type == "agent.tool_use" and e.body["id"] in results]


def two_stores(store: Store) -> tuple[str, str]:
    notes = store.stores.create("Notes")
    docs = store.stores.create("Docs")
    store.memories.create(notes.id, "/a.md", "alpha\n", actor=Actor.user("user_x"))
    store.memories.create(docs.id, "/a.md", "read me\n", actor=Actor.user("user_x"))
    store.memories.create(docs.id, "/d/x.md", "x\n", actor=Actor.user("user_x"))
    return notes.id, docs.id


def check_ro_results(results: dict[str, list[Any]], logged: Counter[tuple[str, str]],
                     prefix: str) -> None:
    """Every mutating call was refused: EROFS and an is_error event for each one that
    reaches the mount; EBADF/EINVAL from the kernel for a write through a read-only
    descriptor (the only kind the mount hands out)."""
    expected: Counter[tuple[str, str]] = Counter()
    for name, (err, op, path) in results.items():
        if op is None:
            assert err in (errno.EBADF, errno.EINVAL), (name, os.strerror(err))
        else:
            assert err == errno.EROFS, (name, err and os.strerror(err))
            expected[(op, f"{prefix}/{path}")] += 1
    assert sum(expected.values()) >= 20
    missing = expected - logged
    assert not missing, f"refusals not logged: {dict(missing)}"


# -- the mount itself --------------------------------------------------------------------------


def test_read_only_store_refuses_and_logs_every_mutating_call(open_store, mounter):
    store = open_store()
    s = store.stores.create("ro")
    store.memories.create(s.id, "/a.md", "a", actor=Actor.user("user_x"))
    store.memories.create(s.id, "/d/x.md", "x", actor=Actor.user("user_x"))
    m = mounter(s.id, "--read-only")
    done = subprocess.run([sys.executable, str(RO_SYSCALLS), str(m.root)], capture_output=True,
                          text=True, timeout=60, check=True)
    results = json.loads(done.stdout)
    assert len(results) >= 25

    def logged() -> Counter[tuple[str, str]]:
        c = Counter((u["input"]["operation"], u["input"]["file_path"]) for u, r in m.pairs()
                    if r["is_error"] and r["content"][0]["text"].startswith("EROFS"))
        want = sum(1 for err, op, _ in results.values() if op is not None)
        assert sum(c.values()) >= want
        return c

    check_ro_results(results, wait_until(logged), str(m.root))
    assert (m.root / "a.md").read_text() == "a"
    assert sorted(os.listdir(m.root)) == ["a.md", "d"]
    assert [v.operation for v in store.versions.list(s.id, limit=100).data] == ["created"] * 2


@pytest.fixture
def shared_mount(db: Path, shared: Path) -> Iterator[Callable[..., Mount]]:
    """Like ``mounter``, on a mount point other users can reach (the database stays in
    tmp_path, root's only)."""
    mounts: list[Mount] = []

    def start(store_ref: str, *args: str) -> Mount:
        m = Mount(db, store_ref, shared / f"mnt{len(mounts)}", list(args))
        mounts.append(m)
        return m.wait_mounted()

    yield start
    for m in mounts:
        m.stop()


def test_owner_and_modes_of_a_mount_for_another_user(open_store, shared_mount, root_user):
    store = open_store()
    s = store.stores.create("theirs")
    store.memories.create(s.id, "/a.md", "a", actor=Actor.user("user_x"))
    m = shared_mount(s.id, "--owner", "65534:65534", "--allow-other")
    for p, mode in ((m.root, 0o40700), (m.root / "a.md", 0o100600)):
        st = os.stat(p)
        assert (st.st_uid, st.st_gid, st.st_mode) == (65534, 65534, mode)
    assert "allow_other" in next(ln for ln in Path("/proc/self/mounts").read_text().splitlines()
                                 if str(m.root) in ln).split()[3]
    # The owner reads and writes; a third user gets nowhere.
    assert as_user(65534, "cat", str(m.root / "a.md")).stdout == "a"
    assert as_user(65534, "sh", "-c", f"echo b > {m.root}/b.md").returncode == 0
    assert store.memories.get_by_path(s.id, "/b.md").content == "b\n"
    assert probe(STRANGER, m.root, m.root / "a.md") == {
        str(m.root): [0, errno.EACCES], str(m.root / "a.md"): [errno.EACCES, errno.EACCES]}
    # Not allowed: a bad --owner is one line.
    bad = subprocess.run([*MEMFS, "mount", s.id, str(m.root), "--owner", "nobody"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--owner must be UID:GID" in bad.stderr


# -- memfs run --user --------------------------------------------------------------------------

AGENT_SCRIPT = r"""
set -u
X={x}
R={r}
id -u > $X/uid; id -G > $X/groups; echo "$HOME" > $X/home; env | sort > $X/env
ls $R > $X/ls 2>&1
stat -c '%U %a' $R $R/notes $R/notes/a.md $R/docs/a.md \
    > $X/stat
cat $R/notes/a.md > $X/cat
echo "beta" > $R/notes/b.md
sed -i 's/alpha/gamma/' $R/notes/a.md
echo scratch > $R/scratch.txt
echo x 2> $X/ro_write.err > $R/docs/a.md; echo $? > $X/ro_write.rc
H=$R/notes/.history/a.md
ls $H > $X/hist_ls 2>&1
cat "$H/$(ls $H | head -1)" > $X/hist_cat
echo x 2> $X/hist_new.err > $H/new
echo x 2> $X/hist_over.err > "$H/$(ls $H | head -1)"
mkdir $H/d 2> $X/hist_mkdir.err
{py} {ro} $R/docs > $X/ro.json
cat "$MEMFS_SYSTEM_PROMPT_FILE" > $X/prompt
S=$(dirname "$MEMFS_SYSTEM_PROMPT_FILE")
{py} -c '{probe}' {db} "$S" {logs} > $X/probe.json
"""


def agent_script(x: Path, root: str | Path, ro: Path, *store_ids: str, db: Path,
                 session_log: bool = False) -> str:
    """The agent's side (``ro``: the agent's copy of ro_syscalls.py; ``db``: the database,
    which it must not reach); it also tries the event log and daemon log of each store (or
    the one daemon log of the session: ``session_log``)."""
    logs = " ".join(f'"$S/{i}.events.jsonl"' + ("" if session_log else f' "$S/{i}.log"')
                    for i in store_ids)
    if session_log:
        logs += ' "$S/session.log"'
    return AGENT_SCRIPT.format(x=x, r=root, py=PY, ro=ro, probe=PROBE.replace("'", ""),
                               logs=logs, db=db)


@pytest.mark.parametrize("isolation", ["namespace", "none"])
def test_run_as_an_unprivileged_user(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path, isolation: str,
    ro_syscalls: Path,
):
    notes, docs = two_stores(store)
    x = shared / "x"
    x.mkdir(mode=0o777)
    x.chmod(0o777)
    root = shared / "root"  # for --isolation none: where a third user could try to look
    root_seen = "/mnt/memory" if isolation == "namespace" else str(root)
    args = ["--store", "Notes", "--store", "Docs:read_only", "--user", AGENT,
            "--isolation", isolation]
    if isolation == "none":
        args += ["--root", str(root)]
        # While the session runs, a third user tries the mounts from outside.
        script = agent_script(x, root_seen, ro_syscalls, notes, docs,
                              db=tmp_path / "memfs.db") + (
            f"\ntouch {x}/ready\n"
            f"for _ in $(seq 500); do [ -e {x}/go ] && break; sleep 0.02; done\n")
    else:
        # One daemon serves the session (memfs.daemons.sessionfs), with one log.
        script = agent_script(x, root_seen, ro_syscalls, notes, docs,
                              db=tmp_path / "memfs.db", session_log=True)
    seen: dict[str, Any] = {}

    def stranger() -> None:
        if isolation == "none":
            wait_until(lambda: (x / "ready").exists() or None, 20)
            seen.update(probe(STRANGER, root, root / "notes", root / "notes" / "a.md",
                              root / "docs" / "a.md"))
            (x / "go").touch()

    import threading
    t = threading.Thread(target=stranger)
    t.start()
    done = memfs_run(tmp_path / "memfs.db", *args, "--", "sh", "-c", script)
    t.join()
    assert done.returncode == 0, done.stderr
    sid = store.sessions.list().data[0].id

    # Who it ran as, with what.
    assert (x / "uid").read_text().strip() == str(agent_user.pw_uid)
    assert str(grp.getgrnam(AGENT).gr_gid) in (x / "groups").read_text().split()
    assert (x / "home").read_text().strip() == agent_user.pw_dir
    names = {ln.split("=", 1)[0] for ln in (x / "env").read_text().splitlines() if "=" in ln}
    assert names - {"PWD", "SHLVL", "_", "OLDPWD"} <= {
        "HOME", "USER", "LOGNAME", "PATH", "TERM", "MEMFS_URL", "MEMFS_API_KEY",
        "MEMFS_SESSION_ID", "MEMFS_SYSTEM_PROMPT_FILE"}
    assert "# Memory" in (x / "prompt").read_text()
    # Its stores, its own: ls, cat, a new file, sed -i.
    assert (x / "ls").read_text().split() == ["docs", "notes"]
    assert (x / "stat").read_text().splitlines() == [
        f"{AGENT} 700", f"{AGENT} 700", f"{AGENT} 600", f"{AGENT} 600"]
    assert (x / "cat").read_text() == "alpha\n"
    assert store.memories.get_by_path(notes, "/b.md").content == "beta\n"
    assert store.memories.get_by_path(notes, "/a.md").content == "gamma\n"
    # The read-only store: EROFS for the agent, every refusal logged.
    assert (x / "ro_write.rc").read_text().strip() != "0"
    assert "Read-only file system" in (x / "ro_write.err").read_text()
    results = json.loads((x / "ro.json").read_text())
    logged = Counter((u["input"]["operation"], u["input"]["file_path"])
                     for u, r in tool_pairs(store, sid)
                     if r["is_error"] and r["content"][0]["text"].startswith("EROFS"))
    check_ro_results(results, logged, f"{root_seen}/docs")
    # The history of a file it changed: readable, and EROFS (logged) for every change, as in
    # a read-only store (not EACCES from the kernel: the daemon decides and logs).
    assert len((x / "hist_ls").read_text().split()) == 2  # created, then sed -i
    assert (x / "hist_cat").read_text() == "alpha\n"
    for err in ("hist_new.err", "hist_over.err", "hist_mkdir.err"):
        assert "Read-only file system" in (x / err).read_text(), err
    assert {op for op, path in logged if "/.history/" in path} == {"create", "write", "mkdir"}
    assert store.memories.get_by_path(docs, "/a.md").content == "read me\n"
    # Out of reach: the database, the launcher's state directory and the event logs (the
    # prompt file is read by its name only).
    probed = json.loads((x / "probe.json").read_text())
    db, state, *logs = probed
    assert probed[db] == [errno.EACCES, errno.EACCES]
    assert probed[state][1] == errno.EACCES  # cannot list it
    assert len(logs) == (4 if isolation == "none" else 3)
    assert all(probed[p] == [0, errno.EACCES] for p in logs)
    if isolation == "none":
        assert seen == {
            str(root): [0, errno.EACCES],
            str(root / "notes"): [errno.EACCES, errno.EACCES],
            str(root / "notes" / "a.md"): [errno.EACCES, errno.EACCES],
            str(root / "docs" / "a.md"): [errno.EACCES, errno.EACCES],
        }
        assert not root.exists()  # scratch discarded


def test_user_option_errors(store: Store, tmp_path: Path):
    store.stores.create("Notes")
    for user, message in (("no-such-user-here", "no user 'no-such-user-here'"),
                          ("root:no-such-group", "no group 'no-such-group'"),
                          (":x", "--user must be USER or USER:GROUP")):
        done = memfs_run(tmp_path / "memfs.db", "--store", "Notes", "--user", user, "--",
                         "true")
        assert done.returncode != 0 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert store.sessions.list().data == []


# -- a container: bubblewrap -------------------------------------------------------------------

#: The sandbox: every namespace new (no network), the agent's uid, a read-only minimal root
#: (/usr and the usual links), /proc, /dev, a private /tmp, and the session root -- nothing
#: else of the host -- at /mnt/memory.
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
         "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
         "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
         "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/work"]

INSIDE = r"""
set -u
R=/mnt/memory
id -u > /out/uid
ls -A $R > /out/ls; ls -A / > /out/rootdir
stat -c '%a' $R/notes $R/docs/a.md > /out/stat
cat $R/notes/a.md > /out/cat
echo "from the box" > $R/notes/box.md
sed -i 's/alpha/delta/' $R/notes/a.md
echo x 2>/dev/null > $R/docs/a.md; echo $? > /out/ro_write.rc
python3 /ro_syscalls.py $R/docs > /out/ro.json
python3 -c '{probe}' {outside} > /out/probe.json
python3 -c '{api_probe}' {stores} > /out/api.json 2> /out/api.err
python3 -c 'import socket; s = socket.socket()
try:
    s.connect(("1.1.1.1", 53)); print("connected")
except OSError as e:
    print(e.errno)' > /out/net
"""


def test_bubblewrap_sandbox_sees_only_its_session(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path, ro_syscalls: Path,
):
    need(shutil.which("bwrap") is not None, "bubblewrap (Debian package bubblewrap)")
    notes, docs, secrets = three_stores(store)
    out = shared / "out"
    out.mkdir()
    os.chown(out, agent_user.pw_uid, agent_user.pw_gid)
    # Another session, running meanwhile as another user: its root and mounts exist on the
    # host, and the box must not see them.
    other_root, other_ready, other_go = shared / "other", shared / "other.ready", shared / "go"
    other = subprocess.Popen(
        [*MEMFS, "--db", str(tmp_path / "memfs.db"), "run", "--store", "Notes",
         "--isolation", "none", "--root", str(other_root), "--user", str(STRANGER), "--",
         "sh", "-c", f"touch {other_ready}; while [ ! -e {other_go} ]; do sleep 0.02; done"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: other_ready.exists() or None, 20)
        root = shared / "root"
        outside = " ".join(str(p) for p in (
            tmp_path / "memfs.db", other_root, other_root / "notes", shared, "/tmp/x"))
        inside = INSIDE.format(probe=PROBE.replace("'", ""), outside=outside,
                               api_probe=API_PROBE.replace("'", '"'),
                               stores=f"{notes} {docs} {secrets}")
        # As docs/sessions.md says: the session API's socket (MEMFS_URL) bound into the box.
        with_api = ('inside=$1; shift; exec "$@" --bind "${MEMFS_URL#unix:}" /run/memfs.sock '
                    '--setenv MEMFS_URL unix:/run/memfs.sock sh -c "$inside"')
        done = memfs_run(
            tmp_path / "memfs.db", "--store", "Notes", "--store", "Docs:read_only",
            "--user", AGENT, "--isolation", "none", "--root", str(root), "--",
            "sh", "-c", with_api, "sh", inside,
            *BWRAP, "--uid", str(agent_user.pw_uid), "--gid", str(agent_user.pw_gid),
            "--bind", str(root), "/mnt/memory", "--bind", str(out), "/out",
            "--ro-bind", str(ro_syscalls), "/ro_syscalls.py")
    finally:
        other_go.touch()
        _, err = other.communicate(timeout=30)  # and its pipe closed
        assert other.returncode == 0, err
    assert done.returncode == 0, done.stderr
    sid = next(s.id for s in store.sessions.list().data if "inside=$1" in (s.title or ""))

    assert (out / "uid").read_text().strip() == str(agent_user.pw_uid)
    assert (out / "ls").read_text().split() == ["docs", "notes"]
    assert set((out / "rootdir").read_text().split()) == {
        "bin", "dev", "lib", "lib64", "mnt", "out", "proc", "ro_syscalls.py", "run", "sbin",
        "tmp", "usr", "work", "etc",
    } - ({"etc"} if not os.path.isdir("/etc/alternatives") else set())
    assert (out / "stat").read_text().split() == ["700", "600"]
    assert (out / "cat").read_text() == "alpha\n"
    assert store.memories.get_by_path(notes, "/box.md").content == "from the box\n"
    assert store.memories.get_by_path(notes, "/a.md").content == "delta\n"
    assert (out / "ro_write.rc").read_text().strip() != "0"
    logged = Counter((u["input"]["operation"], u["input"]["file_path"])
                     for u, r in tool_pairs(store, sid)
                     if r["is_error"] and r["content"][0]["text"].startswith("EROFS"))
    # The event paths are the launcher's (the root on the host): the box's /mnt/memory is
    # a bind of it.
    check_ro_results(json.loads((out / "ro.json").read_text()), logged, f"{root}/docs")
    # Nothing of the host, of the database or of the other session is there at all.
    probed = json.loads((out / "probe.json").read_text())
    assert all(r == [errno.ENOENT, errno.ENOENT] for r in probed.values()), probed
    assert (out / "net").read_text().strip() == str(errno.ENETUNREACH)
    # The session API, through its socket bound in: the session's stores, nothing else.
    probe_result(out)


def test_remote_session_as_an_unprivileged_user(root_user, agent_user, tmp_path: Path,
                                                shared: Path):
    """--user with --url: the mounts are remote mounts of a memfs server, with the same
    owner, modes and refusals."""
    from tests.support.server import start_server, stop_server

    server = start_server(tmp_path, "--api-key", "sk-sandbox")
    try:
        store = Store(tmp_path / "memfs.db")  # the server's database, for the checks
        notes, docs, secrets = three_stores(store)
        x = shared / "x"
        x.mkdir(mode=0o777)
        x.chmod(0o777)
        probe_cmd = f"{PY} -c '{API_PROBE.replace(chr(39), chr(34))}' {notes} {docs} {secrets}"
        script = f"""
        id -u > {x}/uid
        env > {x}/env
        stat -c '%U %a' /mnt/memory/notes/a.md /mnt/memory/docs/a.md > {x}/stat
        sed -i 's/alpha/remote/' /mnt/memory/notes/a.md
        echo x 2> {x}/ro.err > /mnt/memory/docs/a.md || true
        {probe_cmd} > {x}/api.json 2> {x}/api.err
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))}
        env.update(MEMFS_URL=server.url, MEMFS_API_KEY="sk-sandbox")
        done = subprocess.run(
            [*MEMFS, "run", "--store", notes, "--store", f"{docs}:read_only", "--user", AGENT,
             "--", "sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert (x / "uid").read_text().strip() == str(agent_user.pw_uid)
        assert (x / "stat").read_text().splitlines() == [f"{AGENT} 600", f"{AGENT} 600"]
        assert store.memories.get_by_path(notes, "/a.md").content == "remote\n"
        assert "Read-only file system" in (x / "ro.err").read_text()
        assert store.memories.get_by_path(docs, "/a.md").content == "read me\n"
        # The agent held the server's URL and a token of its session, never the server key.
        env_text = (x / "env").read_text()
        assert "sk-sandbox" not in env_text
        agent_env = agent_env_names(env_text)
        assert agent_env["MEMFS_URL"] == server.url
        token = agent_env["MEMFS_API_KEY"]
        assert token.startswith("memfs_session_")
        found = probe_result(x)
        assert found["stores"] == sorted([notes, docs])
        sid = store.sessions.list().data[0].id
        m = store.memories.get_by_path(notes, "/by-token.md")
        assert store.versions.list(notes, memory_id=m.id).data[0].created_by == (
            Actor.session(sid))
        assert [mm.path for mm in store.memories.tree(secrets)] == ["/s.md"]
        # Refused once the session ended.
        import httpx

        r = httpx.get(f"{server.url}/v1/memory_stores/{notes}", headers={"x-api-key": token})
        assert r.status_code == 401 and "ended" in r.json()["error"]["message"], r.text
        store.close()
    finally:
        assert stop_server(server) == 0


# -- the agent's credentials (issue 19 §1) -------------------------------------------------------

#: Run as the agent (stdlib only): what its MEMFS_URL / MEMFS_API_KEY open. argv: the ids of
#: the read_write store, the read_only one and one the session was never given. Prints each
#: call's HTTP status as JSON (and the ids the store list shows).
API_PROBE = r"""
import http.client, json, os, socket, sys, urllib.parse
url, key = os.environ["MEMFS_URL"], os.environ["MEMFS_API_KEY"]
rw, ro, other = sys.argv[1:4]
class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("memfs.local")
        self.unix_path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)
def call(method, path, body=None):
    if url.startswith("unix:"):
        c = Unix(url[len("unix:"):])
    else:
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"x-api-key": key, "content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return r.status, json.loads(data) if data else None
out = {}
ms = "/v1/memory_stores/"
new = {"path": "/by-token.md", "content": "written with the session token"}
out["read rw"] = call("GET", ms + rw + "/memories")[0]
out["read ro"] = call("GET", ms + ro + "/memories")[0]
out["read other"] = call("GET", ms + other + "/memories")[0]
out["write rw"] = call("POST", ms + rw + "/memories", new)[0]
out["write ro"] = call("POST", ms + ro + "/memories", new)[0]
out["write other"] = call("POST", ms + other + "/memories", new)[0]
out["delete other"] = call("DELETE", ms + other)[0]
out["create store"] = call("POST", "/v1/memory_stores", {"name": "mine"})[0]
out["stores"] = sorted(s["id"] for s in call("GET", "/v1/memory_stores")[1]["data"])
print(json.dumps(out))
"""

#: What API_PROBE must see: the session's stores with their access, nothing else.
PROBE_EXPECTED = {"read rw": 200, "read ro": 200, "read other": 404, "write rw": 200,
                  "write ro": 403, "write other": 404, "delete other": 404,
                  "create store": 403}


def three_stores(store: Store) -> tuple[str, str, str]:
    notes, docs = two_stores(store)
    secrets = store.stores.create("Secrets")
    store.memories.create(secrets.id, "/s.md", "never for the agent\n", actor=Actor.user("u"))
    return notes, docs, secrets.id


def agent_env_names(env_dump: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in env_dump.splitlines() if "=" in ln)


@pytest.mark.parametrize("isolation", ["namespace", "none"])
def test_the_agent_holds_its_session_token_and_no_database(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path, isolation: str,
):
    """A local session: the agent gets no database path (nor could it read the file), and
    what it holds -- a session token for the API the launcher serves on a unix socket --
    opens only its attached stores with their access."""
    notes, docs, secrets = three_stores(store)
    x = shared / "x"
    x.mkdir(mode=0o777)
    x.chmod(0o777)
    db = tmp_path / "memfs.db"
    script = (f"env > {x}/env\n"
              f"{PY} -c '{API_PROBE.replace(chr(39), chr(34))}' {notes} {docs} {secrets} "
              f"> {x}/api.json 2> {x}/api.err\n"
              f"head -c 16 {db} > {x}/head 2>&1; echo $? > {x}/head.rc\n")
    args = ["--store", "Notes", "--store", "Docs:read_only", "--user", AGENT,
            "--isolation", isolation]
    if isolation == "none":
        args += ["--root", str(shared / "root")]
    done = memfs_run(db, *args, "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    sid = store.sessions.list().data[0].id
    env = agent_env_names((x / "env").read_text())
    assert "MEMFS_DB" not in env and str(db) not in (x / "env").read_text()
    assert env["MEMFS_URL"].startswith("unix:")
    assert env["MEMFS_API_KEY"].startswith("memfs_session_")
    assert (x / "head.rc").read_text().strip() != "0"  # and the file is out of reach
    found = probe_result(x)
    assert found["stores"] == sorted([notes, docs])
    m = store.memories.get_by_path(notes, "/by-token.md")
    assert store.versions.list(notes, memory_id=m.id).data[0].created_by == Actor.session(sid)
    assert [mm.path for mm in store.memories.tree(secrets)] == ["/s.md"]
    assert store.memories.get_by_path(docs, "/a.md").content == "read me\n"
    # Gone with the session: the socket, and the token itself.
    assert not os.path.exists(env["MEMFS_URL"][len("unix:"):])
    with pytest.raises(Exception, match="the session ended"):
        store.sessions.grant(env["MEMFS_API_KEY"])


def test_an_agent_that_could_read_the_database_is_refused(
    root_user, agent_user, shared: Path,
):
    """A database the agent's user could read (here 0644 in a directory anyone may enter):
    the session is refused before anything is created, in one line that says the fix."""
    db = shared / "open.db"
    s = Store(db)
    s.stores.create("Notes")
    s.close()
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if p.exists():
            p.chmod(0o644)
    done = memfs_run(db, "--store", "Notes", "--user", AGENT, "--", "true")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"--user {AGENT} could read the database {db}" in lines[0]
    assert f"chmod 600 {db}" in lines[0]
    with Store(db) as s:
        assert s.sessions.list().data == []
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if p.exists():
            p.chmod(0o600)
    done = memfs_run(db, "--store", "Notes", "--user", AGENT, "--", "true")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("how", ["file", "directory", "ancestor"])
def test_an_agent_that_could_change_the_database_is_refused(
    root_user, agent_user, shared: Path, how: str,
):
    """A database the agent cannot read but could change: a file it may write (0602), or a
    directory it may write (0777, not sticky), its own or one above it, where it could
    rename the database (or its directory) away and put another in its place. Refused like a
    readable one, with the fix; a sticky directory (/tmp) is fine, as other users cannot
    touch what is in it."""
    up = shared / "up"
    up.mkdir(mode=0o755)
    d = up / "dbdir"
    d.mkdir(mode=0o755)
    db = d / "x.db"
    with Store(db) as s:
        s.stores.create("Notes")
    if how == "file":
        db.chmod(0o602)
    else:
        (d if how == "directory" else up).chmod(0o777)
    done = memfs_run(db, "--store", "Notes", "--user", AGENT, "--", "true")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"--user {AGENT} could change the database {db}" in lines[0]
    assert {"file": f"chmod 600 {db}", "directory": f"chmod 755 {d}",
            "ancestor": f"chmod 755 {up}"}[how] in lines[0]
    with Store(db) as s:
        assert s.sessions.list().data == []
    db.chmod(0o600)
    d.chmod(0o1777)
    up.chmod(0o755)
    done = memfs_run(db, "--store", "Notes", "--user", AGENT, "--", "true")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("what", ["--api-key", "--db"])
def test_a_secret_on_the_launcher_s_command_line_is_refused_for_another_user(
    root_user, agent_user, tmp_path: Path, what: str,
):
    """The launcher's command line is anyone's to read (`ps`, /proc/PID/cmdline): a server key
    (`memfs --api-key KEY run --user agent`) or a PostgreSQL password in `--db` handed it to
    the agent all the same. With --user the session is refused, in one line that says where
    to put it instead; the secret itself is not printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))}
    if what == "--api-key":
        creds = ["--url", "http://127.0.0.1:9", "--api-key", "sk-visible-secret"]
        fix = "$MEMFS_API_KEY"
    else:
        creds = ["--db", "postgresql://memfs:sk-visible-secret@127.0.0.1:9/memfs"]
        fix = "$MEMFS_DB"
    done = subprocess.run([*MEMFS, *creds, "run", "--store", "Notes", "--user", AGENT, "--",
                           "true"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "command line" in lines[0] and fix in lines[0], lines[0]
    assert "sk-visible-secret" not in done.stderr


# -- a clone in a private directory ------------------------------------------------------------

#: The tests whose agent side reads files of the repository (issue 19: from a clone in a 0700
#: directory they failed with JSONDecodeError and "bwrap: Can't find source path").
AGENT_READS_THE_REPO = "test_run_as_an_unprivileged_user or test_bubblewrap_sandbox_sees_only"


def test_the_agent_side_needs_nothing_of_a_private_clone(root_user, agent_user, tmp_path):
    """The tests above, run from a copy of the repository in a 0700 directory (where the
    agent's user cannot enter): what the agent runs must be put where it can read it."""
    if os.environ.get("MEMFS_PRIVATE_CLONE"):
        pytest.skip("already running in the private clone")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    clone = copy_of_the_repo(private / "memfs")
    assert probe(agent_user.pw_uid, clone / "tests") == {
        str(clone / "tests"): [errno.EACCES, errno.EACCES]}
    env = {**os.environ, "MEMFS_PRIVATE_CLONE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration/test_sandbox.py", "-q",
         "-p", "no:cacheprovider", "-k", AGENT_READS_THE_REPO],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout, done.stdout[-2000:]
