"""What a memory says about itself (SPEC §8, memfs/store/frontmatter.py): its front matter read
as safe YAML (the fast path gives what ``yaml.safe_load`` gives), the store's types, what is
derived, and the rule that front matter never makes a write fail."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfs import InvalidRequest
from memfs.store import Limits, Store
from memfs.store import frontmatter as fm
from tests.support.storekit import API

NOW = "2026-12-06T12:00:00.000000Z"
DEFAULT = fm.registry({})


def derive(path: str, text: str, types: fm.Registry = DEFAULT) -> fm.Derived:
    return fm.derive(path, text, types, NOW)


# -- the fast path is YAML ---------------------------------------------------------------------

_KEYS = st.sampled_from(["type", "importance", "expires", "tags", "description", "pinned",
                         "source", "supersedes", "x", "on", "y", "No", "a-b", "_k", "null"])
_SAMPLES = [
    "", "context", "high", "0.5", ".5", "1.", "0", "1", "00", "1.0", "yes", "No", "OFF", "y",
    "n", "~", "null", "never", "7d", "2026-12-31", "2026-12-31T10:00:00Z", "[a, b]", "'quoted'",
    "\"q\"", "a: b", "a #c", "/p/x.md", "a  b", "a b ", ".inf", "-1", "+1", "1e3", "0x1F", "0o7",
    "3", "42.5", "10.", "1_000", "07", "1.2.3", "12:30", "!!str x", "&a x", "*a", "|", ">", "@x",
    "`x", "%x", "a\tb",
]
_VALUES = st.one_of(
    st.sampled_from(_SAMPLES),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",),
                          exclude_characters="\n\r\x85\u2028\u2029"), max_size=12),
)


_FLOW = st.lists(st.one_of(_VALUES, st.sampled_from(["a", "b c", "1", "yes", "", " "])),
                 max_size=4).map(lambda items: "[" + ", ".join(items) + "]")


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(_KEYS, st.one_of(_VALUES, _FLOW)), max_size=6))
def test_the_fast_path_reads_what_yaml_reads(pairs: list[tuple[str, str]]) -> None:
    raw = "".join(f"{k}: {v}\n" if v else f"{k}:\n" for k, v in pairs)
    fast = fm._fast(raw)
    if fast is None:
        return  # not simple enough: libyaml reads it
    assert fast == yaml.safe_load(raw) or (fast == {} and yaml.safe_load(raw) is None)


@pytest.mark.parametrize("value", _SAMPLES)
def test_the_fast_path_reads_each_sample_as_yaml_does(value: str) -> None:
    for raw in (f"k: {value}\n", f"k: [{value}, a]\n", f"{value}: k\n"):
        fast = fm._fast(raw)
        assert fast is None or fast == yaml.safe_load(raw), raw


def test_the_fast_path_takes_the_usual_front_matter() -> None:
    raw = ("type: context\nimportance: high\ndescription: what the sprint needs\n"
           "pinned: true\ntags: [api, v2, 3]\n")
    assert fm._fast(raw) == {"type": "context", "importance": "high",
                             "description": "what the sprint needs", "pinned": True,
                             "tags": ["api", "v2", 3]}


# -- front matter never makes a write fail -----------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@pytest.fixture(scope="module")
def one_store() -> Iterator[tuple[Store, str]]:
    with Store(":memory:", limits=Limits()) as s:
        yield s, s.stores.create("n").id


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TEXT, _TEXT.map(lambda t: "---\n" + t),
                 st.tuples(_TEXT, _TEXT).map(lambda p: f"---\n{p[0]}\n---\n{p[1]}"),
                 st.lists(st.tuples(_KEYS, _VALUES), max_size=6).map(
                     lambda ps: "---\n" + "".join(f"{k}: {v}\n" for k, v in ps) + "---\nbody")))
def test_any_text_that_was_a_memory_still_writes(one_store: tuple[Store, str],
                                                 text: str) -> None:
    s, sid = one_store
    for path in ("/a.md", "/context/a.md", "/preferences/b.md"):
        m = s.memories.write_path(sid, path, text, actor=API)
        assert s.memories.get(sid, m.id).content == text  # stored as written
        assert m.memfs_meta is not None
        assert s.memories.get(sid, m.id).memfs_meta == m.memfs_meta


def test_bad_values_are_kept_as_written_and_reported() -> None:
    text = ("---\ntype: urgent\nimportance: very\nexpires: someday\ntags: {a: 1}\npinned: maybe\n"
            "supersedes: notes.md\ndescription: |\n  two\n  lines\n---\nbody\n")
    d = derive("/knowledge/x.md", text)
    assert d.type == "knowledge" and d.importance == 0.5  # the directory's, in their place
    assert len(d.warnings) == 7, d.warnings
    assert any("urgent" in w and "knowledge" in w for w in d.warnings)
    assert any(w.startswith("importance:") for w in d.warnings)
    assert any(w.startswith("expires:") for w in d.warnings)
    assert any(w.startswith("tags:") for w in d.warnings)
    assert any(w.startswith("pinned:") for w in d.warnings)
    assert any(w.startswith("supersedes:") for w in d.warnings)
    assert any("description" in w for w in d.warnings) and d.description == "two"


@pytest.mark.parametrize("text, warning", [
    ("---\na: [1, 2\n---\n", "not valid YAML (line 3): did not find expected"),
    ("---\n- a\n- b\n---\n", "not a mapping"),
    ("---\ntype: context\n" + "x: y\n" * 1200 + "---\n", "does not close"),
    ("---\ntype: context\nno end\n", "does not close"),
])
def test_front_matter_that_cannot_be_read_is_a_warning(text: str, warning: str) -> None:
    d = derive("/a.md", text)
    assert d.type is None and any(warning in w for w in d.warnings), d.warnings


def test_a_markdown_rule_is_not_front_matter() -> None:
    assert derive("/a.md", "---\n\nA rule, then text.\n") == fm.NOTHING
    assert derive("/a.md", "--- not a fence\nx: y\n---\n") == fm.NOTHING


def test_front_matter_closes_within_its_first_4_kib() -> None:
    head = "---\ntype: decision\n"
    pad = "description: " + "x" * (fm.FRONT_MATTER_MAX - len(head) - 40) + "\n"
    assert derive("/a.md", head + pad + "---\nbody").type == "decision"
    assert derive("/a.md", head + pad + "x" * 60 + "\n---\nbody").type is None


# -- what is derived ---------------------------------------------------------------------------

def test_a_memory_takes_the_type_of_its_directory() -> None:
    d = derive("/context/today.md", "standup at 10")
    assert (d.type, d.importance, d.expires_at) == ("context", 0.2,
                                                    "2026-12-13T12:00:00.000000Z")
    assert derive("/preferences/x.md", "x").importance == 0.8
    assert derive("/notes/context/x.md", "x") == fm.NOTHING  # only a store's top directory
    assert derive("/contexts.md", "x") == fm.NOTHING


def test_front_matter_wins_over_the_directory() -> None:
    d = derive("/context/x.md", "---\ntype: decision\nexpires: never\n---\n")
    assert (d.type, d.importance, d.expires_at) == ("decision", 0.8, None)
    d = derive("/context/x.md", "---\nexpires: never\nimportance: 0.9\n---\n")
    assert (d.type, d.importance, d.expires_at) == ("context", 0.9, None)


@pytest.mark.parametrize("value, expected", [
    ("never", None),
    ("7d", "2026-12-13T12:00:00.000000Z"),
    ("12h", "2026-12-07T00:00:00.000000Z"),
    ("1d12h", "2026-12-08T00:00:00.000000Z"),
    ("2w", "2026-12-20T12:00:00.000000Z"),
    ("2027-01-01", "2027-01-01T00:00:00.000000Z"),
    ("2027-01-01T08:30:00Z", "2027-01-01T08:30:00.000000Z"),
    ("2027-01-01 08:30:00+02:00", "2027-01-01T06:30:00.000000Z"),
    ("'2027-01-01'", "2027-01-01T00:00:00.000000Z"),
])
def test_expires(value: str, expected: str | None) -> None:
    d = derive("/a.md", f"---\nexpires: {value}\n---\n")
    assert d.expires_at == expected and not d.warnings


def test_every_key_memfs_reads() -> None:
    d = derive("/k/a.md", "---\ntype: knowledge\nimportance: low\ntags: [api, 'v2', 3]\n"
                          "description: How we version the API\npinned: yes\n"
                          "supersedes: [/k/old.md, /k/older.md]\nsource: https://x.test/a\n"
                          "owner: me\n---\nbody")
    assert d == fm.Derived("knowledge", 0.2, None, True, ("api", "v2", "3"),
                           "How we version the API", ("/k/old.md", "/k/older.md"),
                           "https://x.test/a")
    assert derive("/a.md", "---\ntags: a, b ,a\n---\n").tags == ("a", "b")


# -- the store's types -------------------------------------------------------------------------

def test_a_store_s_metadata_redefines_its_types_or_turns_them_off() -> None:
    custom = fm.registry({fm.TYPES_KEY: json.dumps(
        {"todo": {"directory": "/todo/", "importance": "high", "expires": "3d",
                  "scope": "workflow"}})})
    d = derive("/todo/a.md", "x", custom)
    assert (d.type, d.importance, d.expires_at) == ("todo", 0.8, "2026-12-09T12:00:00.000000Z")
    assert derive("/context/a.md", "x", custom) == fm.NOTHING
    off = fm.registry({fm.TYPES_KEY: "off"})
    assert derive("/context/a.md", "x", off) == fm.NOTHING
    d = derive("/a.md", "---\ntype: context\nexpires: 1d\n---\n", off)
    assert d.type is None and d.expires_at == "2026-12-07T12:00:00.000000Z"
    assert any("types are off" in w for w in d.warnings)


@pytest.mark.parametrize("value", [
    "nope", "[]", '{"Bad Name": {}}', '{"t": {"directory": "t"}}', '{"t": {"importance": 2}}',
    '{"t": {"expires": "soon"}}', '{"t": {"scope": "team"}}', '{"t": {"colour": "red"}}',
])
def test_a_registry_that_means_nothing_is_refused(value: str) -> None:
    with Store(":memory:", limits=Limits()) as s:
        with pytest.raises(InvalidRequest, match="memfs_types"):
            s.stores.create("n", metadata={fm.TYPES_KEY: value})
        sid = s.stores.create("n").id
        with pytest.raises(InvalidRequest, match="memfs_types"):
            s.stores.update(sid, metadata={fm.TYPES_KEY: value})
        with pytest.raises(InvalidRequest, match="memfs_expiry"):
            s.stores.update(sid, metadata={fm.EXPIRY_KEY: "sometimes"})


def test_a_new_registry_derives_every_memory_again() -> None:
    with Store(":memory:", limits=Limits()) as s:
        sid = s.stores.create("n").id
        m = s.memories.write_path(sid, "/context/a.md", "x", actor=API)
        assert m.memfs_meta is not None and m.memfs_meta.type == "context"
        s.stores.update(sid, metadata={fm.TYPES_KEY: "off"})
        after = s.memories.get(sid, m.id)
        assert after.memfs_meta is not None and after.memfs_meta.type is None
        assert after.memory_version_id == m.memory_version_id  # the text is the same
        s.stores.update(sid, metadata={fm.TYPES_KEY: None})
        assert s.memories.get(sid, m.id).memfs_meta == m.memfs_meta


def test_a_rename_takes_the_type_of_the_new_directory() -> None:
    with Store(":memory:", limits=Limits()) as s:
        sid = s.stores.create("n").id
        m = s.memories.write_path(sid, "/inbox/a.md", "x", actor=API)
        moved = s.memories.rename_path(sid, "/inbox/a.md", "/decisions/a.md", actor=API)
        assert moved.memfs_meta is not None and moved.memfs_meta.type == "decision"
        [back] = s.memories.rename_prefix(sid, "/decisions/", "/context/", actor=API)
        assert back.memfs_meta is not None and back.memfs_meta.type == "context"
        assert s.memories.get(sid, m.id).memfs_meta == back.memfs_meta


def test_the_time_of_an_expiry_is_from_the_last_change() -> None:
    before = dt.datetime.now(dt.UTC)
    with Store(":memory:", limits=Limits()) as s:
        sid = s.stores.create("n").id
        m = s.memories.write_path(sid, "/context/a.md", "x", actor=API)
    assert m.memfs_meta is not None and m.memfs_meta.expires_at is not None
    expires = dt.datetime.fromisoformat(m.memfs_meta.expires_at.replace("Z", "+00:00"))
    assert dt.timedelta(days=7) <= expires - before < dt.timedelta(days=7, seconds=60)


# -- what a review found could still fail a write ------------------------------------------------

_LAUGHS = "---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)
) + "source: *a9\ntags: *a9\n---\nbody"


@pytest.mark.parametrize("text", [
    "---\nexpires: 9999-12-31T23:59:59-05:00\n---\n",
    "---\nexpires: 0001-01-01T00:00:00+01:00\n---\n",
    "---\nsource: &a [*a]\n---\n",
    "---\nsource: {2020-01-01: x}\n---\n",
    "---\nsource: " + "[" * 990 + "]" * 990 + "\n---\n",
    "---\ntags: " + "[" * 990 + "]" * 990 + "\n---\n",
    _LAUGHS,
], ids=["far-future", "year-one", "self-alias", "date-key", "deep-source", "deep-tags",
        "billion-laughs"])
def test_no_front_matter_fails_a_write_or_grows_its_index(text: str) -> None:
    assert len(text.encode()) <= fm.FRONT_MATTER_MAX + 100
    d = derive("/context/a.md", text)
    assert d.type == "context" and d.warnings  # the directory's type, and a warning
    assert len(d.meta_json() or "") < 4 * fm.FRONT_MATTER_MAX
    with Store(":memory:", limits=Limits()) as s:
        sid = s.stores.create("n").id
        assert s.memories.write_path(sid, "/context/a.md", text, actor=API).content == text


def test_a_type_s_lifetime_is_bounded() -> None:
    with Store(":memory:", limits=Limits()) as s, pytest.raises(InvalidRequest, match="36500d"):
        s.stores.create("n", metadata={fm.TYPES_KEY: '{"context": {"expires": "900000000d"}}'})


def test_an_expiry_before_the_year_1000_sorts_as_past() -> None:
    d = derive("/a.md", "---\nexpires: 0999-01-01\n---\n")
    assert d.expires_at == "0999-01-01T00:00:00.000000Z" and d.expires_at < NOW


def test_a_value_kept_from_before_memfs_read_it_never_blocks_a_rename() -> None:
    with Store(":memory:", limits=Limits()) as s:
        sid = s.stores.create("n").id
        with s.write() as c:
            c.execute("UPDATE stores SET metadata = ? WHERE id = ?",
                      (json.dumps({fm.TYPES_KEY: "whatever"}), sid))
        assert s.stores.update(sid, name="renamed").name == "renamed"
        with pytest.raises(InvalidRequest):
            s.stores.update(sid, metadata={fm.TYPES_KEY: "still nothing"})
