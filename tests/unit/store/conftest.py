"""What the store's test modules share: a memory store to write in. Each module says on which
store (its own ``store`` fixture: most run on both backends, tests/conftest.py's ``backend``)."""

from __future__ import annotations

import pytest

from memfs.store import Store


@pytest.fixture
def sid(store: Store) -> str:
    return store.stores.create("Notes").id
