"""The spinner (memfs.fuse.spin): the trio thread turns for a short window after a request,
the window following how soon requests come, and nothing turns while none do."""

from __future__ import annotations

import trio
import trio.testing

from memfs.fuse.spin import CROWDED, MAX_WINDOW, MIN_WINDOW, Spinner


class Clock:
    """A clock that moves 1 µs each time it is read (a turn reads it once)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


async def test_the_window_follows_how_soon_requests_come() -> None:
    clock = Clock()
    spinner = Spinner(window=100e-6, clock=clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spinner.run)
        await trio.testing.wait_all_tasks_blocked()
        assert not spinner.spinning

        # A request soon after the last one: the window doubles (up to MAX_WINDOW) and the
        # thread turns for it after the request, then sleeps again.
        clock.now += 30e-6
        spinner.started()
        spinner.ended()
        assert spinner.window == MAX_WINDOW == 200e-6
        assert spinner.woken == 1
        start = clock.now
        await trio.testing.wait_all_tasks_blocked()  # returns once it no longer turns
        assert not spinner.spinning
        assert MAX_WINDOW <= clock.now - start < 2 * MAX_WINDOW

        # Requests far apart: halved each time, down to none; then it is not even woken.
        windows = []
        for _ in range(6):
            clock.now += 1.0
            spinner.started()
            spinner.ended()
            windows.append(spinner.window)
            await trio.testing.wait_all_tasks_blocked()
        assert windows == [100e-6, 50e-6, 25e-6, 12.5e-6, 0.0, 0.0]
        assert spinner.woken == 5
        turned = clock.now
        clock.now += 1.0
        spinner.started()
        spinner.ended()
        await trio.testing.wait_all_tasks_blocked()
        assert clock.now - turned < 1.0 + 10e-6  # no turning: the clock was hardly read

        # A burst again: from nothing to the shortest window, doubling from there.
        clock.now += 20e-6
        spinner.started()
        assert spinner.window == MIN_WINDOW
        spinner.ended()
        await trio.testing.wait_all_tasks_blocked()
        spinner.stop()


async def test_stop_ends_it_asleep_or_turning() -> None:
    # A clock that never moves: once woken, it would turn for ever.
    for wake in (False, True):
        spinner = Spinner(clock=lambda: 0.0)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(spinner.run)
                await trio.testing.wait_all_tasks_blocked()
                if wake:
                    spinner.started()
                await trio.sleep(0.01)
                assert spinner.spinning == wake
                spinner.stop()
        assert not spinner.spinning


async def test_overlapping_requests_stop_the_turning_for_a_while() -> None:
    """Two requests in progress at once (several programs at work, a commit gathering
    others' closes): their processes need the CPU more, so it neither wakes nor turns until
    CROWDED has passed without another overlap."""
    clock = Clock()
    spinner = Spinner(window=100e-6, clock=clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spinner.run)
        await trio.testing.wait_all_tasks_blocked()
        clock.now += 30e-6
        spinner.started()
        assert spinner.woken == 1
        spinner.started()  # a second request before the first is answered
        assert spinner.crowded_until > clock.now
        spinner.ended()
        spinner.ended()
        start = clock.now
        await trio.testing.wait_all_tasks_blocked()
        assert clock.now - start < 10e-6  # it stopped turning at once
        clock.now += 30e-6
        spinner.started()
        spinner.ended()
        assert spinner.woken == 1  # not woken while crowded
        clock.now += CROWDED
        spinner.started()
        spinner.ended()
        assert spinner.woken == 2
        assert spinner.in_flight == 0
        await trio.testing.wait_all_tasks_blocked()
        spinner.stop()
