"""The ids and times the store makes and reads (common.py, over memfs.rules)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from memfs import (
    InvalidRequest,
)
from memfs.rules import format_ago, format_us
from memfs.store import Store, format_time, new_id, parse_time
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
