#!/usr/bin/env python3
"""Benchmark memfs against tmpfs and a Python FUSE floor with one standard workload.

Run it through ``scripts/bench`` (needs root: it mounts tmpfs and FUSE filesystems).

Targets, all mounted at once and measured with the same workload in their own fresh
directories, taking turns (pass 1 on each, then pass 2 on each, ...; --repeat gives medians):

* ``tmpfs``: a tmpfs mounted for the run; the kernel-only upper bound.
* ``floor``: scripts/passthroughfs.py (pyfuse3 on trio) over a tmpfs; what any Python FUSE
  daemon costs before it does real work. memfs cannot reasonably beat it.
* ``ceiling``: scripts/ceilingfs.py, a pyfuse3 filesystem that does no work at all (contents in
  dicts, ``keep_cache``, 300 s timeouts): the limit of any pyfuse3 daemon.
* ``memfs``: ``memfs mount`` of a fresh store in a fresh database (``MEMFS_DB``).
* ``cfloor`` (only when asked: ``--targets cfloor,floor,ceiling,memfs``): libfuse's own
  ``passthrough_ll`` example, in C on libfuse's low-level API, built at the start of the run
  from the source libfuse3-dev installs (``cc``, ``pkg-config fuse3``), run single-threaded
  (``-s``, as memfs serves requests on one thread) over a tmpfs with the floor's caching (300 s
  timeouts, ``keep_cache``): what a request costs when the daemon's loop is not Python.
* ``s3ql`` (only when asked: ``--targets floor,s3ql,memfs``): S3QL 6.3.0, the closest peer of
  memfs (pyfuse3 + trio, metadata in SQLite), built once from its source (``--s3ql-src DIR`` or
  ``MEMFS_S3QL_SRC``; scripts/bench_s3ql.py) into a cached venv, ``mkfs.s3ql --plain`` on a
  ``local://`` backend on tmpfs, mounted with ``--compress none`` and its cache on tmpfs, and
  unmounted with ``umount.s3ql``.

The order of --targets is the order they are set up in and run in: pass 1 runs them in that
order, and each later pass starts one target further (pass 2 on ``floor,s3ql,memfs`` runs
``s3ql,memfs,floor``), so a reversed --targets gives each target other neighbours.

Workload (sizes scale with --files): N files of 2,000 bytes in 10 directories; (a) create all,
(b) warm tree walk with stat, (c) cold read of every file, (d) warm read of every file,
(e) overwrite a quarter of the files, (f) rename another quarter, (g) ``grep -r`` over the tree,
(h) unlink all; (i) N files created by one writer process and (j) by 8 writer processes at once
(each in its own directory; both removed untimed); then (k) write, (l) cold read and (m) warm
read of 50 files of 100,000 bytes; (n) a warm ``ls -l`` (listdir + lstat of every entry, the
median of 21 after one untimed) of the 100 versions of one file in memfs's
``.history/FILE/``, and of a directory of 100 files on the other targets. Phases (i)-(n) run
after (h) because a memfs store holds at most 2,000 memories. Ratios are speed ratios (>1: the
first is faster).

Then, for memfs only (--no-sessions skips it, --sessions-only runs nothing else): 8 stores of N
files of 2,000 bytes are imported into a fresh database; ``memfs run`` (``--isolation namespace`` as
root: one daemon per session; ``--isolation none`` otherwise or when asked: one per store) with 1
and with 8 of them times launch to the command's first instruction (the command writes
$EPOCHREALTIME), and the whole round trip of ``memfs run … -- CMD``; then again with 8 stores that
each pin 4,000 characters (a memory whose front matter says ``pinned: true``, SPEC §9: the launcher
records them and writes those within the session's budget into the prompt file, which the command
checks); then (unless --starts-only) two sessions of all 8 give the memory of the session's daemons
(every process below `memfs run` that is not the command's nor an indexer process, however many
there are; VmRSS and Pss from /proc) and of its indexer process (``memfs.daemons.indexworker``),
stage by stage (``SessionBench.measure_memory``): over the stores as imported (not indexed: the
indexer at work throughout), idle and once every file is read; then over the same stores marked
indexed, idle, every file read, after a search by meaning, and the time a new memory takes to be
found by meaning.

"Cold" means a fresh mount for the FUSE targets (daemon restarted: no kernel dentry, attribute
or page cache for the mount, no daemon state); tmpfs has no colder state than warm. With
--drop-caches the OS caches are dropped as well (sync; echo 3 > /proc/sys/vm/drop_caches).

Every mount made here is undone on exit, including Ctrl-C and SIGTERM: daemons get SIGTERM,
then ``fusermount3 -u``, then ``fusermount3 -uz``; tmpfs gets ``umount``, then ``umount -l``.
The daemons run in their own sessions so that a terminal Ctrl-C reaches only this process,
which then shuts them down in order. A SIGKILL of this process can still leave mounts behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

import bench_s3ql  # scripts/bench_s3ql.py: S3QL's source and build, for the s3ql target

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
PASSTHROUGHFS = REPO / "scripts" / "passthroughfs.py"
CEILINGFS = REPO / "scripts" / "ceilingfs.py"
ALL_TARGETS = ("tmpfs", "floor", "ceiling", "memfs")
#: Targets run only when --targets names them.
EXTRA_TARGETS = ("cfloor", "s3ql")
#: The cfloor target's source: libfuse's passthrough_ll example, as libfuse3-dev installs it.
PASSTHROUGH_LL_SOURCE = Path("/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c")
WRITERS = 8
#: Versions of the one file whose .history directory phase (n) lists.
HISTORY_VERSIONS = 100
HISTORY_REPEATS = 21
SESSION_STORES = 8
#: The characters each store pins in the pinned sessions (a store's default budget), and the
#: session's budget (memfs.rules.SESSION_PINNED_BUDGET), which shows 4 of the 8.
PINNED_CHARS = 4_000
SESSION_PINNED_BUDGET = 16_000
#: The memory each store pins (the first of those SessionBench.prepare imports).
PINNED_PATH = "/d00/m00000.md"
NEEDLE = "zebra-quartz-needle"
_INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class TargetError(Exception):
    """A target could not be set up, mounted or torn down."""


class WorkloadError(Exception):
    """The workload saw wrong data or an unexpected result on a target."""


# -- mounts ---------------------------------------------------------------------------------


def _unescape_mount_field(value: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo octal.
    return value.encode().decode("unicode_escape") if "\\" in value else value


def _mount_table() -> dict[str, str]:
    """Return {mount point: fstype} from /proc/self/mountinfo (later mounts win)."""
    table: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            table[_unescape_mount_field(fields[4])] = fields[sep + 1]
    return table


def is_mounted(path: Path) -> bool:
    # Not os.path.ismount: a FUSE mount whose daemon died fails lstat() with ENOTCONN, which
    # ismount reports as "not a mount" although the kernel still has it.
    return str(path) in _mount_table()


def fstype_of(path: Path) -> str:
    """Filesystem type holding path (longest mount point prefix)."""
    path = path.resolve()
    best, best_type = "", "unknown"
    for mount_point, fstype in _mount_table().items():
        if (path == Path(mount_point) or Path(mount_point) in path.parents) and len(
            mount_point
        ) >= len(best):
            best, best_type = mount_point, fstype
    return best_type


def _run_quiet(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll predicate with a short backoff until it holds or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def force_unmount(path: Path, fuse: bool) -> None:
    """Unmount path if it is still mounted, escalating to a lazy unmount."""
    if not is_mounted(path):
        return
    attempts = (
        [["fusermount3", "-u", str(path)], ["fusermount3", "-uz", str(path)]]
        if fuse
        else [["umount", str(path)], ["umount", "-l", str(path)]]
    )
    for cmd in attempts:
        result = _run_quiet(cmd)
        if _wait_until(lambda: not is_mounted(path), 2.0):
            log.debug("unmounted %s with %s", path, " ".join(cmd[:2]))
            return
        log.warning("%s failed: %s", " ".join(cmd), result.stderr.strip() or result.returncode)
    log.error("could not unmount %s; run: fusermount3 -uz %s", path, path)


def mount_tmpfs(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    cmd = ["mount", "-t", "tmpfs", "-o", "size=1g,mode=0755", "memfs-bench", str(path)]
    result = _run_quiet(cmd)
    if result.returncode != 0:
        raise TargetError(f"mount -t tmpfs {path} failed: {result.stderr.strip()}")


_drop_caches_warned = False


def drop_os_caches() -> None:
    global _drop_caches_warned
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as exc:
        if not _drop_caches_warned:
            log.warning("cannot drop OS caches (%s); cold reads keep OS caches", exc)
            _drop_caches_warned = True


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold off Ctrl-C/SIGTERM/SIGHUP during cleanup, then re-raise one as KeyboardInterrupt.

    A second Ctrl-C while unmounting would otherwise abort the cleanup half-way and leave a
    mount behind, which is the one thing this harness must never do.
    """
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in _INTERRUPT_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:
            raise KeyboardInterrupt


# -- targets --------------------------------------------------------------------------------


@dataclass
class Options:
    workdir: Path
    drop_caches: bool
    mount_timeout: float
    stop_timeout: float
    memfs_cmd: str
    #: memfs run's --isolation for the session measurements: "namespace" (root: one daemon
    #: for the session) or "none" (one daemon per store).
    isolation: str = "none"
    #: The s3ql target's source (a tree or a git clone; None: only a cached build will do),
    #: and the directory its build is cached in (None: bench_s3ql.cache_root()).
    s3ql_src: Path | None = None
    s3ql_cache: Path | None = None


class Target:
    """A directory to run the workload in, with setup and guaranteed teardown.

    Subclasses register each cleanup on ``self._stack`` right after the matching setup, so
    that a failure half-way still undoes exactly what was done.
    """

    name = ""
    cold_meaning = ""
    #: What the filesystem keeps in its root that the workload did not make.
    own_entries: frozenset[str] = frozenset()

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.dir = opts.workdir / self.name
        self.info: dict[str, Any] = {}
        self.aborted: str | None = None
        self._stack = contextlib.ExitStack()

    @property
    def root(self) -> Path:
        raise NotImplementedError

    def __enter__(self) -> Target:
        self.dir.mkdir()
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with interrupts_deferred():
            self._stack.close()

    def _setup(self) -> None:
        raise NotImplementedError

    def make_cold(self) -> None:
        """Bring the target into its cold state (see cold_meaning)."""
        if self.opts.drop_caches:
            drop_os_caches()

    def abort(self, reason: str) -> None:
        """Called from the watchdog thread when a phase hangs: make blocked syscalls fail."""
        self.aborted = reason


class TmpfsTarget(Target):
    name = "tmpfs"
    cold_meaning = "no-op: tmpfs data lives in the page cache, so cold = warm"

    @property
    def root(self) -> Path:
        return self.dir / "mnt"

    def _setup(self) -> None:
        mount_tmpfs(self.root)
        self._stack.callback(force_unmount, self.root, False)


class FuseTarget(Target):
    """A target served by a FUSE daemon subprocess; cold means restarting it."""

    #: The daemon's exit statuses after the SIGTERM that stops it.
    stopped_statuses: tuple[int, ...] = (0,)

    def __init__(self, opts: Options) -> None:
        super().__init__(opts)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._starts = 0
        self.info["mount_seconds"] = []

    @property
    def root(self) -> Path:
        return self.dir / "mnt"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str] | None:
        return None

    def _log_path(self) -> Path:
        return self.dir / f"daemon-{self._starts}.log"

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self._log_path().read_text(errors="replace").strip()
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def start_daemon(self) -> None:
        self._starts += 1
        self._log = open(self._log_path(), "wb")  # noqa: SIM115 (closed in stop_daemon)
        t0 = time.perf_counter()
        self._proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            # Own session: a terminal Ctrl-C must not hit the daemon before we unmount in
            # order; the harness forwards shutdown itself.
            start_new_session=True,
        )
        proc = self._proc

        def ready() -> bool:
            if os.path.ismount(self.root):
                return True
            rc = proc.poll()
            # A daemon that forks into the background exits 0 before the mount appears.
            if rc is not None and rc != 0:
                raise TargetError(f"{self.name} daemon exited with status {rc} before mounting")
            return False

        if not _wait_until(ready, self.opts.mount_timeout):
            raise TargetError(f"{self.root} not mounted after {self.opts.mount_timeout:.0f} s")
        self.info["mount_seconds"].append(time.perf_counter() - t0)

    def stop_daemon(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.opts.stop_timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s daemon ignored SIGTERM for %.0f s, killing it",
                            self.name, self.opts.stop_timeout)  # fmt: skip
                self._kill(proc)
                proc.wait()
        if proc is not None and proc.returncode not in (*self.stopped_statuses, None):
            log.info("%s daemon exited with status %s", self.name, proc.returncode)
        if self._log is not None:
            self._log.close()
            self._log = None
        # After a clean exit the daemon has unmounted already; this only catches the rest.
        if _wait_until(lambda: not is_mounted(self.root), 1.0):
            return
        force_unmount(self.root, fuse=True)

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        # The daemon leads its own process group (start_new_session), so this reaches any
        # helper it started and nothing else.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def _start_mount(self) -> None:
        self.root.mkdir(exist_ok=True)
        self._stack.callback(self.stop_daemon)
        self.start_daemon()

    def make_cold(self) -> None:
        self.stop_daemon()
        super().make_cold()
        self.start_daemon()

    def abort(self, reason: str) -> None:
        super().abort(reason)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            # Closing /dev/fuse aborts the connection: blocked requests fail (ECONNABORTED).
            self._kill(proc)


class FloorTarget(FuseTarget):
    name = "floor"
    cold_meaning = (
        "passthroughfs restarted and remounted (empty kernel caches for the mount, fresh "
        "daemon); its backing tmpfs stays in RAM"
    )

    def _setup(self) -> None:
        self.source = self.dir / "source"
        mount_tmpfs(self.source)
        self._stack.callback(force_unmount, self.source, False)
        self._start_mount()

    def _command(self) -> list[str]:
        return [sys.executable, str(PASSTHROUGHFS), str(self.source), str(self.root)]


class CeilingTarget(FuseTarget):
    name = "ceiling"
    cold_meaning = (
        "the kernel told to forget the mount's entries, attributes and pages (SIGUSR1: "
        "pyfuse3.invalidate_entry/invalidate_inode); the daemon, which holds the only copy, "
        "keeps running"
    )

    @property
    def ack(self) -> Path:
        return self.dir / "cold.ack"

    def _setup(self) -> None:
        self._start_mount()

    def _command(self) -> list[str]:
        return [sys.executable, str(CEILINGFS), str(self.root), "--ack", str(self.ack)]

    def make_cold(self) -> None:
        # Restarting would lose the contents: ask the daemon to drop the kernel's caches.
        Target.make_cold(self)
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise TargetError("ceiling daemon is not running")
        self.ack.unlink(missing_ok=True)
        proc.send_signal(signal.SIGUSR1)
        if not _wait_until(self.ack.exists, self.opts.mount_timeout):
            raise TargetError("ceiling daemon did not confirm dropping the kernel caches")


class MemfsTarget(FuseTarget):
    name = "memfs"
    cold_meaning = (
        "memfs mount restarted (fresh daemon, empty kernel caches for the mount); the SQLite "
        "file stays in the OS page cache"
    )
    store = "bench"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Always the fresh local database: never a server named by the caller's environment.
        for var in ("MEMFS_URL", "MEMFS_API_KEY"):
            env.pop(var, None)
        env["MEMFS_DB"] = str(self.db)
        return env

    def _command(self) -> list[str]:
        return [self.opts.memfs_cmd, "mount", self.store, str(self.root)]

    def _setup(self) -> None:
        self.db = self.dir / "bench.db"
        self.info["db"] = str(self.db)
        self.info["db_fstype"] = fstype_of(self.dir)
        cmd = [self.opts.memfs_cmd, "stores", "create", self.store]
        try:
            result = subprocess.run(
                cmd, env=self._env(), capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"{' '.join(cmd)}: {exc}") from exc
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
            raise TargetError(f"`memfs stores create` exited {result.returncode}: {last[0]}")
        self._start_mount()


class CFloorTarget(FloorTarget):
    name = "cfloor"
    cold_meaning = (
        "passthrough_ll restarted and remounted (empty kernel caches for the mount, fresh "
        "daemon); its backing tmpfs stays in RAM"
    )
    # libfuse keeps the signal that ended its loop as the session's error, and passthrough_ll
    # then exits 1.
    stopped_statuses = (0, 1)

    def _setup(self) -> None:
        self.binary = self.dir / "passthrough_ll"
        build_passthrough_ll(self.binary)
        super()._setup()

    def _command(self) -> list[str]:
        # -o takes a comma-separated list: a source path with a comma cannot be said.
        if "," in str(self.source):
            raise TargetError(f"cfloor: the work directory {self.source} holds a comma")
        return [str(self.binary), "-f", "-s", "-o",
                f"source={self.source},timeout=300,cache=always", str(self.root)]  # fmt: skip


def build_passthrough_ll(binary: Path) -> None:
    """Compile libfuse's passthrough_ll example (:data:`PASSTHROUGH_LL_SOURCE`) to ``binary``.

    :raises TargetError: the source, the compiler or libfuse's development files are missing,
        or the build failed.
    """
    if not PASSTHROUGH_LL_SOURCE.is_file():
        raise TargetError(f"cfloor needs {PASSTHROUGH_LL_SOURCE} (apt install libfuse3-dev)")
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True,
                               text=True, timeout=60, check=True).stdout.split()  # fmt: skip
        subprocess.run(["cc", "-O2", str(PASSTHROUGH_LL_SOURCE), *flags, "-o", str(binary)],
                       capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or str(exc)
        if isinstance(detail, bytes):  # a TimeoutExpired's output is bytes even with text=True
            detail = detail.decode(errors="replace")
        raise TargetError(f"cfloor: cannot build passthrough_ll: {detail.strip()[-300:]}") from exc


class S3qlTarget(FuseTarget):
    """S3QL over a ``local://`` backend, its cache and the backend on one tmpfs."""

    name = "s3ql"
    cold_meaning = (
        "umount.s3ql, then mount.s3ql again (fresh daemon, empty kernel caches for the mount, "
        "S3QL's block cache emptied: a cold read fetches the block from the local:// backend); "
        "the backend and S3QL's SQLite metadata stay on their tmpfs"
    )
    own_entries = frozenset({"lost+found"})
    #: umount.s3ql returns when the daemon has written every dirty block to the backend.
    umount_timeout = 300.0

    def _setup(self) -> None:
        try:
            self.build = bench_s3ql.build(self.opts.s3ql_src, self.opts.s3ql_cache)
        except bench_s3ql.BuildError as exc:
            raise TargetError(f"s3ql: {exc}") from exc
        self.info.update(self.build.info)
        tmp = self.dir / "tmp"
        mount_tmpfs(tmp)
        self._stack.callback(force_unmount, tmp, False)
        self.bucket, self.cache, self.authfile = tmp / "bucket", tmp / "cache", tmp / "authinfo2"
        self.bucket.mkdir()
        self.cache.mkdir()
        # Its own (empty) credentials file and cache directory: nothing read or left in ~/.s3ql.
        self.authfile.touch(mode=0o600)
        cmd = [self.build.tool("mkfs.s3ql"), "--plain", "--quiet", *self._where(), self.url]
        try:
            result = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                                    timeout=120, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"mkfs.s3ql: {exc}") from exc
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
            raise TargetError(f"mkfs.s3ql exited {result.returncode}: {last[0]}")
        self._start_mount()

    @property
    def url(self) -> str:
        return f"local://{self.bucket}"

    def _where(self) -> list[str]:
        return ["--cachedir", str(self.cache), "--authfile", str(self.authfile)]

    def _env(self) -> dict[str, str]:
        return {**os.environ, **bench_s3ql.RUN_ENV}

    def _command(self) -> list[str]:
        # --fg: the harness owns the daemon's process (its log, its stop); --log none: to
        # stdout, which is the daemon log here.
        return [self.build.tool("mount.s3ql"), "--fg", "--compress", "none", "--log", "none",
                *self._where(), self.url, str(self.root)]  # fmt: skip

    def stop_daemon(self) -> None:
        # umount.s3ql, as S3QL is meant to be stopped (a SIGTERM makes it exit without writing
        # its dirty blocks); FuseTarget's SIGTERM and fusermount3 -u only if that fails.
        proc = self._proc
        if proc is not None and proc.poll() is None:
            cmd = [self.build.tool("umount.s3ql"), "--log", "none", str(self.root)]
            try:
                # Not mounted: an umount.s3ql cut short has unmounted it already, and the
                # daemon is still writing its metadata: it is waited for all the same.
                if is_mounted(self.root):
                    result = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                                            timeout=self.umount_timeout, check=False)  # fmt: skip
                    if result.returncode != 0:
                        log.warning("umount.s3ql exited %s: %s", result.returncode,
                                    (result.stderr or result.stdout).strip()[-300:])  # fmt: skip
                proc.wait(timeout=self.opts.stop_timeout)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("s3ql: %s; stopping the daemon with SIGTERM", exc)
        super().stop_daemon()


TARGET_CLASSES: dict[str, type[Target]] = {
    "tmpfs": TmpfsTarget,
    "floor": FloorTarget,
    "cfloor": CFloorTarget,
    "ceiling": CeilingTarget,
    "memfs": MemfsTarget,
    "s3ql": S3qlTarget,
}


# -- workload -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    files: int = 2000
    dirs: int = 10
    size: int = 2000
    big_files: int = 50
    big_size: int = 100_000

    @property
    def overwritten(self) -> range:
        return range(0, self.files, 4)

    @property
    def renamed(self) -> range:
        return range(1, self.files, 4)

    @property
    def needles(self) -> range:
        # i % 100 == 3 is never overwritten (i % 4 == 0) nor renamed (i % 4 == 1).
        return range(3, self.files, 100)

    def phases(self) -> list[tuple[str, str, int]]:
        """(key, label, operation count) for every timed phase, in run order."""
        n, big = self.files, self.big_files
        kb, big_kb = self.size / 1000, self.big_size / 1000
        return [
            ("create", f"(a) create {n} × {kb:g} kB", n),
            ("walk", "(b) warm walk + stat", n),
            ("read_cold", f"(c) cold read {n}", n),
            ("read_warm", f"(d) warm read {n}", n),
            ("overwrite", f"(e) overwrite {len(self.overwritten)}", len(self.overwritten)),
            ("rename", f"(f) rename {len(self.renamed)}", len(self.renamed)),
            ("grep", f"(g) grep -r ({n} files)", n),
            ("unlink", f"(h) unlink {n}", n),
            ("writers1", f"(i) create {n} × {kb:g} kB, 1 writer process", n),
            ("writers8", f"(j) create {n} × {kb:g} kB, {WRITERS} writer processes", n),
            ("big_write", f"(k) write {big} × {big_kb:g} kB", big),
            ("big_read", f"(l) cold read {big} × {big_kb:g} kB", big),
            ("big_read_warm", f"(m) warm read {big} × {big_kb:g} kB", big),
            ("history", f"(n) history listing, {HISTORY_VERSIONS} versions (ls -l, warm)", 1),
        ]


def _text(size: int, seed: str, needle: bool) -> bytes:
    """Deterministic ASCII (hence valid UTF-8, as memfs requires) of exactly size bytes."""
    head = f"# {seed}\n" + (f"remember: {NEEDLE}\n" if needle else "")
    line = f"- {seed}: the quick brown fox jumps over the lazy dog\n"
    body = head + line * (size // len(line) + 1)
    return (body[: size - 1] + "\n").encode()


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _read_file(path: str) -> bytes:
    # Read to EOF like cat: the final empty read is answered by the kernel from the cached
    # size, without a FUSE request.
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 131072):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class Workload:
    """One pass of the standard workload on one target, timing each phase."""

    def __init__(self, target: Target, spec: Spec, phase_timeout: float) -> None:
        self.target = target
        self.spec = spec
        self.phase_timeout = phase_timeout
        self.root = target.root
        self.seconds: dict[str, float] = {}
        # Content is built before timing so that the phases measure only filesystem work.
        self.content = [
            _text(spec.size, f"memory {i}", i in spec.needles) for i in range(spec.files)
        ]
        self.new_content = {
            i: _text(spec.size, f"memory {i} rewritten", False) for i in spec.overwritten
        }
        self.big_content = [
            _text(spec.big_size, f"big memory {k}", False) for k in range(spec.big_files)
        ]
        self.dirs = [str(self.root / f"d{j:02d}") for j in range(spec.dirs)]
        self.paths = [
            os.path.join(self.dirs[i % spec.dirs], f"m{i:05d}.md") for i in range(spec.files)
        ]
        self.big_dir = str(self.root / "big")
        self.big_paths = [os.path.join(self.big_dir, f"b{k:03d}.md") for k in range(spec.big_files)]

    def _timed(self, key: str, fn: Callable[[], float | None]) -> None:
        """Time fn(), or take the seconds it returns (when it times only part of itself)."""
        # The watchdog turns a hung mount into failing syscalls instead of a hung benchmark.
        watchdog = threading.Timer(
            self.phase_timeout, self.target.abort, (f"{key} exceeded {self.phase_timeout:.0f} s",)
        )
        watchdog.daemon = True
        watchdog.start()
        try:
            t0 = time.perf_counter()
            measured = fn()
            elapsed = time.perf_counter() - t0 if measured is None else measured
        except OSError as exc:
            if self.target.aborted:
                raise WorkloadError(f"aborted by watchdog: {self.target.aborted}") from exc
            raise WorkloadError(f"phase {key}: {exc}") from exc
        finally:
            watchdog.cancel()
        self.seconds[key] = elapsed
        log.info("%s: %-10s %8.3f s", self.target.name, key, elapsed)

    def run(self) -> dict[str, float]:
        self._timed("create", self._create)
        self._walk()  # warm the kernel's dentry and attribute caches
        self._timed("walk", self._walk)
        self.target.make_cold()
        self._timed("read_cold", self._read_all)
        self._timed("read_warm", self._read_all)
        self._timed("overwrite", self._overwrite)
        self._timed("rename", self._rename)
        self._timed("grep", self._grep)
        self._timed("unlink", self._unlink)
        self._remove_dirs(self.dirs)
        for key, count in (("writers1", 1), ("writers8", WRITERS)):
            writers = Writers(self.root, self.spec, count)
            try:
                self._timed(key, writers.run)
            finally:
                writers.remove()
        os.mkdir(self.big_dir)
        self._timed("big_write", self._big_write)
        self.target.make_cold()
        self._timed("big_read", self._big_read)
        self._timed("big_read_warm", self._big_read)
        for path in self.big_paths:
            os.unlink(path)
        self._remove_dirs([self.big_dir])
        self._timed("history", self._history)
        leftovers = sorted(set(os.listdir(self.root)) - self.target.own_entries)
        if leftovers:
            log.warning("%s: left in the tree after the workload: %s", self.target.name, leftovers)
        return self.seconds

    def _create(self) -> None:
        for d in self.dirs:
            os.mkdir(d)
        for path, data in zip(self.paths, self.content, strict=True):
            _write_file(path, data)

    def _walk(self) -> None:
        count = 0
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                os.stat(os.path.join(dirpath, name))
                count += 1
        if count != self.spec.files:
            raise WorkloadError(f"walk found {count} files, expected {self.spec.files}")

    def _read_all(self) -> None:
        for path, expected in zip(self.paths, self.content, strict=True):
            if _read_file(path) != expected:
                raise WorkloadError(f"{path}: content differs from what was written")

    def _overwrite(self) -> None:
        for i, data in self.new_content.items():
            _write_file(self.paths[i], data)
            self.content[i] = data

    def _rename(self) -> None:
        for i in self.spec.renamed:
            new = os.path.join(os.path.dirname(self.paths[i]), f"r{i:05d}.md")
            os.rename(self.paths[i], new)
            self.paths[i] = new

    def _grep(self) -> None:
        # LC_ALL=C: byte matching, so the locale does not change what is measured.
        result = subprocess.run(
            ["grep", "-r", "-F", NEEDLE, str(self.root)],
            capture_output=True,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
        )
        expected = len(self.spec.needles)
        if result.returncode not in (0, 1):
            raise WorkloadError(f"grep failed ({result.returncode}): {result.stderr!r}")
        found = len(result.stdout.splitlines())
        if found != expected:
            raise WorkloadError(f"grep found {found} matches, expected {expected}")

    def _unlink(self) -> None:
        for path in self.paths:
            os.unlink(path)

    @staticmethod
    def _remove_dirs(dirs: list[str]) -> None:
        for d in dirs:
            # memfs directories are path prefixes and may vanish with their last file.
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(d)

    def _history(self) -> float:
        """The median time of a warm ``ls -l`` of 100 versions (memfs: one file written 100
        times, listed in ``.history/``; elsewhere: a directory of 100 files)."""
        memfs = self.target.name == "memfs"
        if memfs:
            # A new file each pass: the history of the last one's stays.
            name = f"history-{time.monotonic_ns()}.md"
            path = str(self.root / name)
            for k in range(HISTORY_VERSIONS):
                _write_file(path, f"version {k}\n".encode())
            listed = str(self.root / ".history" / name)
            made = [path]
        else:
            listed = str(self.root / "history")
            os.mkdir(listed)
            made = [os.path.join(listed, f"v{k:03d}") for k in range(HISTORY_VERSIONS)]
            for k, p in enumerate(made):
                _write_file(p, f"version {k}\n".encode())

        def ls_l() -> float:
            t0 = time.perf_counter()
            names = os.listdir(listed)
            for name in names:
                os.lstat(os.path.join(listed, name))
            took = time.perf_counter() - t0
            if len(names) != HISTORY_VERSIONS:
                raise WorkloadError(f"{listed} lists {len(names)} entries, not "
                                    f"{HISTORY_VERSIONS}")
            return took

        try:
            ls_l()  # untimed: the cold listing (memfs reads the versions from the store)
            return statistics.median(ls_l() for _ in range(HISTORY_REPEATS))
        finally:
            for p in made:
                os.unlink(p)
            if not memfs:
                os.rmdir(listed)

    def _big_write(self) -> None:
        for path, data in zip(self.big_paths, self.big_content, strict=True):
            _write_file(path, data)

    def _big_read(self) -> None:
        for path, expected in zip(self.big_paths, self.big_content, strict=True):
            if _read_file(path) != expected:
                raise WorkloadError(f"{path}: content differs from what was written")


# Each writer process: its content is built and its directory made before it says "ready";
# it starts creating files when it reads a byte on stdin.
_WRITER = """
import os, sys, time
directory, first, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def text(i):
    line = f"- writer file {i}: the quick brown fox jumps over the lazy dog\\n"
    return ((line * (size // len(line) + 1))[: size - 1] + "\\n").encode()
items = [(os.path.join(directory, f"w{i:05d}.md"), text(i)) for i in range(first, first + count)]
os.mkdir(directory)
print("ready", flush=True)
sys.stdin.buffer.read(1)
for path, data in items:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)
print(time.perf_counter(), flush=True)  # CLOCK_MONOTONIC: the parent's clock too
"""


class Writers:
    """``count`` processes creating spec.files distinct files between them, each in its own
    directory of the mount; timed from the moment all are ready until the last has closed its
    last file (the writers report when: their start-up and exit are not timed)."""

    def __init__(self, root: Path, spec: Spec, count: int) -> None:
        self.spec = spec
        self.dirs = [str(root / f"w{k}") for k in range(count)]
        share, extra = divmod(spec.files, count)
        self.slices = []
        first = 0
        for k in range(count):
            n = share + (k < extra)
            self.slices.append((first, n))
            first += n

    def run(self) -> float:
        procs = []
        try:
            for d, (first, n) in zip(self.dirs, self.slices, strict=True):
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", _WRITER, d, str(first), str(n), str(self.spec.size)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                ))  # fmt: skip
            for p in procs:
                assert p.stdout is not None
                if p.stdout.readline().strip() != b"ready":
                    raise WorkloadError(f"writer failed to start: {p.communicate()[1][-500:]!r}")
            t0 = time.perf_counter()
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(b"g")
                p.stdin.close()
            ends = []
            for p in procs:
                assert p.stdout is not None
                line = p.stdout.readline().strip()
                p.wait()
                if line:
                    ends.append(float(line))
            elapsed = max(ends, default=t0) - t0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for p in procs:
            if p.returncode != 0:
                assert p.stderr is not None
                raise WorkloadError(f"writer exited {p.returncode}: {p.stderr.read()[-500:]!r}")
        found = sum(len(os.listdir(d)) for d in self.dirs)
        if found != self.spec.files:
            raise WorkloadError(f"writers made {found} files, expected {self.spec.files}")
        return elapsed

    def remove(self) -> None:
        for d in self.dirs:
            with contextlib.suppress(FileNotFoundError):
                for name in os.listdir(d):
                    os.unlink(os.path.join(d, name))
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(d)


# -- running and reporting ------------------------------------------------------------------


@dataclass
class TargetResult:
    name: str
    runs: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    cold_meaning: str = ""

    def median(self, key: str) -> float | None:
        values = [run[key] for run in self.runs if key in run]
        return statistics.median(values) if values else None


def pass_order(names: Sequence[str], n: int) -> list[str]:
    """The targets in the order pass n (from 0) runs them: the given order, started n
    targets further on (floor,s3ql,memfs; then s3ql,memfs,floor; then memfs,floor,s3ql)."""
    if not names:
        return []
    k = n % len(names)
    return [*names[k:], *names[:k]]


def run_targets(
    names: Sequence[str], opts: Options, spec: Spec, args: argparse.Namespace
) -> dict[str, TargetResult]:
    """Mount every target (in the order of names), then run the workload round-robin: pass 1
    on each target, pass 2 on each (in a rotated order: pass_order), and so on, so that a busy
    moment of a shared machine weighs on all targets alike and the ratios of one run compare
    like with like."""
    results: dict[str, TargetResult] = {}
    live: dict[str, Target] = {}

    def failed(name: str, target: Target, exc: BaseException) -> None:
        result = results[name]
        result.error = f"{type(exc).__name__}: {exc}"
        if isinstance(target, FuseTarget) and (tail := target.log_tail()):
            result.error += f"\n  daemon log ({target.dir}):\n    " + tail.replace("\n", "\n    ")
        print(f"*** {name}: FAILED: {result.error}", file=sys.stderr, flush=True)
        live.pop(name, None)
        target.close()

    errors = (TargetError, WorkloadError, OSError, subprocess.SubprocessError)
    with contextlib.ExitStack() as stack:
        for name in names:
            target = TARGET_CLASSES[name](opts)
            results[name] = TargetResult(name, cold_meaning=target.cold_meaning)
            results[name].info = target.info
            if opts.drop_caches:
                results[name].cold_meaning += "; plus sync and drop_caches" + (
                    " (which cannot evict tmpfs data)" if name == "tmpfs" else ""
                )
            log.info("%s: setting up", name)
            try:
                stack.enter_context(target)
            except errors as exc:
                failed(name, target, exc)
                continue
            live[name] = target
        for n in range(args.repeat):
            for name in pass_order(list(live), n):
                target = live[name]
                workload = Workload(target, spec, args.phase_timeout)
                try:
                    workload.run()
                except errors as exc:
                    failed(name, target, exc)
                finally:
                    # Keep the phases that finished, even from a failed pass.
                    results[name].runs.append(workload.seconds)
    return results


# -- sessions -------------------------------------------------------------------------------


@dataclass
class SessionResult:
    stores: int
    files: int
    size: int
    start: dict[int, list[float]] = field(default_factory=dict)
    lifetime: dict[int, list[float]] = field(default_factory=dict)
    #: The same, of sessions whose 8 stores each pin PINNED_CHARS characters.
    pinned_start: list[float] = field(default_factory=list)
    pinned_lifetime: list[float] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def median_start(self, stores: int) -> float | None:
        values = self.start.get(stores)
        return statistics.median(values) if values else None


def _process_tree() -> dict[int, list[int]]:
    """{parent pid: [child pids]} of every process (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _descendants(pid: int, tree: dict[int, list[int]]) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _memory_kib(pid: int) -> dict[str, Any]:
    """VmRSS and Pss (proportional: shared pages split between their users) in KiB."""
    out: dict[str, Any] = {"pid": pid}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss_kib"] = int(line.split()[1])
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["pss_kib"] = int(line.split()[1])
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        out["cmdline"] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    return out


class SessionBench:
    """`memfs run` of 1 and of 8 stores (each spec.files files of spec.size bytes, imported
    into a fresh database), with ``--isolation`` as asked and a fresh --root each time."""

    def __init__(self, opts: Options, spec: Spec, stores: int) -> None:
        self.opts = opts
        self.spec = spec
        self.dir = opts.workdir / "sessions"
        self.db = self.dir / "sessions.db"
        self.names = [f"session-store-{k}" for k in range(stores)]
        self.result = SessionResult(stores=stores, files=spec.files, size=spec.size)
        self.result.info["isolation"] = opts.isolation
        self._runs = 0

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SUDO_", "MEMFS_"))}
        env["MEMFS_DB"] = str(self.db)
        env["LC_ALL"] = "C"  # $EPOCHREALTIME with a decimal point
        return env

    def prepare(self) -> None:
        source = self.dir / "source"
        for i in range(self.spec.files):
            path = source / f"d{i % self.spec.dirs:02d}" / f"m{i:05d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_text(self.spec.size, f"memory {i}", False))
        t0 = time.perf_counter()
        for name in self.names:
            cmd = [self.opts.memfs_cmd, "import", str(source), "--name", name]
            done = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                                  timeout=600, check=False)  # fmt: skip
            if done.returncode != 0:
                raise TargetError(f"`memfs import` exited {done.returncode}: "
                                  f"{(done.stderr or done.stdout).strip()[-300:]}")  # fmt: skip
        self.result.info["import_seconds"] = time.perf_counter() - t0

    def _command(self, stores: int, script: str, *script_args: str) -> list[str]:
        self._runs += 1
        root = self.dir / f"root-{self._runs}"
        cmd = [self.opts.memfs_cmd, "run", "--isolation", self.opts.isolation,
               "--root", str(root)]
        for name in self.names[:stores]:
            cmd += ["--store", name]
        return [*cmd, "--", "bash", "-c", script, "bash", *script_args]

    def pin(self) -> None:
        """Pin PINNED_CHARS characters in every store, as a person would: the store's first
        memory (:data:`PINNED_PATH`) rewritten with ``pinned: true`` in its front matter
        through ``memfs memories update`` (a store of 2,000 memories is full)."""
        from memfs.rules import pinned_cost  # what a shown memory costs of a budget

        head = "---\npinned: true\n---\n"
        size = PINNED_CHARS - pinned_cost(PINNED_PATH, 0)  # its heading and fences count too
        text = self.dir / "profile.md"
        text.write_text(head + ("Name: Ada Lovelace. Prefers short answers, ISO dates. "
                                * 100)[:size - len(head)])
        for name in self.names:
            cmd = [self.opts.memfs_cmd, "memories", "update", name, PINNED_PATH,
                   "--file", str(text)]
            done = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                                  timeout=60, check=False)  # fmt: skip
            if done.returncode != 0:
                raise WorkloadError(f"`memfs memories update` exited {done.returncode}: "
                                    f"{done.stderr.strip()[-300:]}")  # fmt: skip

    def measure_start(self, stores: int, pinned: bool = False) -> None:
        """Seconds from launching `memfs run` until its command runs (it writes the time),
        and of the whole run. ``pinned``: the stores pin (:meth:`pin`), and the command
        checks afterwards that its prompt file holds every store's pinned memory."""
        stamp = self.dir / f"started-{self._runs + 1}"
        script = 'echo "$EPOCHREALTIME" > "$1"'
        if pinned:
            # The path as the block shows it (memfs.rules.pinned_path: inline code), in single
            # quotes: bash would run what is between backticks in double quotes.
            shown = f"`{PINNED_PATH}`"
            script += (f"; p=$MEMFS_SYSTEM_PROMPT_FILE; echo $(grep -c '^#### {shown}$' "
                       f"\"$p\") $(grep -c '^- {shown} (' \"$p\") > \"$1.pinned\"")
        cmd = self._command(stores, script, str(stamp))
        t0 = time.time()
        done = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        lifetime = time.time() - t0
        if done.returncode != 0 or not stamp.exists():
            raise WorkloadError(f"`memfs run` with {stores} stores exited {done.returncode}: "
                                f"{done.stderr.strip()[-300:]}")  # fmt: skip
        started = float(stamp.read_text()) - t0
        if pinned:
            # The session's budget (16,000) holds 4 of them; the others are listed.
            shown, listed = map(int, Path(f"{stamp}.pinned").read_text().split())
            fit = min(stores, SESSION_PINNED_BUDGET // PINNED_CHARS)
            if (shown, listed) != (fit, stores - fit):
                raise WorkloadError(f"the prompt file showed {shown} pinned memories and "
                                    f"listed {listed}, of {stores} stores")
            self.result.pinned_start.append(started)
            self.result.pinned_lifetime.append(lifetime)
        else:
            self.result.start.setdefault(stores, []).append(started)
            self.result.lifetime.setdefault(stores, []).append(lifetime)
        log.info("session: start with %d store(s)%s %.3f s (whole run %.3f s)",
                 stores, " pinning" if pinned else "", started, lifetime)  # fmt: skip

    def mark_indexed(self) -> None:
        """Give every memory a vector of the local model, as if an indexer had embedded them
        all (zero vectors: they rank nothing), and drop the leases of earlier sessions: what a
        session over stores indexed long ago sees. 16,000 real embeddings take about 25
        minutes on 2 cores."""
        from memfs.recall.embeddings import LocalE5

        with contextlib.closing(sqlite3.connect(self.db)) as c, c:
            c.execute("DELETE FROM recall_leases")
            c.execute(
                "INSERT OR REPLACE INTO memory_vectors (memory_id, store_id, model, path, "
                "content_sha256, vector, indexed_at) SELECT id, store_id, ?, path, "
                "content_sha256, zeroblob(1536), '2026-01-01T00:00:00Z' FROM memories",
                (LocalE5.model,))

    def measure_memory(self, timeout: float, indexed: bool) -> None:
        """The session's processes' memory at each stage of a session of every store: its
        daemon(s) (every process below `memfs run` that is not the command's nor an indexer
        process) and its indexer process, if any.

        Stages: ``idle`` (the command started, nothing read, 3 s after the mount), ``read``
        (every file read) and, over stores already indexed (:meth:`mark_indexed`),
        ``searched`` (one question asked in ``.search/``) and ``found`` (5 new memories
        written over files, one at a time, each asked for in other words every 50 ms until
        meaning finds it (the question shares no word with it, and its file's old vector no
        longer counts): the seconds each took are ``found_seconds``). Over stores not
        indexed, the indexer works throughout.
        """
        stores = len(self.names)
        tag = self._runs + 1
        stage_dir = self.dir / f"stages-{tag}"
        stage_dir.mkdir()
        # A store is full (2,000 memories): each new memory replaces a file's content; one at
        # a time, each found before the next is written.
        changed = [f"{self.names[0]}/d{i % self.spec.dirs:02d}/m{i:05d}.md"
                   for i in range(self.spec.files - NEW_MEMORIES, self.spec.files)]
        cmd = self._command(stores, MEMORY_SCRIPT, str(stage_dir), "ROOT", SEARCH_QUESTION,
                            "1" if indexed else "", *changed)
        root = cmd[cmd.index("--root") + 1]
        cmd[cmd.index("ROOT")] = root
        env = {**self._env(), "NEW_MEMORY": NEW_MEMORY}
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        key = "indexed" if indexed else "not_indexed"
        stages: dict[str, Any] = {}
        self.result.memory[key] = {"stores": stores, "stages": stages}
        try:

            def reached(stage: str) -> Callable[[], bool]:
                def check() -> bool:
                    if proc.poll() is not None:
                        raise WorkloadError(f"`memfs run` exited {proc.returncode} early")
                    return (stage_dir / f"s-{stage}").exists()
                return check

            names = ["idle", "read", *(["searched", "found"] if indexed else [])]
            for stage in names:
                if not _wait_until(reached(stage), timeout):
                    raise WorkloadError(f"the session's command did not reach {stage!r} in "
                                        f"{timeout} s")  # fmt: skip
                if stage == "idle":
                    time.sleep(3.0)
                if stage == "read":
                    read = int((stage_dir / "s-read").read_text())
                    if read != stores * self.spec.files * self.spec.size:
                        raise WorkloadError(f"the command read {read} bytes, expected "
                                            f"{stores * self.spec.files * self.spec.size}")
                stages[stage] = self._processes(proc.pid, int((stage_dir / "pid").read_text()))
                if stage == "found":
                    times = (stage_dir / "s-found").read_text().split()
                    if "never" in times:
                        raise WorkloadError("meaning never found a new memory")
                    pairs = zip(times[::2], times[1::2], strict=True)
                    self.result.memory[key]["found_seconds"] = [
                        float(t1) - float(t0) for t0, t1 in pairs]
                log.info("session (%s), %s: daemon RSS %.1f MB, indexer process %s", key,
                         stage, stages[stage]["rss_kib"] / 1024,
                         "none" if stages[stage]["indexer_rss_kib"] is None
                         else f"{stages[stage]['indexer_rss_kib'] / 1024:.1f} MB")  # fmt: skip
                (stage_dir / f"go-{stage}").touch()
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                # The launcher unmounts and stops its daemons on SIGTERM.
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if proc.returncode != 0:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise WorkloadError(f"`memfs run` exited {proc.returncode}: {err.strip()[-300:]}")

    @staticmethod
    def _processes(launcher_pid: int, command: int) -> dict[str, Any]:
        """The memory of the daemons and of the indexer processes below ``launcher_pid``, not
        counting ``command`` and what it started."""
        tree = _process_tree()
        below = _descendants(launcher_pid, tree) - {command} - _descendants(command, tree)
        in_launcher = not below
        if in_launcher:
            # No process of its own: the launcher serves the mounts itself.
            below = {launcher_pid}
        per_process = []
        for pid in sorted(below):
            with contextlib.suppress(OSError):
                per_process.append(_memory_kib(pid))
        daemons = [p for p in per_process if INDEXER_PROCESS not in p["cmdline"]]
        indexers = [p for p in per_process if INDEXER_PROCESS in p["cmdline"]]
        return {
            "processes": len(daemons),
            "rss_kib": sum(p.get("rss_kib", 0) for p in daemons),
            "pss_kib": sum(p.get("pss_kib", 0) for p in daemons),
            "indexer_rss_kib": sum(p.get("rss_kib", 0) for p in indexers) if indexers else None,
            "per_process": per_process,
            "served_by_launcher": in_launcher,
        }


#: What an indexer process's command line holds (memfs.daemons.indexworker), to count it apart.
INDEXER_PROCESS = "memfs.daemons.indexworker"
SEARCH_QUESTION = "which engineer handles emergencies after hours"
NEW_MEMORY = "Nights and weekends: Dana is paged first, then Lee."
#: The new memories written one after the other (each timed until found).
NEW_MEMORIES = 5
#: The command of the memory session: $1 the directory of the stage files (it writes
#: s-STAGE, then waits for go-STAGE), $2 the root, $3 the question, $4 non-empty: the stores are
#: indexed (search, then new memories), then the files of the new memories (below the root,
#: all in one store).
MEMORY_SCRIPT = r"""
d=$1; r=$2; q=$3; echo $$ > "$d/pid"
w() { while [ ! -e "$d/go-$1" ]; do sleep 0.05; done; }
touch "$d/s-idle"; w idle
n=$(find "$r" -type f -exec cat {} + | wc -c); echo "$n" > "$d/n.tmp"; mv "$d/n.tmp" "$d/s-read"
w read
[ -n "$4" ] || exit 0
shift 4; s=${1%%/*}; cat "$r/$s/.search/$q" > /dev/null; touch "$d/s-searched"; w searched
for f in "$@"; do
    t0=$EPOCHREALTIME; t1=never; printf '%s\n' "$NEW_MEMORY" > "$r/$f" || exit 1
    for _ in $(seq 2400); do
        grep -qF "$r/$f" "$r/$s/.search/$q" && { t1=$EPOCHREALTIME; break; }
        sleep 0.05
    done
    echo "$t0 $t1" >> "$d/found"
done
mv "$d/found" "$d/s-found"; w found
"""


def run_sessions(opts: Options, spec: Spec, args: argparse.Namespace) -> SessionResult:
    bench = SessionBench(opts, spec, SESSION_STORES)
    bench.dir.mkdir()
    try:
        log.info("session: importing %d stores of %d files", SESSION_STORES, spec.files)
        bench.prepare()
        for _ in range(args.repeat):
            for stores in (1, SESSION_STORES):
                bench.measure_start(stores)
        bench.pin()
        for _ in range(args.repeat):
            bench.measure_start(SESSION_STORES, pinned=True)
        if args.starts_only:
            return bench.result
        bench.measure_memory(args.phase_timeout, indexed=False)
        bench.mark_indexed()
        bench.measure_memory(args.phase_timeout, indexed=True)
    except (TargetError, WorkloadError, OSError, subprocess.SubprocessError, ValueError) as exc:
        bench.result.error = f"{type(exc).__name__}: {exc}"
        print(f"*** sessions: FAILED: {bench.result.error}", file=sys.stderr, flush=True)
    return bench.result


# -- reporting ------------------------------------------------------------------------------

# Phases reported as a time rather than a rate: one operation over the whole tree.
_TIME_PHASES = {"walk", "grep", "history"}
#: The speed ratios reported, of the targets that ran: memfs against each, and the other
#: FUSE targets against the floor and the ceiling.
_SPEED_RATIOS = (("memfs", "floor"), ("memfs", "ceiling"), ("memfs", "s3ql"), ("ceiling", "floor"),
                 ("s3ql", "floor"), ("s3ql", "ceiling"), ("memfs", "tmpfs"),
                 ("floor", "cfloor"), ("memfs", "cfloor"))


def _rate(ops: int, seconds: float) -> str:
    rate = ops / seconds if seconds > 0 else float("inf")
    return f"{rate:,.0f}/s"


def _speed(a: float | None, b: float | None) -> float | None:
    """How many times faster A is than B (B's time over A's): >1 means A is faster."""
    if a is None or b is None or a <= 0:
        return None
    return b / a


def _fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def speed_ratios(
    results: dict[str, TargetResult], spec: Spec
) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for a, b in _SPEED_RATIOS:
        if a in results and b in results:
            out[f"{a}/{b}"] = {
                key: _speed(results[a].median(key), results[b].median(key))
                for key, _label, _ops in spec.phases()
            }
    return out


def _describe_s3ql(info: dict[str, Any]) -> str:
    sqlite = f": apsw's {info['sqlite']}" if "sqlite" in info else ""
    return (f"; s3ql = S3QL {info.get('s3ql', bench_s3ql.S3QL_VERSION)} (pyfuse3 + trio, "
            f"metadata in SQLite{sqlite}), --plain, local:// backend and cache on tmpfs, "
            "--compress none")


def render(
    results: dict[str, TargetResult],
    sessions: SessionResult | None,
    spec: Spec,
    args: argparse.Namespace,
) -> str:
    names = list(results)
    ratios = [(a, b) for a, b in _SPEED_RATIOS if a in results and b in results]
    lines = [
        f"memfs benchmark: {spec.files} files of {spec.size:,} B in {spec.dirs} directories, "
        f"{spec.big_files} files of {spec.big_size:,} B; "
        f"{'median of ' + str(args.repeat) + ' passes' if args.repeat > 1 else 'one pass'} "
        "per target, the targets taking turns.",
        f"Host: Linux {platform.release()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}.",
        "Cells: operations per second (walk and grep: milliseconds for the whole tree). "
        "Ratios are speed ratios A/B = B's time / A's time: >1 means A is faster.",
        "Targets: tmpfs (kernel only); floor = scripts/passthroughfs.py (pyfuse3 passthrough "
        "over tmpfs); ceiling = scripts/ceilingfs.py (pyfuse3, zero work: dicts, keep_cache, "
        "300 s timeouts); memfs = `memfs mount` of one store"
        + ("; cfloor = libfuse's passthrough_ll (C, low-level API, one thread) over tmpfs"
           if "cfloor" in results else "")
        + (_describe_s3ql(results["s3ql"].info) if "s3ql" in results else "") + ".",
        "Cold means:",
    ]
    lines += [f"  - {r.name}: {r.cold_meaning}" for r in results.values()]
    if "memfs" in results and "db_fstype" in results["memfs"].info:
        lines.append(f"memfs database on {results['memfs'].info['db_fstype']}.")
    lines.append("")
    header = ["operation", *names, *[f"{a}/{b}" for a, b in ratios]]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    totals: dict[str, float | None] = dict.fromkeys(names, 0.0)
    for key, label, ops in spec.phases():
        times = {n: results[n].median(key) for n in names}
        cells = [label]
        for n in names:
            t = times[n]
            if t is None:
                cells.append("failed")
            elif key == "history":
                cells.append(f"{t * 1000:.2f} ms")
            elif key in _TIME_PHASES:
                cells.append(f"{t * 1000:,.0f} ms")
            else:
                cells.append(_rate(ops, t))
            total = totals[n]
            totals[n] = None if t is None or total is None else total + t
        cells += [_fmt_ratio(_speed(times[a], times[b])) for a, b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    cells = [f"(j) vs (i): {WRITERS} writers' speed-up"]
    for n in names:
        speedup = _speed(results[n].median("writers8"), results[n].median("writers1"))
        cells.append(_fmt_ratio(speedup) + "×")
    cells += ["" for _ in ratios]
    lines.append("| " + " | ".join(cells) + " |")
    cells = ["total time"]
    cells += ["–" if totals[n] is None else f"{totals[n]:.2f} s" for n in names]
    cells += [_fmt_ratio(_speed(totals[a], totals[b])) for a, b in ratios]
    lines.append("| " + " | ".join(cells) + " |")
    if sessions is not None:
        lines += ["", *render_sessions(sessions)]
    for r in results.values():
        if r.error:
            lines.append(f"\n{r.name} FAILED: {r.error}")
    return "\n".join(lines)


def render_sessions(s: SessionResult) -> list[str]:
    lines = [
        f"memfs sessions (`memfs run --isolation {s.info.get('isolation', 'none')}`, "
        f"stores of {s.files} × "
        f"{s.size / 1000:g} kB; start = launch of `memfs run` until its command runs, "
        f"median of {max((len(v) for v in s.start.values()), default=0)}):",
        "",
        "| session | memfs |",
        "|---|---:|",
    ]
    for stores in sorted(s.start):
        started = s.median_start(stores)
        lines.append(f"| start, {stores} store{'s' if stores > 1 else ''} | "
                     f"{'–' if started is None else f'{started:.2f} s'} |")  # fmt: skip
    for stores in sorted(s.lifetime):
        lines.append(f"| round trip `memfs run … -- true`, {stores} store"
                     f"{'s' if stores > 1 else ''} | "
                     f"{statistics.median(s.lifetime[stores]):.2f} s |")  # fmt: skip
    if s.pinned_start:
        each = (f"{SESSION_STORES} stores pinning {PINNED_CHARS:,} characters each (the "
                f"session's {SESSION_PINNED_BUDGET:,} shown)")
        lines.append(f"| start, {each} | {statistics.median(s.pinned_start):.2f} s |")
        lines.append(f"| round trip `memfs run … -- true`, {each} | "
                     f"{statistics.median(s.pinned_lifetime):.2f} s |")
    labels = {"idle": "idle (nothing read yet)", "read": "every file read",
              "searched": "after a search by meaning", "found": "a new memory found by meaning"}
    for key, what in (("not_indexed", "stores not indexed (the indexer at work)"),
                      ("indexed", "stores indexed")):
        m = s.memory.get(key)
        if not m:
            continue
        for stage, p in m["stages"].items():
            indexer = ("" if p["indexer_rss_kib"] is None
                       else f"; indexer process {p['indexer_rss_kib'] / 1024:.0f} MB")
            lines.append(
                f"| daemon RSS, {m['stores']} {what}, {labels[stage]} "
                f"({p['processes']} process{'es' if p['processes'] > 1 else ''}) | "
                f"{p['rss_kib'] / 1024:.0f} MB (PSS {p['pss_kib'] / 1024:.0f} MB){indexer} |")
        if "found_seconds" in m:
            found = m["found_seconds"]
            lines.append(f"| a new memory found by meaning ({what}), median (max) of "
                         f"{len(found)} | {statistics.median(found):.1f} s "
                         f"({max(found):.1f} s) |")
    if s.error:
        lines.append(f"\nsessions FAILED: {s.error}")
    return lines


def dump_json(
    path: Path,
    results: dict[str, TargetResult],
    sessions: SessionResult | None,
    spec: Spec,
    args: argparse.Namespace,
) -> None:
    data = {
        "spec": spec.__dict__,
        "repeat": args.repeat,
        "drop_caches": args.drop_caches,
        "host": {
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "phases": [{"key": key, "label": label, "ops": ops} for key, label, ops in spec.phases()],
        "targets": {
            name: {
                "ok": r.error is None,
                "error": r.error,
                "cold": r.cold_meaning,
                "seconds": {key: r.median(key) for key, _label, _ops in spec.phases()},
                "runs": r.runs,
                "info": r.info,
            }
            for name, r in results.items()
        },
        "speed_ratios": speed_ratios(results, spec),
        "sessions": None if sessions is None else {
            "ok": sessions.error is None,
            "error": sessions.error,
            "stores": sessions.stores,
            "files_per_store": sessions.files,
            "size": sessions.size,
            "start_seconds": {str(k): sessions.median_start(k) for k in sessions.start},
            "start_runs": {str(k): v for k, v in sessions.start.items()},
            "lifetime_runs": {str(k): v for k, v in sessions.lifetime.items()},
            "pinned_chars_per_store": PINNED_CHARS,
            "pinned_start_runs": sessions.pinned_start,
            "pinned_lifetime_runs": sessions.pinned_lifetime,
            "memory": sessions.memory,
            "info": sessions.info,
        },
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Run the standard memfs workload on tmpfs, a Python FUSE floor, a zero-work "
        "Python FUSE ceiling and memfs, then time memfs sessions of 1 and 8 stores.",
        epilog="Needs root (mounts tmpfs and FUSE). Example: scripts/bench --repeat 3 --json "
        "out.json; a smoke run: scripts/bench --quick",
    )
    parser.add_argument(
        "--targets", default=",".join(ALL_TARGETS),
        help="comma-separated subset of %(default)s (default: all), and cfloor (libfuse's "
        "passthrough_ll in C) and s3ql (S3QL " + bench_s3ql.S3QL_VERSION + ", see --s3ql-src), "
        "only when named; set up and run in this order, each pass starting one further",
    )  # fmt: skip
    parser.add_argument(
        "--s3ql-src", metavar="DIR", default=None,
        help="the s3ql target's source: an S3QL " + bench_s3ql.S3QL_VERSION + " source tree or "
        "a git clone with tag " + bench_s3ql.S3QL_TAG + " (default: $" + bench_s3ql.SRC_ENV +
        "); built once into $XDG_CACHE_HOME/memfs-bench (default ~/.cache), then not needed",
    )  # fmt: skip
    parser.add_argument("--files", type=int, default=None, help="small files (default 2000)")
    parser.add_argument("--big-files", type=int, default=None, help="100 kB files (default 50)")
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke run: 200 small files and 5 big ones unless given (figures mean little)",
    )  # fmt: skip
    parser.add_argument(
        "--no-sessions", action="store_true",
        help="skip the memfs session measurements (start time, daemon memory)",
    )  # fmt: skip
    parser.add_argument(
        "--sessions-only", action="store_true",
        help="only the memfs session measurements (no filesystem workload)",
    )  # fmt: skip
    parser.add_argument(
        "--starts-only", action="store_true",
        help="of the session measurements, only the starts (no daemon memory)",
    )
    parser.add_argument(
        "--isolation", choices=("namespace", "none"),
        default="namespace" if os.geteuid() == 0 else "none",
        help="memfs run --isolation for the sessions: namespace (as root, the default: one "
             "daemon per session) or none (one daemon per store)",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="passes per target; report median")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write raw numbers here")
    parser.add_argument(
        "--drop-caches", action="store_true",
        help="cold also drops OS caches (sync; echo 3 > /proc/sys/vm/drop_caches)",
    )  # fmt: skip
    parser.add_argument(
        "--workdir", type=Path, default=None,
        help="parent of the temporary work directory (holds the memfs database; default: $TMPDIR)",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--memfs", default=str(REPO / ".venv" / "bin" / "memfs"), help="memfs executable"
    )
    parser.add_argument("--mount-timeout", type=float, default=30.0, help="seconds (default 30)")
    parser.add_argument(
        "--phase-timeout", type=float, default=600.0,
        help="kill a daemon whose phase runs longer than this (seconds, default 600)",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(ALL_TARGETS) - set(EXTRA_TARGETS))
    if unknown or not targets:
        parser.error(f"unknown target(s) {unknown}; choose from "
                     f"{', '.join(ALL_TARGETS + EXTRA_TARGETS)}")  # fmt: skip
    args.targets = list(dict.fromkeys(targets))
    args.s3ql_src = bench_s3ql.source_arg(args.s3ql_src)
    if args.files is None:
        args.files = 200 if args.quick else 2000
    if args.big_files is None:
        args.big_files = 5 if args.quick else 50
    if args.files < 10:
        parser.error("--files must be at least 10")
    if args.big_files < 1 or args.repeat < 1:
        parser.error("--big-files and --repeat must be at least 1")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    if os.geteuid() != 0:
        print("scripts/bench needs root: it mounts tmpfs and FUSE filesystems", file=sys.stderr)
        return 2
    if "memfs" in args.targets and args.files > 2000:
        log.warning("memfs stores hold at most 2,000 memories: --files %d will fail", args.files)
    # SIGTERM/SIGHUP unwind like Ctrl-C so that every finally below unmounts.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)

    spec = Spec(files=args.files, big_files=args.big_files)
    workdir = Path(tempfile.mkdtemp(prefix="memfs-bench-", dir=args.workdir)).resolve()
    opts = Options(
        workdir=workdir,
        drop_caches=args.drop_caches,
        mount_timeout=args.mount_timeout,
        stop_timeout=10.0,
        memfs_cmd=args.memfs,
        isolation=args.isolation,
        s3ql_src=args.s3ql_src,
    )
    results: dict[str, TargetResult] = {}
    sessions: SessionResult | None = None
    interrupted = False
    try:
        if not args.sessions_only:
            results = run_targets(args.targets, opts, spec, args)
        if args.sessions_only or ("memfs" in args.targets and not args.no_sessions):
            sessions = run_sessions(opts, spec, args)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted; everything mounted has been unmounted", file=sys.stderr)
    finally:
        with interrupts_deferred():
            _remove_workdir(workdir, args.keep)

    if args.sessions_only and sessions is not None:
        print("\n".join(render_sessions(sessions)))
        if args.json:
            dump_json(args.json, results, sessions, spec, args)
    elif results:
        print(render(results, sessions, spec, args))
        if args.json:
            dump_json(args.json, results, sessions, spec, args)
            log.info("raw numbers written to %s", args.json)
    if interrupted:
        return 130
    failed = any(r.error for r in results.values()) or (sessions is not None and sessions.error)
    return 1 if failed else 0


def _remove_workdir(workdir: Path, keep: bool) -> None:
    still_mounted = [m for m in _mount_table() if m == str(workdir) or m.startswith(f"{workdir}/")]
    if still_mounted:
        # Never rmtree through a live mount: that would delete whatever it shows.
        log.error("still mounted, keeping %s: %s", workdir, ", ".join(still_mounted))
    elif keep:
        log.info("work directory kept: %s", workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
