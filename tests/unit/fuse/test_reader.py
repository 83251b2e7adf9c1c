"""memfs.fuse.reader: pyfuse3's request loop reading with one wait per request.

The loop below is pyfuse3's ``_session_loop`` (3.3–3.5) over a pipe, one byte a request: it
waits with the function it is given, reads, starts another task while no task waits in
pyfuse3's own reader (never, with :class:`Reader`: it does not count them), and handles the
request in the task that read it. The real loop is served by every mount of the FUSE tests.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import pyfuse3
import pytest
import trio
import trio.testing

from memfs.fuse import reader as reader_mod
from memfs.fuse.reader import Reader
from memfs.fuse.spin import Spinner

Handler = Callable[[bytes], Awaitable[None]]


class Loop:
    """pyfuse3's session loop, one byte of a pipe a request; EOF is the mount gone."""

    def __init__(self, handle: Handler, max_tasks: int = 99) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.reader = Reader(self.r)
        self.handle = handle
        self.max_tasks = max_tasks
        self.task_count = 0
        self.serial = 0
        self.exited = False
        self.read_by: list[str] = []

    async def main(self) -> None:
        trio.lowlevel.add_instrument(self.reader)
        try:
            async with trio.open_nursery() as nursery:
                self._start(nursery)
        finally:
            trio.lowlevel.remove_instrument(self.reader)
            os.close(self.r)
            os.close(self.w)

    def _start(self, nursery: trio.Nursery) -> None:
        self.task_count += 1
        self.serial += 1
        nursery.start_soon(self._loop, nursery, name=f"pyfuse-{self.serial:02d}")

    async def _loop(self, nursery: trio.Nursery) -> None:
        while not self.exited:
            if not await self.reader.wait():
                break
            try:
                data = os.read(self.r, 1)
            except BlockingIOError:
                raise AssertionError("woken with no request to read") from None
            if self.task_count < self.max_tasks:
                self._start(nursery)
            if not data:
                self.exited = True  # libfuse: ENODEV, the session exits
                break
            self.read_by.append(trio.lowlevel.current_task().name)
            await self.handle(data)
        self.task_count -= 1

    def send(self, data: bytes) -> None:
        os.write(self.w, data)

    async def start(self, nursery: trio.Nursery, requests: int) -> None:
        """Serve in ``nursery``, after ``requests`` requests answered one by one (pyfuse3
        has started a task at each, up to its maximum: they stand by)."""
        nursery.start_soon(self.main)
        for _ in range(requests):
            self.send(b"x")
            await trio.testing.wait_all_tasks_blocked()


class Steps(trio.abc.Instrument):
    """Counts the steps of the loop's tasks."""

    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.startswith("pyfuse-"):
            self.count += 1


async def test_a_request_costs_one_step_of_one_task() -> None:
    """A program's requests, one after the other: the task that answered one waits for the
    next itself. pyfuse3's own reader takes two steps a request at least (its lock's turn,
    the wait) and hands the descriptor from task to task."""
    answered = trio.Semaphore(0)

    async def handle(data: bytes) -> None:
        answered.release()

    loop = Loop(handle, max_tasks=8)
    steps = Steps()
    n = 50
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop.main)
        for _ in range(10):  # pyfuse3 starts a task at each request, up to its maximum
            loop.send(b"x")
            await answered.acquire()
        await trio.testing.wait_all_tasks_blocked()
        assert loop.task_count == 8
        trio.lowlevel.add_instrument(steps)
        for _ in range(n):
            loop.send(b"x")
            await answered.acquire()
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.remove_instrument(steps)
        assert steps.count <= n + 2, f"{steps.count} steps for {n} requests"
        assert len(set(loop.read_by[-n:])) == 1, "the requests were read by several tasks"
        assert loop.reader.handoffs == 0
        trio.lowlevel.notify_closing(loop.r)  # pyfuse3.terminate()


async def test_a_request_that_blocks_hands_reading_to_another_task() -> None:
    """A handler that waits for what a later request does (a close gathering the others')
    must not keep that request unread."""
    second = trio.Event()
    first_done = trio.Event()

    async def handle(data: bytes) -> None:
        if data == b"a":
            await second.wait()
            first_done.set()
        elif data == b"b":
            second.set()

    loop = Loop(handle, max_tasks=4)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await loop.start(nursery, 5)
            loop.send(b"a")
            await trio.testing.wait_all_tasks_blocked()
            loop.send(b"b")
            await first_done.wait()
            assert loop.reader.handoffs == 1
            trio.lowlevel.notify_closing(loop.r)


@pytest.mark.parametrize("end", ["terminate", "unmount"])
async def test_every_task_ends_with_the_session(end: str) -> None:
    """pyfuse3.terminate() (the descriptor's waiter is told it closes), or the mount gone
    (the read fails: the task that read it leaves its loop): the tasks standing by leave
    too, and pyfuse3.main() returns."""
    async def handle(data: bytes) -> None:
        await trio.lowlevel.checkpoint()

    loop = Loop(handle)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await loop.start(nursery, 10)
            assert len(loop.reader.standby) >= 5
            if end == "terminate":
                trio.lowlevel.notify_closing(loop.r)
            else:
                os.close(loop.w)
                loop.w = os.open(os.devnull, os.O_WRONLY)  # closed by main() instead
    assert loop.task_count == 0
    assert loop.reader.closed


async def test_a_session_ended_while_no_task_waits_ends_every_task() -> None:
    """pyfuse3.terminate() while the task handling a request runs and none waits for the
    next (its notice reaches nobody): the task that then waits on the descriptor is told,
    when the first task leaves its loop."""
    async def handle(data: bytes) -> None:
        if data == b"E":
            loop.exited = True  # pyfuse3.terminate(): fuse_session_exit(), then
            trio.lowlevel.notify_closing(loop.r)  # its notice, to no waiter
            await trio.sleep(0.01)  # a standby takes the descriptor meanwhile
        await trio.lowlevel.checkpoint()

    loop = Loop(handle, max_tasks=4)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await loop.start(nursery, 5)
            loop.send(b"E")
    assert loop.task_count == 0


def test_pyfuse3_keeps_its_own_reader_where_this_one_is_not_known(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    try:
        before = reader_mod.fuse_fds()
        monkeypatch.setattr(reader_mod, "fuse_fds", lambda: before | {r})
        found = reader_mod.reader_after_init(before)
        assert found is not None and found.fd == r

        monkeypatch.setenv("MEMFS_FUSE_READER", "pyfuse3")
        assert reader_mod.reader_after_init(before) is None
        monkeypatch.delenv("MEMFS_FUSE_READER")

        monkeypatch.setattr(pyfuse3, "__version__", "4.0.0", raising=False)
        assert reader_mod.reader_after_init(before) is None
        monkeypatch.undo()

        monkeypatch.setattr(reader_mod, "fuse_fds", lambda: before | {r, w})
        assert reader_mod.reader_after_init(before) is None
    finally:
        os.close(r)
        os.close(w)


async def test_queued_requests_are_read_without_a_turn_a_few_in_a_row() -> None:
    """Requests already queued (several programs at work, a close's RELEASE after its
    FLUSH) are read at once, with no turn given up, :data:`IN_A_ROW` at most in a row: then
    the other tasks get a turn."""
    async def handle(data: bytes) -> None:
        return

    loop = Loop(handle, max_tasks=1)
    steps = Steps()
    n = 3 * reader_mod.IN_A_ROW
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop.main)
            await trio.testing.wait_all_tasks_blocked()
            trio.lowlevel.add_instrument(steps)
            loop.send(b"x" * n)
            while len(loop.read_by) < n:
                await trio.lowlevel.checkpoint()
            trio.lowlevel.remove_instrument(steps)
            trio.lowlevel.notify_closing(loop.r)
    # One step to wake, then one more each IN_A_ROW requests.
    assert steps.count <= 1 + n // reader_mod.IN_A_ROW + 1, steps.count
    assert steps.count >= n // reader_mod.IN_A_ROW


async def test_the_reader_turns_in_the_spinners_window_and_the_end_stops_it() -> None:
    """After a request the reader turns while the spinner's window lasts (the other tasks
    get their turns, and the spinner says it turns), reads a request that comes meanwhile
    without sleeping on the descriptor, sleeps once the window is over (the next request
    adapts it, as when the spinner's own task sleeps), and stops when the session ends."""
    now = [0.0]
    spinner = Spinner(window=1.0, clock=lambda: now[0])
    turning: list[bool] = []

    async def handle(data: bytes) -> None:
        spinner.started()
        spinner.ended()

    loop = Loop(handle, max_tasks=1)
    loop.reader.spinner = spinner
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop.main)
            loop.send(b"x")
            while not loop.read_by:
                await trio.lowlevel.checkpoint()
            for _ in range(5):  # the other tasks get turns while it turns
                await trio.lowlevel.checkpoint()
                turning.append(spinner.spinning)
            assert turning == [True] * 5
            loop.send(b"y")
            while len(loop.read_by) < 2:
                await trio.lowlevel.checkpoint()
            assert spinner.woken == 0  # never asleep in between
            await trio.lowlevel.checkpoint()
            assert spinner.spinning
            now[0] = 5.0  # the window over: it sleeps on the descriptor
            await trio.testing.wait_all_tasks_blocked()
            assert not spinner.spinning
            loop.send(b"z")  # came long after: the window halves
            while len(loop.read_by) < 3:
                await trio.lowlevel.checkpoint()
            assert spinner.woken == 1 and spinner.window == 0.5
            loop.exited = True  # Reader.terminate(): pyfuse3.terminate(), then
            loop.reader.close()
    assert loop.task_count == 0 and not spinner.spinning
