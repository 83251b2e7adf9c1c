"""What the tests share, in one place: test modules import from here (or get fixtures from a
``conftest.py``), never from one another (tests/unit/test_suite_rules.py checks it).

The gate and the waits are here; the rest by what it stands in for:
:mod:`~tests.support.server` (a real ``memfs serve``), :mod:`~tests.support.mount` (a real
``memfs mount`` and the FUSE checks around it), :mod:`~tests.support.session` (``memfs run``),
:mod:`~tests.support.remote` (remote mounts of a server), :mod:`~tests.support.messages` (a
scripted Messages API: the memory tool's and a dream's model),
:mod:`~tests.support.embedserver` (a scripted embedding service) and
:mod:`~tests.support.memories` (the search tests' store), :mod:`~tests.support.pgcluster` (a
throwaway PostgreSQL cluster) and :mod:`~tests.support.backend` (a test's database on either
backend), :mod:`~tests.support.posix_checks`, :mod:`~tests.support.fsops` (the handlers driven
in-process), :mod:`~tests.support.asgi` (the API app behind an httpx transport),
:mod:`~tests.support.dbstate` (a database's rows hashed, to compare before and after),
:mod:`~tests.support.cli` (every command; a failed command's one line),
:mod:`~tests.support.console` (the browser tests' sign-in),
:mod:`~tests.support.revocation` (a key's revocation and expiry measured across two servers)
and :mod:`~tests.support.repo` (a copy of the repository).

``need(condition, why)`` is the one "skip here, fail in CI" gate: what the machine lacks (FUSE,
root, PostgreSQL, a browser, pjdfstest's sources) skips a test locally and fails it when
``CI=true``, where everything must run. ``wait_until`` (and ``async_wait_until`` in trio)
waits for the code's own signal instead of a fixed sleep.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def need(condition: object, why: str) -> None:
    """Go on when ``condition`` holds; else skip the test (``why`` is its one-line reason in
    ``scripts/test``'s summary), or with ``CI=true`` fail it with that line, no traceback."""
    if condition:
        return
    import pytest  # here: the scripts that import a helper of this package run without it

    if in_ci():
        pytest.fail(f"required in CI: {why}", pytrace=False)
    pytest.skip(why)


def wait_until(predicate: Callable[[], T], timeout: float = 5.0, interval: float = 0.01,
               what: str | None = None) -> T:
    """Call ``predicate`` until it returns a truthy value (returned) or ``timeout`` seconds
    pass (TimeoutError, naming ``what`` or the predicate)."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            name = what or getattr(predicate, "__name__", repr(predicate))
            raise TimeoutError(f"{name} still false after {timeout} s")
        time.sleep(interval)


async def async_wait_until(predicate: Callable[[], T], timeout: float = 5.0,  # noqa: ASYNC109
                           interval: float = 0.005, what: str | None = None) -> T:
    """:func:`wait_until` in a trio task: the other tasks run while it waits."""
    import trio

    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            name = what or getattr(predicate, "__name__", repr(predicate))
            raise TimeoutError(f"{name} still false after {timeout} s")
        await trio.sleep(interval)
