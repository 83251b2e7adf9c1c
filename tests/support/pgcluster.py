"""A throwaway PostgreSQL cluster for the tests: Debian's ``postgresql`` server binaries,
``initdb`` into a temporary directory, listening only on a unix socket in that directory, run
for one test session and removed after it. No mocks: the tests talk to a real server.

As root, the cluster is made and run as the unprivileged ``nobody`` (``initdb`` and
``postgres`` refuse to run as root); the test process connects as the cluster's superuser
``postgres`` through the socket (``trust`` authentication, only the socket's directory can
reach it).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse

#: Where Debian puts each major version's server binaries.
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"


def find_bin() -> str | None:
    """The newest installed PostgreSQL server's bin directory (None: not installed)."""
    dirs = [d for d in glob.glob(PG_BIN_GLOB) if os.path.exists(os.path.join(d, "initdb"))]
    if not dirs:
        initdb = shutil.which("initdb")
        return os.path.dirname(initdb) if initdb else None
    return max(dirs, key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A running cluster; :meth:`url` names a database in it."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        # As root the cluster runs as nobody, who must reach it: /tmp, not a private TMPDIR.
        self.dir = tempfile.mkdtemp(prefix="memfs-pg-",
                                    dir="/tmp" if os.geteuid() == 0 else None)
        self.data = os.path.join(self.dir, "data")
        self.port = _free_port()
        self._user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self._user = ["runuser", "-u", "nobody", "--"]
        os.chmod(self.dir, 0o700)
        self._names = itertools.count(1)
        self._opts = ""  # the server's settings (start): a restart keeps them

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [*self._user, *argv], check=True, cwd=self.dir, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )

    def start(self, durable: bool = False, tcp: bool = False) -> None:
        """``durable``: fsync and synchronous commits on, as in production (for measurements);
        else off, for speed (a test cluster has nothing to keep after a crash). ``tcp``: also
        listen on 127.0.0.1 at :attr:`port` (``scripts/load --db-rtt-ms`` reaches it through
        a delaying proxy), else on the socket only."""
        self._run(
            os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres",
            "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
        )
        listen = "127.0.0.1" if tcp else ""
        opts = (
            f"-c listen_addresses='{listen}' -c unix_socket_directories={self.dir} "
            f"-c port={self.port} -c max_connections=300 -c shared_buffers=32MB"
        )
        if not durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._opts = opts
        self._pg_ctl_start()

    def _pg_ctl_start(self) -> None:
        self._run(
            os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l",
            os.path.join(self.dir, "log"), "-o", self._opts, "-w", "-t", "60", "start",
        )

    def crash(self) -> None:
        """Stop the server as a crash would (``pg_ctl stop -m immediate``: no checkpoint, the
        clients cut off); :meth:`restart` recovers from its WAL. Only a ``durable`` cluster
        keeps what it acknowledged."""
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "immediate",
                  "-w", "stop")

    def restart(self) -> None:
        """Start the server again after :meth:`crash` (crash recovery first)."""
        self._pg_ctl_start()

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        host = urllib.parse.quote(self.dir, safe="")
        return f"postgresql://postgres@{host}:{self.port}/{dbname}"

    def tcp_url(self, dbname: str = "postgres", port: int | None = None) -> str:
        """``dbname`` over TCP (a cluster started with ``tcp``), at ``port`` if given (a proxy
        in front of it)."""
        return f"postgresql://postgres@127.0.0.1:{port or self.port}/{dbname}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self, template: str | None = None) -> str:
        """A new, empty database (a copy of ``template`` if given); returns its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def empty_database(self, name: str) -> None:
        """Delete every row of a migrated database and restart its sequences: as new, in a
        few milliseconds (a CREATE DATABASE takes a few hundred)."""
        import psycopg

        with psycopg.connect(self.url(name), autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename NOT LIKE '\\_%'")]
            with conn.transaction():
                # No triggers: a memory's delete would queue it for the words index again,
                # in whatever order the tables come.
                conn.execute("SET LOCAL session_replication_role = replica")
                for t in tables:
                    conn.execute(f'DELETE FROM "{t}"')
                for (seq,) in conn.execute(
                        "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
                ).fetchall():
                    conn.execute(f'ALTER SEQUENCE "{seq}" RESTART')

    def drop_database(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: Run beside the test process: when it is gone however it ended (a kill, a CI timeout),
#: stop its cluster and remove the directory, so no server outlives the tests.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, user, pg_ctl, data, top = int(sys.argv[1]), sys.argv[2:-3], *sys.argv[-3:]
while os.path.exists(top):
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        subprocess.run([*user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
        shutil.rmtree(top, ignore_errors=True)
        break
    time.sleep(0.5)  # a poll: nothing wakes a process when another it did not start ends
"""


#: The watchdogs started, held so that none is collected while it runs (which Python reports
#: as a ResourceWarning, "subprocess ... is still running", in whichever test it happens).
_watchdogs: list[subprocess.Popen[bytes]] = []


def _watch(cluster: Cluster) -> None:
    import sys

    _watchdogs.append(subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *cluster._user,
         os.path.join(cluster.bindir, "pg_ctl"), cluster.data, cluster.dir],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, cwd="/",
    ))


def start_cluster(durable: bool = False, tcp: bool = False) -> Cluster | None:
    """A started cluster (:meth:`Cluster.start`), or None when PostgreSQL is not installed."""
    bindir = find_bin()
    if bindir is None:
        return None
    cluster = Cluster(bindir)
    try:
        _watch(cluster)
        cluster.start(durable, tcp)
    except BaseException:
        cluster.stop()
        raise
    deadline = time.monotonic() + 30
    while True:  # pg_ctl -w waited for it; a first connection confirms
        try:
            cluster.admin("SELECT 1")
            return cluster
        except Exception:
            if time.monotonic() > deadline:
                cluster.stop()
                raise
            time.sleep(0.1)
