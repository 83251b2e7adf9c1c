"""Store.search.hits: the Console's search by path and by content."""

from __future__ import annotations

import pytest

from memfs import Actor, InvalidRequest, NotFound
from memfs.store import Store
from tests.support.backend import Backend

API = Actor.api("apikey_test")


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def sid(store: Store) -> str:
    s = store.stores.create("Notes").id
    store.memories.create(s, "/prefs/editor.md", "Use tabs. The Editor is vim.", actor=API)
    store.memories.create(s, "/prefs/shell.md", "zsh with oh-my-zsh", actor=API)
    store.memories.create(s, "/projects/editor-plugin.md", "a plugin", actor=API)
    store.memories.create(s, "/notes.md", "nothing about that", actor=API)
    return s


def _found(store: Store, sid: str, q: str, **kw: object) -> list[tuple[str, bool]]:
    return [(h.memory.path, h.in_path) for h in store.search.hits(sid, q, **kw)]


def test_path_hits_come_first_then_content_hits_in_path_order(store: Store, sid: str) -> None:
    assert _found(store, sid, "editor") == [
        ("/prefs/editor.md", True), ("/projects/editor-plugin.md", True)]
    assert _found(store, sid, "ZSH") == [("/prefs/shell.md", False)]
    assert _found(store, sid, "md") == [
        ("/notes.md", True), ("/prefs/editor.md", True), ("/prefs/shell.md", True),
        ("/projects/editor-plugin.md", True)]
    assert _found(store, sid, "md", limit=2) == [("/notes.md", True), ("/prefs/editor.md", True)]
    assert _found(store, sid, "emacs") == []


def test_content_hits_carry_a_snippet_around_the_first_occurrence(store: Store,
                                                                  sid: str) -> None:
    [hit] = store.search.hits(sid, "EDITOR is")
    assert hit.memory.path == "/prefs/editor.md" and hit.memory.content is None
    assert hit.snippet == ("Use tabs. The ", "Editor is", " vim.")  # as written in the memory
    [path_only] = store.search.hits(sid, "plugin.md")
    assert path_only.in_path and path_only.snippet is None

    long = "a" * 500 + "NEEDLE" + "b" * 500
    store.memories.create(sid, "/long.md", "é" * 10 + long, actor=API)
    [hit] = store.search.hits(sid, "needle")
    before, match, after = hit.snippet
    assert match == "NEEDLE"
    assert before == "a" * store.search.context and after == "b" * store.search.context
    # At the very start of the content, the snippet starts there.
    store.memories.create(sid, "/start.md", "Quokka then the rest", actor=API)
    assert store.search.hits(sid, "quokka")[0].snippet == ("", "Quokka", " then the rest")


def test_like_wildcards_and_the_escape_character_are_literal(store: Store, sid: str) -> None:
    store.memories.create(sid, "/rates.md", "a 100% rate", actor=API)
    store.memories.create(sid, "/snake_case.md", "x", actor=API)
    store.memories.create(sid, "/win.md", r"C:\temp\new", actor=API)
    assert _found(store, sid, "%") == [("/rates.md", False)]
    assert _found(store, sid, "0% r") == [("/rates.md", False)]
    assert _found(store, sid, "_") == [("/snake_case.md", True)]
    assert _found(store, sid, "e_c") == [("/snake_case.md", True)]
    assert _found(store, sid, "\\") == [("/win.md", False)]
    assert _found(store, sid, r"\t") == [("/win.md", False)]
    assert _found(store, sid, "%%") == []


def test_non_ascii_queries_match_exactly(store: Store, sid: str) -> None:
    store.memories.create(sid, "/café.md", "Ünïcode straße", actor=API)
    assert _found(store, sid, "café") == [("/café.md", True)]
    [hit] = store.search.hits(sid, "straße")
    assert hit.snippet == ("Ünïcode ", "straße", "")


def test_only_live_memories_of_that_store(store: Store, sid: str) -> None:
    other = store.stores.create("Other").id
    store.memories.create(other, "/editor.md", "editor", actor=API)
    gone = store.memories.get_by_path(sid, "/prefs/editor.md")
    store.memories.delete(sid, gone.id, actor=API)
    assert _found(store, sid, "editor") == [("/projects/editor-plugin.md", True)]


def test_bad_searches_are_refused(store: Store, sid: str) -> None:
    with pytest.raises(InvalidRequest):
        store.search.hits(sid, "")
    with pytest.raises(InvalidRequest):
        store.search.hits(sid, "x" * 5000)
    with pytest.raises(InvalidRequest):
        store.search.hits(sid, "\ud800")
    for limit in (0, 1001, True):
        with pytest.raises(InvalidRequest):
            store.search.hits(sid, "x", limit=limit)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        store.search.hits("memstore_nope", "x")
    archived = store.stores.create("Old").id
    store.memories.create(archived, "/a.md", "old news", actor=API)
    store.stores.archive(archived)
    assert _found(store, archived, "news") == [("/a.md", False)]  # reading is fine
