"""Shared fixtures: a store on a fresh database in tmp_path, and the same on either backend.

``backend`` runs a test once on SQLite and once on PostgreSQL (a throwaway cluster started
once per test session, :mod:`tests.support.pgcluster`, and one database in it, emptied before
each test). Without PostgreSQL installed the PostgreSQL runs skip, except when ``CI=true``:
then they fail (:func:`tests.support.need`, the one gate). Helpers the tests share are in
:mod:`tests.support`; no test module imports another.

A test fails when memfs logs an ERROR (or worse) during it, unless it says it expects that:
``@pytest.mark.allow_error_logs`` (a test, or a module's ``pytestmark``), or the
``error_logs`` fixture, which also hands it the records to look at.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

from memfs.store import Limits, Store
from tests.support import need
from tests.support.backend import Backend


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "allow_error_logs: the test expects memfs to log errors (see tests/conftest.py)")


class _ErrorRecords(logging.Handler):
    """Keeps every record at ERROR or above that reaches it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _describe(record: logging.LogRecord) -> str:
    text = f"{record.levelname} {record.name}: {record.getMessage()}"
    if record.exc_info and record.exc_info[1] is not None:
        e = record.exc_info[1]
        text += f" [{type(e).__name__}: {e}]"
    return text


@pytest.fixture(autouse=True)
def _no_unexpected_error_logs(request: pytest.FixtureRequest
                              ) -> Iterator[list[logging.LogRecord]]:
    """Fail the test if a ``memfs`` logger logged at ERROR or above while it ran (its fixtures
    too), unless it expects that (``allow_error_logs``, ``error_logs``): an error logged and
    carried on from is a bug nobody sees, in a test that passes."""
    handler = _ErrorRecords()
    logger = logging.getLogger("memfs")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
    expected = (request.node.get_closest_marker("allow_error_logs") is not None
                or "error_logs" in request.fixturenames)
    if handler.records and not expected:
        lines = "\n".join(f"  {_describe(r)}" for r in handler.records)
        pytest.fail(f"memfs logged {len(handler.records)} error(s) this test does not expect "
                    f"(mark it allow_error_logs, or ask for error_logs, if it should):\n{lines}",
                    pytrace=False)


@pytest.fixture
def error_logs(_no_unexpected_error_logs: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """The ERROR records memfs logs during the test, which the test expects (so they do not
    fail it): a test asks for this to say so, and may look at them."""
    return _no_unexpected_error_logs


@pytest.fixture(autouse=True)
def _clients_closed() -> Iterator[None]:
    """Close the SDK clients the test made with :func:`tests.support.server.sdk`."""
    yield
    from tests.support.server import made_clients

    while made_clients:
        made_clients.pop().close()


@pytest.fixture(autouse=True)
def _no_environment_across_tests() -> Iterator[None]:
    """A command run in-process (click's CliRunner) sets MEMFS_* variables for the processes
    it starts (``--log-format json`` sets MEMFS_LOG_FORMAT): they, and the log format the
    command chose, must not reach the next test (whose one-line errors came out as JSON)."""
    from memfs.daemons import logs

    saved = {k: v for k, v in os.environ.items() if k.startswith("MEMFS_")}
    yield
    for k in [k for k in os.environ if k.startswith("MEMFS_") and k not in saved]:
        del os.environ[k]
    os.environ.update(saved)
    logs._format = "text"


@pytest.fixture
def db_path(tmp_path, monkeypatch):
    path = tmp_path / "memfs.db"
    monkeypatch.setenv("MEMFS_DB", str(path))
    return path


@pytest.fixture
def store(db_path):
    s = Store(db_path, limits=Limits())
    yield s
    s.close()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """The test session's PostgreSQL cluster (started on first use, stopped at the end)."""
    from tests.support.pgcluster import start_cluster

    cluster = start_cluster()
    need(cluster is not None,
         "PostgreSQL is not installed (Debian's postgresql package: scripts/_setup.sh)")
    assert cluster is not None
    try:
        # A template with the schema migrated: each test's database is a copy of it.
        template = cluster.new_database()
        Store(cluster.url(template), limits=Limits()).close()
        cluster.template = template
        # The database of the tests that need one at a time (`backend`), emptied before each.
        cluster.shared = cluster.new_database(template)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path, monkeypatch) -> Iterator[Backend]:
    """A fresh, empty database on SQLite and then on PostgreSQL (MEMFS_DB names it). On
    PostgreSQL every change of a store (event of a session) must be inserted under its lock
    (tests/support/feedlocks.py): the test fails if one was not."""
    from tests.support.feedlocks import check_feed_locks

    breaches: list[str] = []
    if request.param == "sqlite":
        b = Backend("sqlite", str(tmp_path / "memfs.db"))
    else:
        cluster = request.getfixturevalue("pg_cluster")
        cluster.empty_database(cluster.shared)
        b = Backend("postgresql", cluster.url(cluster.shared))
        breaches = check_feed_locks(monkeypatch)
    monkeypatch.setenv("MEMFS_DB", b.url)
    try:
        yield b
    finally:
        b.close()
    assert not breaches, f"{len(breaches)} inserts without their lock; the first: {breaches[0]}"
