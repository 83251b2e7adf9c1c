"""Shared fixtures: a store on a fresh database in tmp_path."""

from __future__ import annotations

import pytest

from memfs.store import Limits, Store


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
