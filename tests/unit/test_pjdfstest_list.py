"""The pjdfstest expected-failure list and TAP parsing, without running the suite."""

from __future__ import annotations

import pytest

from tests.integration import pjdfstest as pjd


def test_every_expected_failure_has_a_categorised_reason():
    lines, reasons = pjd.parse_expected(pjd.EXPECTED.read_text())
    assert len(reasons) > 5000
    assert all(r.split(":")[0] in pjd.CATEGORIES for r in reasons.values())
    assert not [c for c, r in reasons.items() if r.startswith("TODO:")], "reason TODO left"


@pytest.mark.parametrize("bad", [
    "rename/00.t:1-3",  # no reason
    "rename/00.t:1-3  because",  # no category
    "rename/00.t:x  by-design: no",  # bad check list
    "rename/00.t:1  real: a\nrename/00.t:1  real: b",  # listed twice
])
def test_a_malformed_list_is_refused(bad):
    with pytest.raises(ValueError):
        pjd.parse_expected(bad)


def test_parse_tap_failures_todo_and_unrun_checks():
    out = "1..5\nok 1\nnot ok 2 - tried 'x', expected 0, got EPERM\nnot ok 3 # TODO later\nok 4\n"
    r = pjd.parse_tap("a/00.t", out, 1)
    assert r.failed == ["a/00.t:2", "a/00.t:5"]
    assert pjd.parse_tap("a/01.t", "", 2).failed == ["a/01.t:plan"]
    assert pjd.parse_tap("a/02.t", "1..1\nok 1\n", 1).failed == ["a/02.t:exit"]


def test_update_keeps_reasons_drops_passing_and_marks_new(tmp_path):
    path = tmp_path / "expected.txt"
    path.write_text("# head\nx/00.t:1-3,5  by-design: why\ny/00.t:2  real: bug\n")
    removed, added = pjd.update_expected(
        {"x/00.t:1": "", "x/00.t:3": "", "x/00.t:5": "", "z/00.t:7": "not ok 7 - boom"}, path)
    assert (removed, added) == (2, 1)
    text = path.read_text()
    assert "x/00.t:1,3,5  by-design: why" in text and "y/00.t" not in text
    assert "z/00.t:7  TODO: first: not ok 7 - boom" in text
    _, reasons = pjd.parse_expected(text)
    assert set(reasons) == {"x/00.t:1", "x/00.t:3", "x/00.t:5", "z/00.t:7"}
