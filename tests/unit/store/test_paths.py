"""Property-based tests of the path rules (API.md §2.16), the overlap rule, listings with
depth, and mount-path slugs (API.md §4.3)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memfs import (
    Actor,
    InvalidPath,
    Memory,
    MemoryPrefix,
    PathConflict,
    PathEncoding,
    PathTooLong,
)
from memfs.store import Limits, Store, slugify, validate_path, validate_prefix

ACTOR = Actor.api("apikey_prop")
SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
FORBIDDEN_CATEGORIES = ("Cc", "Cf", "Cs")


# Characters allowed in a segment: anything but '/', control, format, surrogate, U+2028/9.
seg_chars = st.characters(
    blacklist_categories=FORBIDDEN_CATEGORIES, blacklist_characters="/\u2028\u2029"
)


@st.composite
def segments(draw: Any, max_size: int = 8) -> str:
    s = unicodedata.normalize("NFC", draw(st.text(seg_chars, min_size=1, max_size=max_size)))
    assume(s not in (".", "..") and s and "/" not in s)
    assume(all(unicodedata.category(c) not in FORBIDDEN_CATEGORIES for c in s))
    return s


@st.composite
def valid_paths(draw: Any, max_segments: int = 20) -> str:
    segs = draw(st.lists(segments(), min_size=1, max_size=max_segments))
    path = "/" + "/".join(segs)
    assume(len(path.encode("utf-8")) <= 1024)
    assume(unicodedata.is_normalized("NFC", path))
    return path


# ------------------------------------------------------------------------------------------
# validate_path


@SETTINGS
@given(valid_paths())
def test_valid_paths_accepted(path: str) -> None:
    assert validate_path(path) == path
    assert validate_path(path.encode("utf-8")) == path
    assert validate_prefix(path + "/") == path + "/"


@SETTINGS
@given(
    valid_paths(max_segments=5),
    st.sampled_from(
        [chr(c) for c in range(0x20)] + ["\x7f", "\x85", "\u200b", "\u200e", "\ufeff", "\u2028",
                                         "\u2029", "\u00ad", "\u2060"]
    ),
    st.data(),
)
def test_control_and_format_chars_rejected(path: str, bad: str, data: Any) -> None:
    assert unicodedata.category(bad) in ("Cc", "Cf") or bad in "\u2028\u2029"
    pos = data.draw(st.integers(1, len(path)))
    broken = path[:pos] + bad + path[pos:]
    with pytest.raises(InvalidPath):
        validate_path(broken)


@SETTINGS
@given(valid_paths(max_segments=5), st.sampled_from([".", "..", ""]), st.data())
def test_dot_and_empty_segments_rejected(path: str, seg: str, data: Any) -> None:
    segs = path[1:].split("/")
    i = data.draw(st.integers(0, len(segs)))
    segs.insert(i, seg)
    broken = "/" + "/".join(segs)
    with pytest.raises(InvalidPath):
        validate_path(broken)


@settings(max_examples=30, deadline=None)
@given(st.lists(segments(max_size=3), min_size=21, max_size=30))
def test_more_than_20_segments_rejected(segs: list[str]) -> None:
    path = "/" + "/".join(segs)
    with pytest.raises(PathTooLong):
        validate_path(path)
    assert validate_path("/" + "/".join(segs[:20]))


@SETTINGS
@given(st.integers(1025, 3000), st.sampled_from(["a", "é", "€", "🎉"]))
def test_over_1024_bytes_rejected(size: int, ch: str) -> None:
    n = max(1, (size - 1) // len(ch.encode()))
    path = "/" + ch * n
    assume(len(path.encode()) > 1024)
    with pytest.raises(PathTooLong):
        validate_path(path)


def test_exactly_1024_bytes_ok() -> None:
    assert validate_path("/" + "a" * 1023)
    assert validate_path("/" + "é" * 511 + "a")  # 1 + 1022 + 1 bytes
    with pytest.raises(PathTooLong):
        validate_path("/" + "é" * 512)  # 1025 bytes


@SETTINGS
@given(valid_paths(max_segments=5))
def test_non_nfc_rejected(path: str) -> None:
    nfd = unicodedata.normalize("NFD", path)
    assume(nfd != path)
    with pytest.raises(PathEncoding):
        validate_path(nfd)


@pytest.mark.parametrize(
    "bad",
    ["", "a", "a/b", "/", "//", "/a/", "/a//b", "/e\u0301", "/\ud800", b"/\xff", b"/a\xc3"],
)
def test_examples_rejected(bad: Any) -> None:
    with pytest.raises(InvalidPath):
        validate_path(bad)


def test_lone_surrogate_and_bad_bytes_are_encoding_errors() -> None:
    for bad in ("/\udc80", b"/\xff"):
        with pytest.raises(PathEncoding):
            validate_path(bad)


# ------------------------------------------------------------------------------------------
# round trip and the overlap rule, against a model


@pytest.fixture(scope="module")
def mem_store() -> Any:
    s = Store(":memory:", limits=Limits())
    yield s
    s.close()


@SETTINGS
@given(valid_paths(), st.text(max_size=50))
def test_round_trip(mem_store: Store, path: str, content: str) -> None:
    assume(all(unicodedata.category(c) != "Cs" for c in content))
    sid = mem_store.stores.create("rt").id
    m = mem_store.memories.create(sid, path, content, actor=ACTOR)
    got = mem_store.memories.get_by_path(sid, path)
    assert (got.id, got.path, got.content) == (m.id, path, content)
    listed = mem_store.memories.list(sid).data
    assert [x.path for x in listed] == [path]
    parent = path.rsplit("/", 1)[0] + "/"
    assert [x.path for x in mem_store.memories.list(sid, path_prefix=parent).data] == [path]
    mem_store.stores.delete(sid)


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


# Small alphabets, so that paths share prefixes and overlap often; '-', '.' and '0' sit next
# to '/' in byte order, where range scans go wrong.
small_seg = st.sampled_from(["a", "b", "a-b", "a.b", "a0", "é", "Z", "a b"])
small_paths = st.lists(small_seg, min_size=1, max_size=4).map(lambda s: "/" + "/".join(s))


@SETTINGS
@given(st.lists(small_paths, min_size=1, max_size=25))
def test_overlap_rule_matches_model(mem_store: Store, paths: list[str]) -> None:
    sid = mem_store.stores.create("overlap").id
    live: list[str] = []
    for p in paths:
        blockers = [q for q in live if _overlaps(p, q)]
        if blockers:
            with pytest.raises(PathConflict) as e:
                mem_store.memories.create(sid, p, "x", actor=ACTOR)
            assert e.value.conflicting_path in blockers
        else:
            mem_store.memories.create(sid, p, "x", actor=ACTOR)
            live.append(p)
    assert sorted(m.path for m in mem_store.memories.tree(sid)) == sorted(live)
    mem_store.stores.delete(sid)


def _model_listing(live: list[str], prefix: str, depth: int) -> list[tuple[str, str]]:
    items: set[tuple[str, str]] = set()
    for p in live:
        if not p.startswith(prefix):
            continue
        rel = p[len(prefix):].split("/")
        if depth == 0 or len(rel) <= depth:
            items.add(("m", p))
        else:
            items.add(("p", prefix + "/".join(rel[:depth]) + "/"))
    return sorted(items, key=lambda i: i[1].encode())


@SETTINGS
@given(
    st.lists(small_paths, min_size=0, max_size=25),
    st.sampled_from(["/", "/a/", "/a-b/", "/a/b/", "/é/"]),
    st.integers(0, 4),
    st.integers(1, 4),
)
def test_listing_matches_model(
    mem_store: Store, paths: list[str], prefix: str, depth: int, limit: int
) -> None:
    sid = mem_store.stores.create("list").id
    live: list[str] = []
    for p in paths:
        if not any(_overlaps(p, q) for q in live):
            mem_store.memories.create(sid, p, p, actor=ACTOR)
            live.append(p)
    expected = _model_listing(live, prefix, depth)
    got: list[tuple[str, str]] = []
    page = None
    for _ in range(100):
        pg = mem_store.memories.list(sid, path_prefix=prefix, depth=depth, limit=limit, page=page)
        assert len(pg.data) <= limit
        for item in pg.data:
            if isinstance(item, MemoryPrefix):
                got.append(("p", item.path))
            else:
                assert isinstance(item, Memory)
                got.append(("m", item.path))
        page = pg.next_page
        if page is None:
            break
    assert got == expected  # same items, byte order, no prefix twice across pages
    mem_store.stores.delete(sid)


# ------------------------------------------------------------------------------------------
# slugs and mount paths

store_names = st.text(
    st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40
)


@SETTINGS
@given(store_names)
def test_slugify_shape(name: str) -> None:
    slug = slugify(name)
    assert re.fullmatch(r"[a-z0-9-]*", slug)
    assert not slug.startswith("-") and not slug.endswith("-")
    assert "--" not in slug
    assert slugify(slug) == slug


def test_slugify_examples() -> None:
    assert slugify("User Preferences!") == "user-preferences"
    assert slugify("  Notes  ") == "notes"
    assert slugify("a__b--c") == "a-b-c"
    assert slugify("日本語") == ""
    assert slugify("Café 2024") == "caf-2024"


@SETTINGS
@given(
    st.lists(
        st.one_of(store_names, st.sampled_from(["Notes", "notes", "notes-2", "NOTES 2", "!!", "",
                                                "notes-3", "Notes!"])).filter(bool),
        min_size=1,
        max_size=8,
    )
)
def test_mount_paths_unique(mem_store: Store, names: list[str]) -> None:
    ids = [mem_store.stores.create(n).id for n in names]
    sess = mem_store.sessions.create(
        [{"type": "memory_store", "memory_store_id": i} for i in ids]
    )
    paths = [r.mount_path for r in sess.resources]
    assert len(set(paths)) == len(paths)
    for r, name in zip(sess.resources, names, strict=True):
        assert r.name == name
        assert r.mount_path.startswith("/mnt/memory/")
        tail = r.mount_path[len("/mnt/memory/"):]
        assert "/" not in tail and tail
        base = slugify(name) or r.memory_store_id
        assert tail == base or re.fullmatch(re.escape(base) + r"-\d+", tail)
    # every plain slug is in use: a suffix is added only when the plain one is taken
    for r, name in zip(sess.resources, names, strict=True):
        assert "/mnt/memory/" + (slugify(name) or r.memory_store_id) in paths
