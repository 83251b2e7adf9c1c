"""Reading the kernel's requests with one wait each: pyfuse3's reader, without its hand-offs.

pyfuse3's request loop (``_session_loop``, in one or more trio tasks) waits for ``/dev/fuse``
to be readable in ``_wait_fuse_readable``, under a ``trio.Lock`` so that one task at a time
waits on the descriptor. Taking the free lock gives up a turn, and releasing it hands it to
the next task in line, which then runs only to wait on the descriptor in its turn. So each
request costs two or three task steps, where one would do.

:class:`Reader` takes its place (:func:`reader_after_init`; pyfuse3 looks the function up in
its module at each call): the task that answered a request waits for the next itself, with
no lock. The other tasks stand by, parked. One of them is woken only when the task handling
a request blocks in it (a close waiting for the mount's mutex, or gathering others' closes):
the kernel's next request must not wait for that one. A trio :class:`~trio.abc.Instrument`
sees the block: the end of a task's step while it handles a request.

Waiting is cheaper too. A request already queued (several programs at work; a close's
``RELEASE`` behind its ``FLUSH``) is read at once, with no turn given up: a ``poll`` of the
descriptor with no timeout, where trio would register it with epoll again and sleep in
``epoll_wait`` (:data:`IN_A_ROW` at most in a row, then the other tasks get a turn). Else the
reader turns while the :class:`~memfs.fuse.spin.Spinner`'s window lasts, looking at the
descriptor between turns (the spinner keeps the window's policy; its own task is not started),
and only then sleeps on the descriptor. Measured in docs/performance.md ("A fifth round").

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
import select

import pyfuse3
import trio

from .spin import Spinner

__all__ = ["Reader", "reader_after_init", "fuse_fds"]

log = logging.getLogger(__name__)

#: The pyfuse3 versions whose ``_wait_fuse_readable`` :class:`Reader` replaces (it is
#: private: another version keeps its own).
KNOWN = ("3.3.", "3.4.", "3.5.")
#: pyfuse3's tasks at most (its default: 99). It starts one after each request read while none
#: waits in its own reader: with this one, always, up to this many, which then stand by (a
#: few kB each). As many as trio's threads (its default limiter), which the requests of a
#: mount on a server wait for anyway.
MAX_TASKS = 40
#: Requests read in a row at most, while they queue, before a turn is given to the other tasks.
IN_A_ROW = 16
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
        #: A task waits on the descriptor now (turning, or asleep on it).
        self.waiting = False
        #: The tasks standing by.
        self.standby = trio.lowlevel.ParkingLot()
        #: The tasks handling a request they read (not waiting or standing by).
        self.busy: set[trio.lowlevel.Task] = set()
        self.closed = False
        #: The window to turn in after a request (set by :func:`~memfs.fuse.runtime.serve`);
        #: None: the task sleeps at once.
        self.spinner: Spinner | None = None
        #: Tasks woken because the one handling a request blocked (statistics, tests).
        self.handoffs = 0
        #: Requests read in a row without a turn given up.
        self._unyielded = 0
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    async def main(self) -> None:
        """``pyfuse3.main()`` with this reader in place of pyfuse3's own."""
        namespace = vars(pyfuse3)  # what pyfuse3's loop looks the function up in
        original = namespace[REPLACED]
        namespace[REPLACED] = self.wait
        trio.lowlevel.add_instrument(self)
        try:
            await pyfuse3.main(1, MAX_TASKS)
        finally:
            trio.lowlevel.remove_instrument(self)
            namespace[REPLACED] = original

    def terminate(self) -> None:
        """``pyfuse3.terminate()``, told to this reader's tasks too (pyfuse3's notice reaches
        only a task asleep on the descriptor)."""
        pyfuse3.terminate()
        self.close()

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
                if not await self._turn() and not self.closed:
                    await trio.lowlevel.wait_readable(self.fd)
            except trio.ClosedResourceError:  # pyfuse3.terminate()
                self.close()
            finally:
                self.waiting = False
            if self.closed:
                return False
            self.busy.add(task)
            return True
        return False

    def _there(self) -> bool:
        # A request is there (or the device failed: the mount is gone, which the read says).
        return bool(self._poll.poll(0))

    async def _turn(self) -> bool:
        """True when a request is there already (at most :data:`IN_A_ROW` times in a row), or
        comes while the spinner's window lasts (:meth:`Spinner.turn`), or the session ended
        meanwhile. False, the window over: sleep on the descriptor."""
        if self._unyielded < IN_A_ROW and self._there():
            self._unyielded += 1
            return True
        self._unyielded = 0
        return self.spinner is not None and await self.spinner.turn(
            lambda: self.closed or self._there())

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
        if task.name.startswith("pyfuse-"):
            self.busy.discard(task)
            self.close()


def reader_after_init(before: set[int]) -> Reader | None:
    """The :class:`Reader` of the ``/dev/fuse`` that ``pyfuse3.init`` opened (the descriptor
    not among ``before``, :func:`fuse_fds` before the init); None, and pyfuse3 keeps its own
    reader, for a pyfuse3 version not known here, when the descriptor cannot be told, or with
    ``MEMFS_FUSE_READER=pyfuse3`` in the environment."""
    version = getattr(pyfuse3, "__version__", "")
    new = fuse_fds() - before
    if os.environ.get("MEMFS_FUSE_READER") == "pyfuse3":
        return None
    if not version.startswith(KNOWN) or not hasattr(pyfuse3, REPLACED):
        log.info("pyfuse3 %s: its own request reader is kept", version)
        return None
    if len(new) != 1:
        log.info("/dev/fuse not told apart (%d new descriptors): pyfuse3's request reader "
                 "is kept", len(new))
        return None
    return Reader(new.pop())
