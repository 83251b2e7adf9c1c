"""Agents of two sessions, and what an agent sees of the host (issue 38, S7 and S2).

An agent is untrusted code. In the private namespace (the launcher is root) each agent gets a
PID namespace of its own with its own ``/proc``: it cannot read another agent's environment
(its session token) or walk into its mounts through ``/proc/PID/root``, and sees none of the
host's command lines. ``--network none`` gives it a network with only loopback. Without
namespaces, a session refuses to start beside another session's agent of the same user.

Real sessions, real users: root is needed (the tests skip without it locally and fail in CI).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.models import Actor
from memfs.store import Store
from tests.support import need, wait_until
from tests.support.session import AGENT, MEMFS, memfs_run
from tests.support.session import AGENT_PY as PY

pytestmark = pytest.mark.fuse


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "memfs.db")
    yield s
    s.close()

#: The agent's look around: every session id and token in the environment of a process it
#: can see, and what it reaches of other mounts through ``/proc/PID/root``.
SNOOP = r"""
import json, os, sys
mine = os.environ["MEMFS_SESSION_ID"]
out = {"sessions": [], "tokens": 0, "reached": [], "wrote": [], "pids": [], "cmdlines": []}
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    out["pids"].append(int(p))
    try:
        with open(f"/proc/{p}/cmdline", "rb") as f:
            out["cmdlines"].append(f.read().replace(b"\0", b" ").decode(errors="replace"))
    except OSError:
        pass
    try:
        with open(f"/proc/{p}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    except OSError:
        env = {}
    sid = env.get(b"MEMFS_SESSION_ID", b"").decode()
    if sid and sid != mine:
        out["sessions"].append(sid)
        out["tokens"] += b"MEMFS_API_KEY" in env
    secret = f"/proc/{p}/root/mnt/memory/secret/hidden/secret.md"
    try:
        with open(secret) as f:
            out["reached"].append(f.read())
    except OSError:
        pass
    try:
        with open(f"/proc/{p}/root/mnt/memory/secret/planted.md", "w") as f:
            f.write("from another session\n")
        out["wrote"].append(p)
    except OSError:
        pass
print(json.dumps(out))
"""


def test_an_agent_cannot_reach_another_session_of_the_same_user(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path,
):
    """S7: two sessions whose agents are the same user; A looks for B through /proc."""
    secret = store.stores.create("Secret")
    store.memories.create(secret.id, "/hidden/secret.md", "B's secret\n",
                        actor=Actor.user("user_x"))
    store.stores.create("Notes")
    x = shared / "x"
    x.mkdir(mode=0o777)
    x.chmod(0o777)
    db = tmp_path / "memfs.db"
    b = subprocess.Popen(
        [*MEMFS, "--db", str(db), "run", "--store", "Secret", "--user", AGENT, "--",
         "sh", "-c", f"touch {x}/b.ready; while [ ! -e {x}/b.go ]; do sleep 0.02; done"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))})
    try:
        wait_until(lambda: (x / "b.ready").exists() or b.poll() is not None or None, 30)
        assert b.poll() is None, b.stderr.read() if b.stderr else ""
        snoop = x / "snoop.py"
        snoop.write_text(SNOOP)
        snoop.chmod(0o644)
        done = memfs_run(db, "--store", "Notes", "--user", AGENT, "--",
                         PY, str(snoop))
    finally:
        (x / "b.go").touch()
        b.communicate(timeout=30)  # and its pipe closed
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["sessions"] == [] and seen["tokens"] == 0, seen
    assert seen["reached"] == [] and seen["wrote"] == [], seen
    assert [m.path for m in store.memories.tree(secret.id)] == ["/hidden/secret.md"]


def test_an_agent_sees_none_of_the_host_s_processes(root_user, agent_user, store: Store,
                                                    tmp_path: Path, shared: Path):
    """S2: the agent's /proc holds its own processes only: not the launcher's command line,
    not this test's, not a server's that had its key there."""
    store.stores.create("Notes")
    x = shared / "x"
    x.mkdir(mode=0o777)
    snoop = x / "snoop.py"
    snoop.write_text(SNOOP)
    snoop.chmod(0o644)
    host = subprocess.Popen(["sh", "-c", "sleep 60; : --api-key=the-host-s-secret"])
    try:
        done = memfs_run(tmp_path / "memfs.db", "--store", "Notes", "--user", AGENT, "--",
                         "sh", "-c", f"{PY} {snoop}")
    finally:
        host.kill()
        host.wait()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert len(seen["pids"]) <= 3, seen["cmdlines"]  # the init, sh, python
    assert not [c for c in seen["cmdlines"]
                if "the-host-s-secret" in c or "pytest" in c or "--db" in c], seen


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    """A TCP server on the host's loopback, which only the host's network reaches."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(s.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield s, s.getsockname()[1]
    stop.set()
    t.join()
    for c in accepted:
        c.close()
    s.close()


CONNECT = r"""
import json, os, socket, sys
out = {}
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    out["tcp"] = 0
except OSError as e:
    out["tcp"] = e.errno or -1
out["interfaces"] = sorted(name for _, name in socket.if_nameindex())
u = socket.socket(socket.AF_UNIX)
try:
    u.connect(os.environ["MEMFS_URL"][len("unix:"):])
    out["api"] = 0
except OSError as e:
    out["api"] = e.errno
print(json.dumps(out))
"""


@pytest.mark.parametrize("network", ["host", "none"])
def test_network_none_leaves_the_agent_only_its_session_api(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path, listener, network: str,
):
    """S2: ``--network none``: no loopback of the host (a server there, with whatever it
    holds, is out of reach), no interface but ``lo``; the session API (a unix socket)
    still works."""
    _, port = listener
    store.stores.create("Notes")
    script = shared / "connect.py"
    script.write_text(CONNECT)
    script.chmod(0o644)
    done = memfs_run(tmp_path / "memfs.db", "--store", "Notes", "--user", AGENT,
                     "--network", network, "--", PY, str(script), str(port))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["api"] == 0
    if network == "none":
        assert seen["tcp"] != 0 and seen["interfaces"] == ["lo"], seen
    else:
        assert seen["tcp"] == 0 and len(seen["interfaces"]) > 1, seen


def test_network_none_needs_the_namespace(root_user, store: Store, tmp_path: Path):
    store.stores.create("Notes")
    done = memfs_run(tmp_path / "memfs.db", "--store", "Notes", "--isolation", "none",
                     "--network", "none", "--", "true")
    assert done.returncode == 1
    assert "--network none needs the private namespace" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("first", ["namespace", "none"])
def test_an_agent_of_the_same_user_in_the_host_s_pid_namespace_is_told_of(
    root_user, agent_user, store: Store, tmp_path: Path, shared: Path, first: str,
):
    """As root with ``--isolation none`` the agent stays in the host's PID namespace, where
    it and another session's agent of the same user could read each other's token: the
    later session warns, whichever of the two lacks the namespace (and runs: a container
    runtime as CMD isolates its agent itself, as docs/sessions.md shows)."""
    store.stores.create("Notes")
    x = shared / "x"
    x.mkdir(mode=0o777)
    x.chmod(0o777)
    db = tmp_path / "memfs.db"
    first_args = ["--isolation", "none", "--root", str(shared / "r1")] if first == "none" \
        else []
    a = subprocess.Popen(
        [*MEMFS, "--db", str(db), "run", "--store", "Notes", "--user", AGENT, *first_args,
         "--", "sh", "-c", f"touch {x}/a.ready; while [ ! -e {x}/a.go ]; do sleep 0.02; done"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))})
    try:
        wait_until(lambda: (x / "a.ready").exists() or a.poll() is not None or None, 30)
        assert a.poll() is None, a.stderr.read() if a.stderr else ""
        second = ["--isolation", "none", "--root", str(shared / "r2")] if first != "none" \
            else []
        told = memfs_run(db, "--store", "Notes", "--user", AGENT, *second, "--", "true")
        # Another user beside it: nothing to say.
        other = memfs_run(db, "--store", "Notes", "--user", "65533", "--isolation", "none",
                          "--root", str(shared / "r3"), "--", "true")
    finally:
        (x / "a.go").touch()
        a.communicate(timeout=30)  # and its pipe closed
    assert told.returncode == 0, told.stderr
    assert "warning: another session's agent runs as" in told.stderr, told.stderr
    assert other.returncode == 0 and other.stderr == "", other.stderr
    # Once the first has ended, nothing to say.
    again = memfs_run(db, "--store", "Notes", "--user", AGENT, *second, "--", "true")
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_the_agent_gets_the_default_signal_actions(root_user, store: Store, tmp_path: Path):
    """The init is Python, which ignores SIGPIPE and SIGXFSZ: CMD must not inherit that (a
    pipeline whose reader went away would not end, or print 'Broken pipe')."""
    store.stores.create("Notes")
    done = memfs_run(tmp_path / "memfs.db", "--store", "Notes", "--", "sh", "-c",
                     "grep SigIgn /proc/self/status; yes | head -1")
    assert done.returncode == 0, done.stderr
    ignored = int(done.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), done.stdout
    assert done.stdout.splitlines()[1:] == ["y"] and "Broken pipe" not in done.stderr


def test_a_sigint_the_launcher_passes_on_reaches_the_command(root_user, store: Store,
                                                              tmp_path: Path, shared: Path):
    """`memfs run` in the background of an interactive shell, on a terminal, gets a SIGINT
    (kill -INT %1): it passes it on, and CMD in its PID namespace gets it. The init cannot
    tell it from the terminal's (there getpgrp() and tcgetpgrp() of outside groups are both
    0), so the launcher relays it."""
    need(shutil.which("script") is not None, "script (util-linux), for a terminal")
    store.stores.create("Notes")
    got, ready = shared / "got-int", shared / "ready"
    job = shared / "job.sh"
    cmd = f"trap 'touch {got}; exit 7' INT; touch {ready}; while :; do sleep 0.05; done"
    job.write_text(
        f"{' '.join(MEMFS)} --db {tmp_path / 'memfs.db'} run --store Notes -- "
        f"sh -c \"{cmd}\" &\n"
        f"echo $! > {shared / 'launcher.pid'}\n"
        f"for _ in $(seq 600); do [ -e {ready} ] && break; sleep 0.05; done\n"
        "kill -INT $!; wait $!; echo \"rc=$?\"\n")
    try:
        done = subprocess.run(
            ["script", "-qec", f"bash --norc --noprofile -i {job}", "/dev/null"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))})
    finally:  # a launcher that never passed the SIGINT on still runs: end its session
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((shared / "launcher.pid").read_text()), signal.SIGTERM)
    assert got.exists(), done.stdout + done.stderr
    assert "rc=7" in done.stdout, done.stdout


def test_network_none_with_a_server_is_refused(root_user, tmp_path: Path):
    """The agent could not reach the server its MEMFS_URL names: refused before anything."""
    done = subprocess.run(
        [*MEMFS, "--url", "http://127.0.0.1:9", "run", "--store", "Notes", "--network", "none",
         "--", "true"], capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))})
    assert done.returncode == 1, done.stderr
    assert "--network none leaves the agent no way to the server" in done.stderr
    assert "Traceback" not in done.stderr
