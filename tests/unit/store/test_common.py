"""The ids and times the store makes and reads (common.py, over memfs.rules)."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memfs import (
    InvalidRequest,
)
from memfs.models import ToolPair, complete_tool_results
from memfs.rules import format_ago, format_us
from memfs.store import Store, format_time, new_id, parse_time
from memfs.store.common import check_tool_events, tool_event_rows
from tests.support.backend import Backend
from tests.support.storekit import API, RFC3339_Z


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestIdsAndTime:
    def test_prefixes(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
        assert sid.startswith("memstore_") and m.id.startswith("mem_")
        assert m.memory_version_id.startswith("memver_") and sess.id.startswith("sesn_")
        assert sess.resources[0].id.startswith("sesrsc_")

    def test_strictly_increasing(self) -> None:
        ids = [new_id("mem") for _ in range(5000)]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert all(re.fullmatch(r"mem_01[1-9A-HJ-NP-Za-km-z]{22}", i) for i in ids[:50])

    def test_ids_made_in_batches_are_strictly_increasing_with_the_others(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from memfs import rules
        from memfs.rules import new_ids

        ids = []
        for i in range(2000):
            ids += new_ids("sevt", 2) if i % 2 else [new_id("sevt")]
        assert ids == sorted(ids) and len(set(ids)) == len(ids) == 3000
        assert all(re.fullmatch(r"sevt_01[1-9A-HJ-NP-Za-km-z]{22}", i) for i in ids[:50])
        # The last two digits wrap (value % 58² == 58² - 1): the next id is formatted whole.
        monkeypatch.setattr(rules, "time", SimpleNamespace(time_ns=lambda: 0))
        monkeypatch.setattr(rules.secrets, "randbits", lambda k: 3363)
        monkeypatch.setattr(rules, "_last_id_value", 0)
        a, b, c = new_ids("sevt", 3)
        assert a < b < c and a[-2:] == "zz" and b[-2:] == "11" and c[-2:] == "12"
        assert b[:-2] != a[:-2]

    def test_an_id_is_its_value_in_base58(self) -> None:
        # _id_text (unrolled) writes the value's 22 base58 digits, the most significant
        # first, whatever digits are zero: decoding them gives the value back.
        import secrets

        from memfs.rules import _B58, _id_text

        values = [0, 1, 57, 58, 3363, 3364, 58**12 - 1, 58**12, 58**22 - 1, 2**128 - 1]
        values += [secrets.randbits(k) for k in range(1, 129) for _ in range(8)]
        for value in values:
            text = _id_text("mem", value)
            assert text.startswith("mem_01") and len(text) == 6 + 22
            decoded = 0
            for digit in text[6:]:
                decoded = decoded * 58 + _B58.index(digit)
            assert decoded == value

    def test_timestamps(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        for t in (m.created_at, m.updated_at, store.stores.get(sid).created_at):
            assert RFC3339_Z.match(t)
            assert parse_time(t).tzinfo is not None

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2024-05-06T07:08:09Z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
            ("2024-05-06T07:08:09.5Z", datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)),
            ("2024-05-06T09:08:09+02:00", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
            ("2024-05-06T07:08:09.123456z", datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)),
            ("2024-05-06T07:08:09", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ],
    )
    def test_parse_time(self, text: str, expected: datetime) -> None:
        assert parse_time(text) == expected
        assert format_time(parse_time(text)).endswith("Z")

    def test_parse_time_rejects(self) -> None:
        for bad in ("", "soon", "2024-13-01T00:00:00Z"):
            with pytest.raises(InvalidRequest):
                parse_time(bad)
        naive = datetime(2024, 1, 1, 12)
        assert parse_time(naive) == datetime(2024, 1, 1, 12, tzinfo=UTC)

    def test_the_fast_formats_are_format_time(self) -> None:
        # format_us and format_ago (what every write's times and its prune's cutoff take)
        # write what format_time writes of the same instant, across the range they cover,
        # and format_ago falls back to it (overflow included) outside it.
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        times = [-30610224000_000000, -1, 0, 999_999, 1_765_000_000_123_456,
                 253402300799_999999]
        for us in times:
            t = epoch + timedelta(microseconds=us)
            assert format_us(us) == format_time(t)
            for days in (0.0, 1e-7, 1 / 3, 30.0, 365 * 900.0, 1e6):
                ago = timedelta(days=days)
                try:
                    want = format_time(t - ago)
                except OverflowError:
                    with pytest.raises(OverflowError):
                        format_ago(us, ago)
                else:
                    assert format_ago(us, ago) == want
        # Outside the years 1000-9999 too: the year 999 in four digits, and past 9999 the
        # error format_time's datetime raises (the review found "999-12-31…" and
        # "10000-01-01…").
        assert format_us(-30610224000_000001) == "0999-12-31T23:59:59.999999Z"
        with pytest.raises(OverflowError):
            format_us(253402300800_000000)

    def test_a_version_filter_out_of_range_in_utc_is_a_clear_error(self, store: Store,
                                                                   sid: str) -> None:
        # The year 1 at +14:00 is the year 0 in UTC, which Python cannot hold: the filter
        # was an OverflowError out of the store (an MCP client's history, the API's
        # created_at_lte), not an error that says what is wrong.
        for bad in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
            for name in ("created_at_lte", "created_at_gte"):
                with pytest.raises(InvalidRequest, match=f"invalid {name} .* in UTC"):
                    store.versions.list(sid, **{name: bad})


# ============================================================================================
# a mount's tool pair encoded from a template (common.tool_event_rows)


def _dict_pair(p: ToolPair) -> list[dict[str, Any]]:
    """The pair as the mount built it before ToolPair (fuse.toolevents.tool_pair's dicts,
    written out again here so that the reference does not come from the code under test)."""
    inp: dict[str, Any] = {"operation": p.operation, "file_path": p.file_path}
    if p.new_path is not None:
        inp["new_path"] = p.new_path
    inp["pid"] = p.pid
    use = {"type": "agent.tool_use", "id": p.use_id, "name": p.name, "input": inp,
           "processed_at": p.processed_at, "evaluated_permission": "allow",
           "evaluation": {"type": "always_allow"}, "session_thread_id": None}
    result: dict[str, Any] = {
        "type": "agent.tool_result", "id": p.result_id, "tool_use_id": p.use_id,
        "processed_at": p.processed_at, "is_error": p.failure is not None,
        "content": [{"type": "text", "text": p.failure if p.failure is not None else p.text}]}
    if p.failure is None:
        if p.memory_id is not None:
            result["memory_id"] = p.memory_id
        if p.memory_version_id is not None:
            result["memory_version_id"] = p.memory_version_id
    return [use, result]


_ODD = ["", "plain", "é ü 日本 🦉", 'a "quoted" name', "back\\slash\\", "tab\tnew\nline\r",
        "\x00\x01\x1f\x7f", "\u2028\u2029 \ufeff", "</script>", "/mnt/memory/s/d/é \"q\"\\.md"]
_pairs = st.builds(
    ToolPair,
    name=st.sampled_from(_ODD) | st.text(), pid=st.integers(0, 2**31),
    operation=st.sampled_from(["create", "write", "rename", "delete", "ré\"n"]),
    file_path=st.sampled_from(_ODD) | st.text(), new_path=st.none() | st.text(),
    text=st.sampled_from(_ODD) | st.text(), failure=st.none() | st.sampled_from(_ODD) | st.text(),
    processed_at=st.just("2025-12-01T08:32:18.123456Z"),
    use_id=st.just("sevt_01KBU5N7W3M5Y0Y1E0P7QJQ9ZZ"), result_id=st.just("sevt_0\"\\é"))
#: What the mount names in a pair before the store completes it: nothing, a memory (an
#: unlink), or a memory and its version (a rename that changes nothing). A version without
#: its memory is never made: the dicts would put memory_id after memory_version_id then.
_named = st.sampled_from([(None, None), ("mem_1", None), ("mem_é\"\\", "memver_1")])


class TestToolPairTemplate:
    """A mount's write hands the store a ToolPair (not two dicts); the store encodes it from a
    template to exactly what it stored of the dicts (tests/unit/fuse/test_fs_ops.py: the
    same of a mount's writes)."""

    @settings(max_examples=400, deadline=None)
    @given(pair=_pairs, named=_named, done=st.sampled_from(
        [(None, None), ("mem_done", None), ("mem_done", "memver_done")]),
           session=st.none() | st.just("sesn_1"))
    def test_the_template_is_the_json_of_the_dicts(
            self, pair: ToolPair, named: tuple[str | None, str | None],
            done: tuple[str | None, str | None], session: str | None) -> None:
        pair.memory_id, pair.memory_version_id = named
        dicts = _dict_pair(pair)
        complete_tool_results(dicts, *done)  # what the store did to the dicts
        complete_tool_results(pair, *done)
        rows = tool_event_rows(pair, session, "memstore_1")
        assert [r[5] for r in rows] == [json.dumps(e, ensure_ascii=False) for e in dicts]
        assert rows == tool_event_rows(dicts, session, "memstore_1")
        assert [r[:5] for r in rows] == [(e["id"], session, "memstore_1", e["type"],
                                          e["processed_at"]) for e in dicts]
        assert pair.events() == dicts  # what the mount logs
        assert [list(e) for e in pair.events()] == [list(e) for e in dicts]  # key order
        check_tool_events(pair)  # and the same rules pass it
        check_tool_events(dicts)

    def test_examples(self) -> None:
        base = ToolPair("vim", 7, "rename", "/mnt/memory/s/a é.md", "/mnt/memory/s/\"b\".md",
                        "renamed", None, "2025-12-01T08:32:18.123456Z", "sevt_a", "sevt_b")
        for change in [{}, {"new_path": None}, {"failure": "No such file: \\ \u2028"},
                       {"memory_id": "mem_x"}, {"memory_id": "mem_x", "memory_version_id": "v"},
                       {"text": "ctl \x00\x1b\x7f"}]:
            pair = dataclasses.replace(base, **change)
            bodies = [r[5] for r in tool_event_rows(pair, None, "memstore_1")]
            assert bodies == [json.dumps(e, ensure_ascii=False) for e in _dict_pair(pair)]
        use, result = tool_event_rows(dataclasses.replace(base, memory_id="m", failure="no"),
                                      None, "memstore_1")
        assert '"is_error": true' in result[5] and "memory_id" not in result[5]
        assert '"new_path": "/mnt/memory/s/\\"b\\".md", "pid": 7}' in use[5]

    @pytest.mark.parametrize("field", ["name", "file_path", "new_path", "text", "failure"])
    def test_a_surrogate_fails_as_in_the_dicts(self, field: str) -> None:
        pair = dataclasses.replace(
            ToolPair("sh", 1, "write", "/a", None, "ok", None, "2025-12-01T08:32:18Z",
                     "sevt_a", "sevt_b"), **{field: "bad \udc80"})
        check_tool_events(pair, text=False)  # left to the encoding
        with pytest.raises(InvalidRequest) as got:
            tool_event_rows(pair, None, "memstore_1")
        with pytest.raises(InvalidRequest) as want:
            tool_event_rows(_dict_pair(pair), None, "memstore_1")
        assert got.value.message == want.value.message
        assert "lone surrogate" in got.value.message
        with pytest.raises(InvalidRequest, match="lone surrogate"):
            check_tool_events(pair)

    def test_what_the_store_refuses_of_a_pair(self) -> None:
        good = ToolPair("sh", 1, "write", "/a", None, "ok", None, "2025-12-01T08:32:18Z",
                        "sevt_a", "sevt_b")
        for bad, match in [({"use_id": "x"}, "sevt_"), ({"result_id": ""}, "sevt_"),
                           ({"processed_at": "yesterday"}, "RFC 3339"),
                           ({"processed_at": ""}, "RFC 3339"),
                           ({"pid": True}, "pid"), ({"pid": "1"}, "pid"),
                           ({"text": None}, "text"), ({"memory_id": 3}, "text")]:
            with pytest.raises(InvalidRequest, match=match):
                check_tool_events(dataclasses.replace(good, **bad))
