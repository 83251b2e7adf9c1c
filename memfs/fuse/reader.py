"""Reading the kernel's requests with one wait each: pyfuse3's reader, without its hand-offs.

pyfuse3's request loop (``_session_loop``, in one or more trio tasks) waits for ``/dev/fuse``
to be readable in ``_wait_fuse_readable``, under a ``trio.Lock`` so that one task at a time
waits on the descriptor. Taking the free lock gives up a turn, and releasing it hands it to
the next task in line, which then runs only to wait on the descriptor in its turn. So each
request costs two or three task steps, where one would do.

:class:`Reader` takes its place (:func:`main_after_init`; pyfuse3 looks the function up in
its module at each call): the task that answered a request waits for the next itself, with
no lock. The other tasks stand by, parked. One of them is woken only when the task handling
a request blocks in it (a close waiting for the mount's mutex, or gathering others' closes):
the kernel's next request must not wait for that one. A trio :class:`~trio.abc.Instrument`
sees the block: the end of a task's step while it handles a request.

The session ends (``pyfuse3.terminate``, or the mount gone: the read fails with ``ENODEV``)
when a task of pyfuse3's leaves its loop; then the tasks standing by, and the one waiting on
the descriptor, are told to leave too.

pyfuse3 starts another task after each request read while none waits in its own reader:
with this one, up to :data:`MAX_TASKS`, which then stand by, parked. A daemon with every file
of a 1,000-file store read: 42.3–42.4 MB with pyfuse3's reader, 42.7 MB with this one.

pyfuse3 3.3 to 3.5 have this function, with this contract; another version keeps its own
reader, as does ``MEMFS_FUSE_READER=pyfuse3`` in the environment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

__all__ = ["Reader", "main_after_init", "fuse_fds"]

log = logging.getLogger(__name__)

#: The pyfuse3 versions whose ``_wait_fuse_readable`` :class:`Reader` replaces (it is
#: private: another version keeps its own).
KNOWN = ("3.3.", "3.4.", "3.5.")
#: pyfuse3's tasks at most (its default: 99). It starts one after each request read while none
#: waits in its own reader: with this one, always, up to this many, which then stand by (a
#: few kB each). As many as trio's threads (its default limiter), which the requests of a
#: mount on a server wait for anyway.
MAX_TASKS = 40
#: The function of pyfuse3's request loop that :class:`Reader` replaces.
REPLACED = "_wait_fuse_readable"


def fuse_fds() -> set[int]:
    """This process's descriptors of ``/dev/fuse``."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "/dev/fuse":
                found.add(int(name))
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
    return found


class Reader(trio.abc.Instrument):
    """Waits for the kernel's next request on behalf of pyfuse3's tasks (see the module)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        #: A task waits on the descriptor now.
        self.waiting = False
        #: The tasks standing by.
        self.standby = trio.lowlevel.ParkingLot()
        #: The tasks handling a request they read (not waiting or standing by).
        self.busy: set[trio.lowlevel.Task] = set()
        self.closed = False
        #: Tasks woken because the one handling a request blocked (statistics, tests).
        self.handoffs = 0

    async def wait(self) -> bool:
        """pyfuse3's ``_wait_fuse_readable``: True when a request can be read (by this task,
        at once), False when this task's loop should end."""
        task = trio.lowlevel.current_task()
        self.busy.discard(task)
        while not self.closed:
            if self.waiting:
                await self.standby.park()
                continue
            self.waiting = True
            try:
                await trio.lowlevel.wait_readable(self.fd)
            except trio.ClosedResourceError:  # pyfuse3.terminate()
                self.close()
                return False
            finally:
                self.waiting = False
            self.busy.add(task)
            return True
        return False

    def close(self) -> None:
        """End: every task standing by is woken, and leaves; so does the one waiting on the
        descriptor (pyfuse3's notice of the end may have come before it waited)."""
        if self.closed:
            return
        self.closed = True
        self.standby.unpark_all()
        if self.waiting:
            trio.lowlevel.notify_closing(self.fd)

    # -- the Instrument --------------------------------------------------------------------

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        # A task handling a request ended its step: it blocked in the handler. Another
        # reads the next request meanwhile, if none waits already.
        if task in self.busy and not self.waiting and self.standby:
            self.handoffs += 1
            self.standby.unpark()

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        # pyfuse3's tasks leave their loop only when the session ends (terminate, unmount).
        if task in self.busy or task.name.startswith("pyfuse-"):
            self.busy.discard(task)
            self.close()


def main_after_init(before: set[int]) -> Callable[[], Awaitable[None]]:
    """What runs pyfuse3's request loop once ``pyfuse3.init`` opened ``/dev/fuse`` (its
    descriptor: the one not among ``before``, :func:`fuse_fds` before the init): with a
    :class:`Reader` in place of pyfuse3's own (the instrument added for the loop's duration),
    or ``pyfuse3.main`` itself for a pyfuse3 version not known here, when the descriptor
    cannot be told, or with ``MEMFS_FUSE_READER=pyfuse3`` in the environment."""
    version = getattr(pyfuse3, "__version__", "")
    new = fuse_fds() - before
    if os.environ.get("MEMFS_FUSE_READER") == "pyfuse3":
        return pyfuse3.main
    if not version.startswith(KNOWN) or not hasattr(pyfuse3, REPLACED):
        log.info("pyfuse3 %s: its own request reader is kept", version)
        return pyfuse3.main
    if len(new) != 1:
        log.info("/dev/fuse not told apart (%d new descriptors): pyfuse3's request reader "
                 "is kept", len(new))
        return pyfuse3.main
    reader = Reader(new.pop())

    async def main() -> None:
        namespace = vars(pyfuse3)  # what pyfuse3's loop looks the function up in
        original = namespace[REPLACED]
        namespace[REPLACED] = reader.wait
        trio.lowlevel.add_instrument(reader)
        try:
            await pyfuse3.main(1, MAX_TASKS)
        finally:
            trio.lowlevel.remove_instrument(reader)
            namespace[REPLACED] = original

    return main
