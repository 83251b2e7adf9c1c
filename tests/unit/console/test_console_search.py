"""The Console's search in-process (starlette TestClient), on SQLite and on PostgreSQL: ranked
by Store.search by default (best first, each hit with its path, score, snippet and why it
matched), the result's note when meaning was not used, the exact-text mode, the store page's
search-status line, and hostile memories escaped."""

from __future__ import annotations

import html
import re

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.models import Actor

KEY = "console-search-key"
ACTOR = Actor.user("user_1")


@pytest.fixture
def words_only(monkeypatch):
    """Meaning is not what these tests are about: words alone answer."""
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "none")


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def browser(store):
    with TestClient(create_app(store, [KEY]), base_url="http://console.test",
                    follow_redirects=False) as c:
        r = c.post("/signin", data={"api_key": KEY, "next": "/stores"})
        assert r.status_code == 303
        yield c


def new_store(store, memories: dict[str, str]) -> str:
    sid = store.stores.create(name="Search").id
    for path, content in memories.items():
        store.memories.create(sid, path, content, actor=ACTOR)
    return sid


def hits(page: str) -> list[str]:
    """The hits of a search page, each as its text (tags stripped, entities decoded)."""
    items = re.findall(r'<li class="hit">(.*?)</li>', page, re.S)
    return [html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(
        r"</?mark>", "", i)))).strip() for i in items]


def test_ranked_by_default_best_first_with_score_snippet_and_why(browser, store, words_only):
    sid = new_store(store, {"/people/ana.md": "Ana likes the editor helix.",
                            "/prefs/editor.md": "Use tabs; the editor is vim, always vim.",
                            "/other.md": "nothing to see"})
    ids = {m.path: m.id for m in store.memories.tree(sid)}
    r = browser.get(f"/stores/{sid}/search", params={"q": "which editor, vim or helix?"})
    assert r.status_code == 200
    found = hits(r.text)
    assert len(found) == 2, found
    # Both memories have two of the question's words; the one with "editor" in its path too,
    # and "vim" twice, ranks first.
    assert found[0].startswith("/prefs/editor.md") and found[1].startswith("/people/ana.md")
    result = store.search.in_store(sid, "which editor, vim or helix?")
    for h in result.hits:
        assert f'href="/stores/{sid}/memories/{ids[h.path]}"' in r.text
        assert f"{h.score:.2f}" in r.text
    assert [h.path for h in result.hits] == ["/prefs/editor.md", "/people/ana.md"]
    assert "words" in found[0] and "meaning" not in found[0]
    assert "Use tabs; the editor is vim, always vim." in found[0]
    # The question's words are marked in the snippet.
    assert "<mark>vim</mark>" in r.text and "<mark>helix</mark>" in r.text
    # Why meaning did not rank: the result's note, as a sentence.
    assert "Meaning is off (--embeddings none): words alone answered." in r.text
    assert re.search(r'role="status">\s*2 memories, best first', r.text)


def test_exact_text_is_the_substring_search(browser, store, words_only):
    sid = new_store(store, {"/prefs/editor.md": "Use tabs; the Editor is VIM.",
                            "/people/ana.md": "Ana likes the editor helix",
                            "/rates.md": "a 100% rate", "/other.md": "nothing"})
    r = browser.get(f"/stores/{sid}/search", params={"q": "editor", "mode": "exact"})
    found = hits(r.text)
    assert [f.split()[0] for f in found] == ["/prefs/editor.md", "/people/ana.md"]  # path first
    assert 'value="exact" checked' in r.text  # the mode stays chosen for the next search
    r = browser.get(f"/stores/{sid}/search", params={"q": "0%", "mode": "exact"})
    assert [f.split()[0] for f in hits(r.text)] == ["/rates.md"]  # wildcards are literal
    # The ranked search reads words: "0%" is the word "0", in no memory.
    r = browser.get(f"/stores/{sid}/search", params={"q": "0%"})
    assert hits(r.text) == [] and "No memory matches" in r.text
    assert 'value="exact" checked' not in r.text


def test_refusals_are_shown_next_to_the_form(browser, store, words_only):
    sid = new_store(store, {"/a.md": "alpha"})
    for params, says in (({"q": "   "}, "at least one word"),
                         ({"q": "x" * 2000}, "at most"),
                         ({"q": "alpha", "limit": "1000"}, "limit must be between 1 and 100"),
                         ({"q": "alpha", "limit": "many"}, "limit must be between 1 and 100"),
                         ({"q": "x" * 2000, "mode": "exact"}, "at most")):
        r = browser.get(f"/stores/{sid}/search", params=params)
        assert r.status_code == 400, params
        assert says in r.text and 'role="alert"' in r.text and 'type="search"' in r.text
    r = browser.get(f"/stores/{sid}/search", params={"q": "alpha", "limit": "1"})
    assert len(hits(r.text)) == 1
    assert browser.get("/stores/memstore_nope/search", params={"q": "a"}).status_code == 404
    r = browser.get(f"/stores/{sid}/search")  # no question yet: the form alone
    assert r.status_code == 200 and hits(r.text) == [] and 'role="status"' not in r.text


def test_more_hits_on_request(browser, store, words_only):
    sid = new_store(store, {f"/n{i:02}.md": f"note {i}" for i in range(25)})
    r = browser.get(f"/stores/{sid}/search", params={"q": "note"})
    assert len(hits(r.text)) == 20
    assert f'href="/stores/{sid}/search?q=note&amp;limit=100"' in r.text
    r = browser.get(f"/stores/{sid}/search", params={"q": "note", "limit": "100"})
    assert len(hits(r.text)) == 25 and "limit=100" not in r.text


XSS = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def test_hostile_memories_and_questions_are_escaped(browser, store, words_only):
    sid = new_store(store, {"/<script>alert(3)</script>.md": XSS + " script",
                            "/b.md": "<b onmouseover=alert(4)>script</b>"})
    for params, count in (({"q": XSS + " script", "threshold": "0"}, 2),
                          ({"q": "script", "mode": "exact"}, 2),
                          ({"q": XSS, "mode": "exact"}, 1)):
        r = browser.get(f"/stores/{sid}/search", params=params)
        assert len(hits(r.text)) == count, params
        body = r.text.split("<main", 1)[1]
        assert "<script" not in body and "<img" not in body and "<b " not in body, params
        assert "&lt;script&gt;alert(3)&lt;/script&gt;.md</a>" in body  # the path, shown


def test_store_page_says_how_much_is_indexed_by_meaning(browser, store, words_only):
    sid = new_store(store, {"/a.md": "alpha"})
    page = browser.get(f"/stores/{sid}").text
    assert "by words only" in page and "meaning is off (--embeddings none)" in page
    # The live region's fragment carries it too (it follows the store's changes).
    fragment = browser.get(f"/stores/{sid}", headers={"x-memfs-fragment": "1"}).text
    assert "meaning is off" in fragment


def test_meaning_finds_a_memory_none_of_whose_words_were_asked(browser, store, monkeypatch):
    """The local model, three tiny memories: indexing them takes well under a second."""
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "local")
    sid = new_store(store, {"/pets.md": "Our cat is called Miso and sleeps on the radiator.",
                            "/deploy.md": "Deploys go out on Tuesdays after the standup.",
                            "/food.md": "Ana is vegetarian: no meat at team dinners."})
    page = browser.get(f"/stores/{sid}").text
    assert "0 of 3 memories indexed by meaning" in page and "no indexer is running" in page
    r = browser.get(f"/stores/{sid}/search", params={"q": "which animal lives with us"})
    # Nothing passes the threshold (the search waits a moment for meaning of the three
    # pending memories, but none is close enough in three): said, and every memory offered.
    assert hits(r.text) == [] and "No memory matches" in r.text
    assert "Show every memory ranked" in r.text
    store.search.index(sid)
    assert store.search.index(sid).pending == 0
    page = browser.get(f"/stores/{sid}").text
    assert "3 of 3 memories indexed by meaning" in page
    assert store.search.embeddings is not None and store.search.embeddings.model in page
    r = browser.get(f"/stores/{sid}/search", params={"q": "which animal lives with us",
                                                      "threshold": "0"})
    found = hits(r.text)
    assert found[0].startswith("/pets.md") and "meaning" in found[0]
    assert "words" not in found[0].split("Our cat")[0]  # no word of it was asked
    assert "<mark>" not in r.text
    assert "words alone answered" not in r.text
    # A memory written since: the store page says meaning covers part of the store, and a
    # search waits a moment for meaning to embed it (a few memories pending: issue 39).
    store.memories.create(sid, "/new.md", "a new note", actor=ACTOR)
    assert "3 of 4 memories indexed by meaning" in browser.get(f"/stores/{sid}").text
    r = browser.get(f"/stores/{sid}/search", params={"q": "which animal lives with us"})
    assert "catching up" not in r.text
    assert "4 of 4 memories indexed by meaning" in browser.get(f"/stores/{sid}").text
