"""Model-based test of ``store.undo.revert`` (hypothesis): random write sequences by two sessions A
and B (create/modify, rename, rename over a memory, delete) on two stores, then revert A, with
and without ``--force``, and check every memory against an independent model; then revert the
revert and check that the state returns.

Before the sessions a user writes a few memories (so that A changes, renames and deletes
memories it did not create). The model keeps its own history of each memory (who wrote which
state, in order) and predicts every write's outcome (including PathConflict and NotFound, which
the store must agree with).
For a memory A touched, the expected result of the revert is the model's state just before A's
first write; "changed" conflicts must be exactly the memories B wrote after A's first write of
them that are not already back in that state (none with force). A memory whose pre-session path
is, after the revert, held by a memory that stays (the paths here include ``/d`` and ``/d/e``,
so the file/directory overlap rule takes part) must be reported ``path_taken`` and left as it
was; every other memory must be untouched.

Sizes: MEMFS_REVERT_EXAMPLES (default 400) examples of up to 30 writes; on PostgreSQL a third.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memfs import Actor, NotFound, PathConflict
from memfs.store import Limits, Store
from tests.support.backend import Backend

EXAMPLES = int(os.environ.get("MEMFS_REVERT_EXAMPLES", "400"))
PATHS = ["/a", "/b", "/c", "/d", "/d/e"]
REVERTER = Actor.user("user_reverter")

op = st.tuples(
    st.sampled_from("AB"),                       # which session
    st.integers(0, 1),                           # which store
    st.sampled_from(["write", "write", "rename", "delete"]),
    st.sampled_from(PATHS), st.sampled_from(PATHS),
    st.sampled_from(["x", "y", "z"]),
)


def _blocked(path: str, live: dict[str, str], me: str | None = None) -> bool:
    """Would ``path`` break the overlap rule against ``live`` (path -> memory id)?"""
    for p, m in live.items():
        if m == me:
            continue
        if p == path or p.startswith(path + "/") or path.startswith(p + "/"):
            return True
    return False


class Model:
    def __init__(self) -> None:
        self.live: list[dict[str, str]] = [{}, {}]        # store -> path -> memory id
        self.state: dict[str, tuple[str, str] | None] = {}  # memory id -> (path, content)
        self.store_of: dict[str, int] = {}
        self.log: list[tuple[str, str, tuple[str, str] | None]] = []  # (mid, who, state after)

    def put(self, si: int, mid: str, who: str, new: tuple[str, str] | None) -> None:
        old = self.state.get(mid)
        if old is not None:
            del self.live[si][old[0]]
        if new is not None:
            self.live[si][new[0]] = mid
        self.state[mid], self.store_of[mid] = new, si
        self.log.append((mid, who, new))


def _apply(s: Store, sids: list[str], actors: dict[str, Actor], m: Model, step: Any) -> None:
    who, si, kind, p, q, content = step
    sid, live, actor = sids[si], m.live[si], actors[who]
    if kind == "write":
        mid = live.get(p)
        if mid is None and _blocked(p, live):
            with pytest.raises(PathConflict):
                s.memories.write_path(sid, p, content, actor=actor)
            return
        got = s.memories.write_path(sid, p, content, actor=actor)
        if mid is None or m.state[mid] != (p, content):
            m.put(si, got.id, who, (p, content))
        assert mid is None or got.id == mid
    elif kind == "delete":
        if p not in live:
            with pytest.raises(NotFound):
                s.memories.delete_path(sid, p, actor=actor)
            return
        s.memories.delete_path(sid, p, actor=actor)
        m.put(si, live[p], who, None)
    else:
        src = live.get(p)
        if src is None:
            with pytest.raises(NotFound):
                s.memories.rename_path(sid, p, q, actor=actor)
            return
        if p == q:
            s.memories.rename_path(sid, p, q, actor=actor)
            return
        dst = live.get(q)
        if dst is not None:  # over a memory: it keeps its id and takes the content
            s.memories.rename_path(sid, p, q, actor=actor)
            c = m.state[src][1]  # type: ignore[index]
            if m.state[dst][1] != c:  # type: ignore[index]
                m.put(si, dst, who, (q, c))
            m.put(si, src, who, None)
        elif _blocked(q, live, src):
            with pytest.raises(PathConflict):
                s.memories.rename_path(sid, p, q, actor=actor)
        else:
            s.memories.rename_path(sid, p, q, actor=actor)
            m.put(si, src, who, (q, m.state[src][1]))  # type: ignore[index]


def _snapshot(s: Store, sids: list[str]) -> dict[str, tuple[int, str, str]]:
    """memory id -> (store index, path, content) of every live memory."""
    return {x.id: (i, x.path, s.memories.get(sid, x.id).content or "")
            for i, sid in enumerate(sids) for x in s.memories.tree(sid)}


def check(s: Store, seed: list[Any], steps: list[Any], force: bool) -> None:
    sids = [s.stores.create(f"s{i}").id for i in range(2)]
    res = [{"type": "memory_store", "memory_store_id": x} for x in sids]
    sessions = {k: s.sessions.create(res).id for k in "AB"}
    actors = {k: Actor.session(v) for k, v in sessions.items()}
    actors["U"] = Actor.user("user_before")
    m = Model()
    for si, p in seed:  # memories that exist before the sessions, written by a user
        _apply(s, sids, actors, m, ("U", si, "write", p, p, "u" + p))
    for step in steps:
        _apply(s, sids, actors, m, step)
    before = _snapshot(s, sids)
    assert before == {mid: (m.store_of[mid], *st_) for mid, st_ in m.state.items()
                      if st_ is not None}

    # The model's expectation for every memory A wrote.
    firsts = {}
    for i, (mid, who, _) in enumerate(m.log):
        if who == "A":
            firsts.setdefault(mid, i)
    pre: dict[str, tuple[str, str] | None] = {}
    changed, candidates = set(), set()
    for mid, i in firsts.items():
        earlier = [st_ for (x, _, st_) in m.log[:i] if x == mid]
        pre[mid] = earlier[-1] if earlier else None
        if m.state[mid] == pre[mid]:
            continue
        if any(x == mid and w == "B" for (x, w, _) in m.log[i + 1:]) and not force:
            changed.add(mid)
        else:
            candidates.add(mid)

    r = s.undo.revert(sessions["A"], actor=REVERTER, force=force)
    seen.update(a["action"] for a in r["actions"])
    seen.update(c["reason"] for c in r["conflicts"])
    seen.update("forced" for a in r["actions"] if a["forced"])
    after = _snapshot(s, sids)
    reported = {c["memory_id"]: c["reason"] for c in r["conflicts"]}
    assert {k for k, v in reported.items() if v == "changed"} == changed
    assert set(reported.values()) <= {"changed", "path_taken"}
    taken = {k for k, v in reported.items() if v == "path_taken"}
    assert taken <= candidates
    assert {a["memory_id"] for a in r["actions"]} == candidates - taken
    for mid in set(before) | set(after) | set(firsts):
        now = after.get(mid)
        if mid in candidates - taken:
            want = pre[mid]
            assert now == (None if want is None else (m.store_of[mid], *want)), mid
        else:
            assert now == before.get(mid), mid
    final_live = [{p: x for x, (i, p, _) in after.items() if i == si} for si in (0, 1)]
    for mid in taken:
        want = pre[mid]
        assert want is not None and _blocked(want[0], final_live[m.store_of[mid]], mid)

    if r["id"] is None:
        assert not r["actions"]
        return
    rr = s.undo.revert(r["id"], actor=REVERTER)
    assert rr["complete"] and _snapshot(s, sids) == before


#: What the reverts of a run did (printed: the examples must cover every kind of step).
seen: Counter[str] = Counter()


@pytest.mark.parametrize("force", [False, True])
def test_revert_matches_the_model(backend: Backend, force: bool) -> None:
    n = EXAMPLES if backend.name == "sqlite" else max(10, EXAMPLES // 3)
    seen.clear()
    store = backend.open(limits=Limits())
    t0 = time.monotonic()
    count = 0

    @settings(max_examples=n, deadline=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(PATHS)), max_size=6),
           st.lists(op, min_size=1, max_size=30))
    # Every kind of step at least once, whatever the random examples draw.
    @example(seed=[(0, "/a"), (0, "/c"), (1, "/d")], steps=[
        ("A", 0, "rename", "/a", "/b", ""), ("B", 0, "write", "/a", "/a", "y"),  # path_taken
        ("A", 0, "write", "/c", "/c", "x"), ("B", 0, "write", "/c", "/c", "y"),  # changed
        ("A", 1, "delete", "/d", "/d", ""), ("A", 1, "write", "/b", "/b", "x"),  # recreate, delete
        ("A", 1, "write", "/c", "/c", "x"), ("A", 1, "rename", "/c", "/a", ""),  # delete
    ])
    def run(seed: list[Any], steps: list[Any]) -> None:
        nonlocal count
        count += 1
        check(store, seed, steps, force)

    run()
    print(f"\nrevert model ({backend.name}, force={force}): {count} examples in "
          f"{time.monotonic() - t0:.1f}s; steps: {dict(sorted(seen.items()))}")
    kinds = {"delete", "recreate", "restore", "path_taken"} | {"forced" if force else "changed"}
    assert kinds <= set(seen), f"the examples missed {kinds - set(seen)}"
