"""memfs.store.schema: both backends know the same steps of the schema (VERSIONS), each made by
a migration of each backend or said not to need one, so that a migration added to one backend
and not the other fails here."""

from __future__ import annotations

import itertools

import pytest

from memfs.store import schema
from memfs.store.schema import VERSIONS, Version

DIALECTS = ("sqlite", "postgresql")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_backend_s_migrations_are_the_steps_of_versions_in_order(dialect: str) -> None:
    named = [v.migration(dialect) for v in VERSIONS]
    # A migration making several steps makes consecutive ones.
    runs = [name for name, _ in itertools.groupby(named) if name is not None]
    assert len(runs) == len(set(runs)), f"{dialect}: a migration named by steps apart: {runs}"
    assert schema.migration_names(dialect) == runs, (
        f"the {dialect} migrations and the steps of memfs.store.schema.VERSIONS disagree: "
        "a migration needs its row, naming what each backend does")


def test_a_step_names_a_migration_of_both_backends_or_says_why_not() -> None:
    for v in VERSIONS:
        for dialect in DIALECTS:
            assert v.migration(dialect) is not None or v.none_because, (v, dialect)
    assert VERSIONS[0].sqlite == VERSIONS[0].postgresql == "m001_initial"
    assert VERSIONS[-1].migration("sqlite") == schema.migration_names("sqlite")[-1]
    with pytest.raises(ValueError, match="no reason"):
        Version("a table", sqlite="m099_table", postgresql=None)


def test_both_backends_record_their_migrations_in_one_set() -> None:
    from memfs.store.schema import postgresql, sqlite

    assert schema.MIGRATION_SET == "memfs"
    assert sqlite.migration_set().name == postgresql.MIGRATION_SET == schema.MIGRATION_SET
