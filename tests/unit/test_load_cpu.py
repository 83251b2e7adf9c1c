"""scripts/load's CPU figures (issue 44): a server's CPU per request counts the threads that
serve requests, not its background threads at the lowest priority (the indexer embedding
every new memory, the words catch-up), which take whatever CPU is idle: with PostgreSQL 2 ms
away the servers wait more, the indexer embeds more, and the CPU per create looked twice
what the requests cost."""

from __future__ import annotations

import os
import threading
import time

from memfs.background import lowest_priority
from tests.support.repo import load_script

load = load_script("load")


def _burn(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU (its own clock: no wall-clock timing)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(1000))


def test_the_cpu_of_background_threads_is_told_apart_from_the_requests() -> None:
    pid = os.getpid()
    total0, background0 = load.cpu_seconds([pid]), load.background_cpu_seconds([pid])

    def background() -> None:
        lowest_priority()
        _burn(0.5)
        burnt.set()
        done.wait()  # alive at the second reading, as an indexer is

    burnt, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=background)
    thread.start()
    try:
        _burn(0.5)  # a request's thread, at the normal priority
        assert burnt.wait(60)
        total = load.cpu_seconds([pid]) - total0
        bg = load.background_cpu_seconds([pid]) - background0
    finally:
        done.set()
        thread.join()
    assert bg >= 0.4
    assert total - bg >= 0.4  # the main thread's burn is not background
