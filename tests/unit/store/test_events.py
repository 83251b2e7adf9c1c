"""``store.events`` (events.py): a session's events, the mounts' tool events, and how long events
are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memfs import (
    InvalidRequest,
    NotFound,
)
from memfs.store import MAX_MESSAGE_CHARS, MAX_SEND_EVENTS, Limits, Store, format_time, new_id
from tests.support.backend import Backend
from tests.support.dbstate import count_rows
from tests.support.storekit import RFC3339_Z, all_pages, res


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestEvents:
    def test_events(self, store: Store) -> None:
        s = store.stores.create("a").id
        sess = store.sessions.create([res(s)])
        evs = store.events.add(
            sess.id,
            [{"type": "agent.tool_use", "name": "cat", "input": {"operation": "read"}}]
            + [{"type": "agent.tool_result", "n": i} for i in range(4)],
        )
        assert all(e.id and e.processed_at for e in evs) and len({e.id for e in evs}) == 5
        assert RFC3339_Z.match(evs[0].processed_at)
        listed = store.events.list(sess.id).data
        assert [e.id for e in listed] == [e.id for e in evs]
        assert listed[0].body["name"] == "cat" and listed[0].to_dict()["type"] == "agent.tool_use"
        assert [e.id for e in store.events.list(sess.id, order="desc").data] == [
            e.id for e in evs[::-1]]
        res_only = store.events.list(sess.id, types=["agent.tool_result"]).data
        assert [e.body["n"] for e in res_only] == [0, 1, 2, 3]
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=1)
        assert [e.id for e in items] == [e.id for e in evs] and pages == 5
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=2, order="desc",
                                 types=["agent.tool_result"])
        assert [e.body["n"] for e in items] == [3, 2, 1, 0] and pages == 2
        assert len(store.events.list(sess.id, limit=1000).data) == 5
        with pytest.raises(InvalidRequest):
            store.events.add(sess.id, [{"no": "type"}])
        with pytest.raises(NotFound):
            store.events.add("sesn_nope", [{"type": "x"}])
        with pytest.raises(NotFound):
            store.events.list("sesn_nope")


def test_record_tool_events_records_a_mounts_own_events_as_they_are(store):
    """The trusted path of the event flusher: the rows stored as given, in order."""
    import json

    from memfs.fuse.toolevents import tool_pair

    def rows(events):
        return [(e["id"], e["type"], e["processed_at"], json.dumps(e, ensure_ascii=False))
                for e in events]

    s = store.stores.create("a").id
    sess = store.sessions.create([res(s)])
    pairs = tool_pair("cat", 7, "read", "/mnt/memory/a/é.md", text="read é") + tool_pair(
        "sh", 8, "write", "/mnt/memory/a/b.md", failure="No space")
    assert store.events.record_tool_events(sess.id, rows(pairs), store_id=s) == 4
    listed = store.events.list(sess.id).data
    assert [e.body for e in listed] == pairs
    assert [(e.id, e.type, e.processed_at) for e in listed] == [
        (p["id"], p["type"], p["processed_at"]) for p in pairs]
    # A mount without a session: kept with the store only.
    assert store.events.record_tool_events(None, rows(tool_pair("cat", 1, "read", "/x")),
                                    store_id=s) == 2
    assert len(store.events.list(sess.id).data) == 4
    # A lone surrogate cannot reach the database (every reader would fail on it).
    bad = tool_pair("cat", 1, "read", "/x", text="bad \udc80")
    store.events.record_tool_events(sess.id, rows(bad), store_id=s)
    assert store.events.list(sess.id).data[-1].body["content"][0]["text"] == "bad ?"
    with pytest.raises(NotFound):
        store.events.record_tool_events("sesn_nope", rows(pairs))


def test_session_events_of_several_stores_list_in_time_order(store):
    """Each mount of a session flushes its own batch of tool events, so one store's batch lands
    after another's although its events happened in between: the timeline follows
    processed_at (ties in the order recorded), in both orders and across pages."""
    import json

    a, b = store.stores.create("a").id, store.stores.create("b").id
    sess = store.sessions.create([res(a), res(b)])

    def rows(times: list[str]) -> list[tuple[str, str, str, str]]:
        made = []
        for t in times:
            e = {"id": new_id("sevt"), "type": "agent.tool_use", "processed_at": t,
                 "name": "cat", "input": {"operation": "read"}}
            made.append((e["id"], e["type"], t, json.dumps(e)))
        return made

    at = "2026-05-01T04:51:5{}.000000Z".format
    # Store a's batch (04:51:56, :58) is flushed first, b's (:55, :57, and :58 again) after.
    first, second = rows([at(6), at(8)]), rows([at(5), at(7), at(8)])
    store.events.record_tool_events(sess.id, first, store_id=a)
    store.events.record_tool_events(sess.id, second, store_id=b)
    want = [second[0][0], first[0][0], second[1][0], first[1][0], second[2][0]]
    assert [e.id for e in store.events.list(sess.id).data] == want
    assert [e.id for e in store.events.list(sess.id, order="desc").data] == want[::-1]
    for order, expected in (("asc", want), ("desc", want[::-1])):
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=2, order=order)
        assert [e.id for e in items] == expected and pages == 3
    # The time filters and types still apply with the time order.
    later = store.events.list(sess.id, created_at_gt=at(6)).data
    assert [e.id for e in later] == want[2:]


class TestEventBounds:
    def test_events_of_deleted_sessions_and_old_mount_events_go(self, backend: Backend) -> None:
        s = backend.open(limits=Limits(retention_days=1))
        try:
            st = s.stores.create("n").id
            kept = s.sessions.create([])
            gone = s.sessions.create([])
            for sess in (kept.id, gone.id):
                s.events.send(sess, [{"type": "user.message", "content": []}])
            s.events.add_tool_events(None, [
                {"type": "agent.tool_use", "id": "sevt_old", "name": "bash",
                 "processed_at": format_time(datetime.now(UTC) - timedelta(hours=30)),
                 "input": {}},
                {"type": "agent.tool_use", "id": "sevt_new", "name": "bash",
                 "processed_at": format_time(datetime.now(UTC)), "input": {}},
            ], store_id=st)
            s.sessions.delete(gone.id)
            n_kept = count_rows(s, "events", "session_id = ?", (kept.id,))
            # right after the deletion its events stay (a live stream still ends on
            # session.deleted); mount events inside the retention window stay
            s.versions.prune()
            assert count_rows(s, "events", "session_id = ?", (gone.id,)) > 0
            assert count_rows(s, "events", "session_id IS NULL") == 1  # sevt_old is past 1 day
            s.versions.prune(now=datetime.now(UTC) + timedelta(hours=2))
            assert count_rows(s, "events", "session_id = ?", (gone.id,)) == 0
            assert count_rows(s, "events", "session_id = ?", (kept.id,)) == n_kept
            s.versions.prune(now=datetime.now(UTC) + timedelta(days=40))
            assert count_rows(s, "events", "session_id = ?", (kept.id,)) == n_kept  # the audit log
            assert count_rows(s, "events", "session_id IS NULL") == 0
        finally:
            s.close()


def _text(kind: str, text: str) -> dict:
    return {"type": kind, "content": [{"type": "text", "text": text}]}


class TestMessages:
    """The conversation's messages (issue 43): ``agent.message`` from the session itself,
    limits named in the refusal, and nothing of a refused request recorded."""

    def test_an_agent_message_from_the_session_itself(self, store: Store) -> None:
        sess = store.sessions.create([]).id
        sent = store.events.send(sess, [_text("user.message", "hi"),
                                        _text("agent.message", "hello")], as_session=sess)
        assert [e.type for e in sent] == ["user.message", "agent.message"]
        listed = store.events.list(sess, types=["agent.message"]).data
        assert [e.body["content"] for e in listed] == [[{"type": "text", "text": "hello"}]]
        assert listed[0].id.startswith("sevt_")

    def test_an_agent_message_from_anyone_else_is_refused(self, store: Store) -> None:
        from memfs.errors import Forbidden

        sess, other = store.sessions.create([]).id, store.sessions.create([]).id
        for as_session in (None, other):
            with pytest.raises(Forbidden, match="agent.message"):
                store.events.send(sess, [_text("user.message", "a"),
                                         _text("agent.message", "b")], as_session=as_session)
        # a user.message needs no session (a harness posts it as today)
        store.events.send(sess, [_text("user.message", "from the harness")])
        assert [e.type for e in store.events.list(sess).data] == ["user.message"]

    @pytest.mark.parametrize("events, match", [
        ([_text("user.message", "x" * (MAX_MESSAGE_CHARS + 1))], "MAX_MESSAGE_CHARS"),
        ([_text("agent.message", "x" * MAX_MESSAGE_CHARS + "y")], "100000 characters"),
        ([{"type": "agent.message", "content": [{"type": "text", "text": "x" * 60_000}] * 2}],
         "MAX_MESSAGE_CHARS"),
        ([_text("user.message", "ok")] * (MAX_SEND_EVENTS + 1), "MAX_SEND_EVENTS"),
        ([_text("user.message", "ok"), {"type": "agent.message"}], "content"),
        ([{"type": "agent.message", "content": "text"}], "content"),
        ([{"type": "agent.message", "content": [{"type": "image", "source": {}}]}],
         "text, redacted"),
        ([{"type": "agent.message", "content": [{"type": "text"}]}], "string 'text'"),
        ([{"type": "agent.message", "content": [{"type": "text", "text": 5}]}], "string"),
        ([{"type": "user.message", "content": ["x"]}], "not str"),
        ([{"type": "user.message", "content": [{"type": ["text"]}]}], "not"),
        ([{"type": "user.message", "content": [None]}], "not NoneType"),
        ([_text("user.message", "ok"), _text("agent.message", "\ud800")], "surrogate|UTF-8"),
        # review 43 #1: only text was counted; one message stored ~3 MB of anything else
        ([{"type": "agent.message", "content": [{"type": "redacted", "pad": "j" * 3_000_000}]}],
         "not a key of a redacted block"),
        ([{"type": "agent.message", "content": [{"type": "text", "text": "ok",
                                                 "extra": "y"}]}], "not a key of a text block"),
        ([{"type": "agent.message", "content": [{"type": "text", "text": "ok"}], "junk": "q"}],
         "not a key of an agent.message"),
        ([{"type": "user.message", "content": [{"type": "image",
                                                "source": {"data": "z" * 10}}]}], "source"),
        ([{"type": "user.message", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "z" * 3_000_000}}]}],
         "MAX_EVENT_CHARS"),
        ([{"type": "user.message", "content": [{"type": "document", "source": {
            "type": "url", "url": "https://x.invalid/", "extra": 1}}]}], "not a key"),
        ([{"type": "user.message", "content": [{"type": "document", "title": 5, "source": {
            "type": "url", "url": "https://x.invalid/"}}]}], "title"),
        ([{"type": "user.interrupt", "junk": "q" * 3_000_000}], "MAX_EVENT_CHARS"),
        ([{"type": "agent.message", "content": [{"type": "text", "text": "ok",
                                                 "source": {"type": "url"}}]}], "not a key"),
        ([{"type": "user.interrupt", "junk": "q" * 200_000}] * 30, "MAX_SEND_CHARS"),
    ])
    def test_limits_and_shapes_refuse_the_whole_request(self, store: Store, events: list,
                                                         match: str) -> None:
        sess = store.sessions.create([]).id
        with pytest.raises(InvalidRequest, match=match):
            store.events.send(sess, events, as_session=sess)
        assert store.events.list(sess).data == []

    def test_at_the_limits(self, store: Store) -> None:
        sess = store.sessions.create([]).id
        at_limit = [{"type": "agent.message", "content": [
            {"type": "text", "text": "x" * (MAX_MESSAGE_CHARS - 1)}, {"type": "redacted"},
            {"type": "text", "text": "é"}]}]
        store.events.send(sess, at_limit, as_session=sess)
        store.events.send(sess, [_text("user.message", "ok")] * MAX_SEND_EVENTS)
        assert len(store.events.list(sess, limit=1000).data) == MAX_SEND_EVENTS + 1

    def test_blocks_as_the_sdk_types_them(self, store: Store) -> None:
        """Every block and source of the SDK's (2.14.0) user.message params is accepted."""
        sess = store.sessions.create([]).id
        sources = [{"type": "base64", "media_type": "image/png", "data": "aGk="},
                   {"type": "url", "url": "https://x.invalid/a.png"},
                   {"type": "file", "file_id": "file_1"}]
        docs = [*sources, {"type": "text", "media_type": "text/plain", "data": "hi"}]
        content = ([{"type": "image", "source": src} for src in sources]
                   + [{"type": "document", "source": src, "title": "t", "context": None}
                      for src in docs] + [{"type": "redacted"}, {"type": "text", "text": "hi"}])
        (e,) = store.events.send(sess, [{"type": "user.message", "content": content}])
        assert e.body["content"] == content

    def test_ids_and_times_are_the_stores(self, store: Store) -> None:
        sess = store.sessions.create([]).id
        (e,) = store.events.send(sess, [{**_text("agent.message", "a"), "id": "sevt_mine",
                                         "processed_at": "2000-01-01T00:00:00Z"}],
                                 as_session=sess)
        assert e.id != "sevt_mine" and not e.processed_at.startswith("2000")


class TestAround:
    """``events.around``: one event with the events just before and after it (issue 43,
    "messages around a match"), in the listing's time order."""

    def _conversation(self, store: Store) -> tuple[str, list[str]]:
        sess = store.sessions.create([]).id
        ids = []
        for i in range(6):
            kind = "user.message" if i % 2 == 0 else "agent.message"
            ids += [e.id for e in store.events.send(sess, [_text(kind, f"m{i}")],
                                                    as_session=sess)]
            store.events.add(sess, [{"type": "agent.tool_use", "name": "cat", "input": {}}])
        return sess, ids

    def test_the_events_around_one(self, store: Store) -> None:
        sess, ids = self._conversation(store)
        every = [e.id for e in store.events.list(sess, limit=100).data]
        at = every.index(ids[3])
        got = [e.id for e in store.events.around(sess, ids[3], context=2)]
        assert got == every[at - 2:at + 3]
        # the first and the last: what there is on each side
        assert [e.id for e in store.events.around(sess, every[0], context=3)] == every[:4]
        assert [e.id for e in store.events.around(sess, every[-1], context=3)] == every[-4:]
        assert [e.id for e in store.events.around(sess, ids[3], context=0)] == [ids[3]]

    def test_types_narrow_what_is_around_not_the_event_itself(self, store: Store) -> None:
        sess, ids = self._conversation(store)
        msgs = ["user.message", "agent.message"]
        got = store.events.around(sess, ids[3], context=2, types=msgs)
        assert [e.id for e in got] == ids[1:6]
        assert [e.body["content"][0]["text"] for e in got] == ["m1", "m2", "m3", "m4", "m5"]
        tool = store.events.list(sess, types=["agent.tool_use"]).data[2].id
        got = store.events.around(sess, tool, context=1, types=msgs)
        assert [e.id for e in got] == [ids[2], tool, ids[3]]

    def test_same_time_events_keep_their_recorded_order(self, store: Store) -> None:
        import json

        sess = store.sessions.create([]).id
        t = "2026-05-01T04:51:56.000000Z"
        rows = []
        for i in range(5):
            e = {"id": new_id("sevt"), "type": "agent.tool_use", "processed_at": t, "n": i}
            rows.append((e["id"], e["type"], t, json.dumps(e)))
        store.events.record_tool_events(sess, rows)
        got = store.events.around(sess, rows[2][0], context=1)
        assert [e.body["n"] for e in got] == [1, 2, 3]

    @pytest.mark.parametrize("context", [-1, 101, True, "3", 1.5, None])
    def test_a_bad_context(self, store: Store, context: object) -> None:
        sess, ids = self._conversation(store)
        with pytest.raises(InvalidRequest, match="MAX_AROUND_CONTEXT"):
            store.events.around(sess, ids[0], context=context)  # type: ignore[arg-type]

    def test_an_unknown_event_or_session(self, store: Store) -> None:
        sess, ids = self._conversation(store)
        other = store.sessions.create([]).id
        for session_id, event_id in ((sess, "sevt_nope"), (other, ids[0]),
                                     ("sesn_nope", ids[0])):
            with pytest.raises(NotFound):
                store.events.around(session_id, event_id)
