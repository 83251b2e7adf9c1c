"""Round trips per write on PostgreSQL (issue 44, 4), counted by scripts/bench_pg_trips.py
from libpq's trace: a budget per operation of the round trips made while the write lock is
held (each one, at 2 ms a round trip, is 2 ms during which no other write of the store
commits). Counts, not timings: a change that adds a statement under the lock fails here
with the figures of every operation.

The budgets are today's counts: lower them when a change makes an operation cheaper.
"""

from __future__ import annotations

from tests.support.repo import load_script

trips = load_script("bench_pg_trips")

#: operation -> round trips under the write lock, at most (its COMMIT included).
BUDGETS = {
    # The store, the path free and the room in one read; the version, the memory and the
    # change in one statement; COMMIT.
    "create": 3,
    # The memory and its store in one read; the version, the memory, the change and the
    # retention prune in one statement; COMMIT.
    "update (content)": 3,
    # As an update, the target's path free in the same read.
    "rename (update path)": 3,
    "delete": 3,
    # Two a create (its SAVEPOINT and RELEASE ride with its statements); COMMIT.
    "batch of 16 creates": 18,
    # Its key looked up; the create; the key recorded (and old keys dropped) in one; COMMIT.
    "create with an Idempotency-Key": 5,
    "mount: write_path (new)": 3,
    "mount: write_path (overwrite)": 3,
    "mount: rename_path": 3,
    "mount: delete_path": 3,
}


def test_round_trips_under_the_lock(pg_cluster) -> None:
    name = pg_cluster.new_database(pg_cluster.template)
    try:
        rows = trips.measure(pg_cluster.url(name), 3)
    finally:
        pg_cluster.drop_database(name)
    got = {r["operation"]: r for r in rows}
    assert set(got) == set(BUDGETS)
    # Each took its lock as the API takes it (its store's scope): none counted 0 under it,
    # as an unscoped write's (which tries the global lock in a loop) once did.
    unlocked = sorted(op for op, r in got.items() if r["locked"] < 1)
    assert not unlocked, f"no write lock seen in: {unlocked}"
    over = {op: r for op, r in got.items() if r["locked"] > BUDGETS[op]}
    assert not over, "round trips over budget:\n" + trips.table(list(over.values()))


def test_a_round_trip_is_a_wait_for_the_answer() -> None:
    """The counter itself: statements sent together (a pipeline) are one round trip; the
    lock's round trip is not under the lock, those after it are, until the transaction ends
    (ReadyForQuery I); a prepared lock statement is known by its name."""
    trace = "\n".join([
        'F\t10\tQuery\t "BEGIN"', 'B\t10\tCommandComplete\t "BEGIN"', "B\t5\tReadyForQuery\t T",
        'F\t44\tParse\t "_pg3_1" "SELECT pg_advisory_xact_lock($1)" 1 NNNN',
        "F\t4\tSync", "B\t5\tReadyForQuery\t T",
        'F\t34\tBind\t "" "_pg3_1" 1 1 1 8 \'x\' 1 0', 'F\t9\tExecute\t "" 0', "F\t4\tSync",
        'B\t13\tCommandComplete\t "SELECT 1"', "B\t5\tReadyForQuery\t T",
        'F\t19\tParse\t "" "SAVEPOINT b" 0', 'F\t9\tExecute\t "" 0',
        'F\t19\tParse\t "" "INSERT INTO t VALUES ($1)" 1 NNNN', 'F\t9\tExecute\t "" 0',
        "F\t4\tSync", 'B\t14\tCommandComplete\t "SAVEPOINT"',
        'B\t15\tCommandComplete\t "INSERT 0 1"', "B\t5\tReadyForQuery\t T",
        'F\t11\tQuery\t "COMMIT"', 'B\t11\tCommandComplete\t "COMMIT"',
        "B\t5\tReadyForQuery\t I",
        'F\t13\tQuery\t "SELECT 1"', "B\t5\tReadyForQuery\t I",
    ])
    locks: set[str] = set()
    got = trips.count(trace, locks)
    assert (got.trips, got.locked, got.statements) == (6, 2, 6)
    assert locks == {"_pg3_1"}
