"""Recall (issue 20): the words index kept with every write, vectors that never go stale, the
indexer's lease, and a provider that fails. Each runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from memfs import Actor, InvalidRequest, NotFound
from memfs.recall import embeddings, indexer
from memfs.recall import search as recall_search
from memfs.recall.words import snippet, words
from memfs.store import Store
from tests.support import wait_until
from tests.support.backend import Backend

API = Actor.api("apikey_test")


@pytest.fixture
def store(backend: Backend) -> Store:
    s = backend.open()
    s.search.use_embeddings("none")
    return s


def _paths(store: Store, sid: str, q: str, **kw: object) -> list[str]:
    return [h.path for h in store.search.in_store(sid, q, **kw).hits]  # type: ignore[arg-type]


def test_a_memory_is_found_by_its_words_as_soon_as_its_write_returns(store: Store) -> None:
    sid = store.stores.create("Notes").id
    m = store.memories.create(sid, "/people/oncall.md", "Priya carries the pager on weekends.",
                            actor=API)
    assert _paths(store, sid, "who has the pager") == ["/people/oncall.md"]
    store.memories.update(sid, m.id, content="Marco is paged at night.", actor=API)
    assert _paths(store, sid, "pager Priya") == []  # the old text is gone with its version
    assert _paths(store, sid, "night paging") == ["/people/oncall.md"]  # porter: paged ~ paging
    store.memories.update(sid, m.id, path="/team/rota.md", actor=API)
    assert _paths(store, sid, "rota") == ["/team/rota.md"]  # a path's words count
    assert _paths(store, sid, "oncall") == []
    store.memories.delete(sid, m.id, actor=API)
    assert _paths(store, sid, "night") == []
    [deleted] = [v for v in store.versions.list(sid).data if v.operation == "deleted"]
    store.versions.restore(sid, [v for v in store.versions.list(sid).data
                                if v.operation == "modified"][-1].id, actor=API)
    assert len(_paths(store, sid, "night")) == 1  # undeleted: found again
    assert deleted


def test_the_text_of_a_redacted_version_is_never_found(store: Store) -> None:
    sid = store.stores.create("Notes").id
    m = store.memories.create(sid, "/secret.md", "the wifi password is hunter2", actor=API)
    old = m.memory_version_id
    store.memories.update(sid, m.id, content="ask Sam for the wifi password", actor=API)
    store.versions.redact(sid, old, actor=API)
    assert _paths(store, sid, "hunter2") == []
    assert _paths(store, sid, "wifi") == ["/secret.md"]


def test_an_import_and_a_deleted_store_keep_the_index_in_step(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.archive.import_files(lambda: [("/a.md", b"espresso machine descaling", None),
                                ("/b.md", "the kettle", None)], into=sid, actor=API)
    assert _paths(store, sid, "descale the espresso") == ["/a.md"]
    other = store.stores.create("Other").id
    store.memories.create(other, "/c.md", "espresso beans from Rome", actor=API)
    assert _paths(store, sid, "espresso") == ["/a.md"]  # one store's memories only
    store.stores.delete(other)
    with pytest.raises(NotFound):
        store.search.in_store(other, "espresso")
    assert _paths(store, sid, "espresso") == ["/a.md"]


def test_case_and_accents_are_folded_so_french_is_found(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/rdv.md", "Réunion d'équipe le mercredi à 10h, café offert.",
                        actor=API)
    for q in ("reunion equipe", "RÉUNION", "cafe", "Équipe"):
        assert _paths(store, sid, q) == ["/rdv.md"], q


def test_words_inside_markup_and_file_names_are_words(store: Store) -> None:
    # PostgreSQL's parser drops what looks like an XML tag, words and all, and keeps a file
    # name or a host as one token: both backends split them as a question is split.
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/a.md", "<script>alert(1)</script> see config.yaml", actor=API)
    for q in ("alert", "script", "yaml", "config"):
        assert _paths(store, sid, q) == ["/a.md"], q


@pytest.mark.parametrize("q", ['"', "'", 'a" OR "b', "NEAR(a b)", "*", "-x", "a AND", "(",
                               "col:val", "x | y & !z", "^", "\\", "%_"])
def test_query_syntax_in_a_question_is_only_words(store: Store, q: str) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/a.md", "a b x y z val", actor=API)
    store.search.in_store(sid, q)  # no error: each word is quoted, operators are dropped


def test_a_search_checks_what_it_is_given(store: Store) -> None:
    sid = store.stores.create("Notes").id
    for kw in ({"limit": 0}, {"limit": 101}, {"limit": True}, {"path_prefix": "x"},
               {"threshold": 1.5}, {"threshold": -0.1}, {"channels": ()},
               {"channels": ("x",)}, {"fusion": "max"}):
        with pytest.raises(InvalidRequest):
            store.search.in_store(sid, "q", **kw)  # type: ignore[arg-type]
    for q in ("", "   ", "x" * 1001, "a\x00b", "\ud800"):
        with pytest.raises(InvalidRequest):
            store.search.in_store(sid, q)
    with pytest.raises(NotFound):
        store.search.in_store("memstore_nope", "q")


def test_limit_prefix_and_threshold(store: Store) -> None:
    sid = store.stores.create("Notes").id
    for i in range(15):
        store.memories.create(sid, f"/{'a' if i % 2 else 'b'}/n{i:02}.md", f"note {i} tea",
                            actor=API)
    assert len(store.search.in_store(sid, "tea", threshold=0).hits) == 10
    assert len(store.search.in_store(sid, "tea", limit=100, threshold=0).hits) == 15
    assert {p[:3] for p in _paths(store, sid, "tea", limit=100, path_prefix="/a/",
                                  threshold=0)} == {"/a/"}
    result = store.search.in_store(sid, "tea", threshold=0)
    assert result.meaning is False and "words alone" in (result.note or "")
    assert all(0 < h.score <= 1 and h.matched == ("words",) for h in result.hits)
    best = max(h.score for h in result.hits)
    assert all(h.score >= best for h in store.search.in_store(sid, "tea", threshold=best).hits)
    assert store.search.in_store(sid, "tea", threshold=best).hits  # a score as shown keeps its hit
    if best < 1.0:
        assert store.search.in_store(sid, "tea", threshold=min(1.0, best + 0.001)).hits == []


def test_a_snippet_is_one_line_around_the_words() -> None:
    text = "intro line\n\tThe deploy\tkey rotates every 90 days.\nother"
    assert snippet(text, words("when does the key rotate")) == \
        "The deploy key rotates every 90 days."
    long = "x " * 200 + "the pager rotation " + "y " * 200
    s = snippet(long, ["pager"])
    assert "pager" in s and len(s) <= 160 and "\t" not in s and "\n" not in s
    assert words("who gets paged at night") == ["paged", "night"]
    assert words("the") == ["the"]  # nothing else to look for


# -- meaning ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> embeddings.LocalE5:
    return embeddings.local()


def test_a_changed_memory_is_never_ranked_by_its_old_vector(
        backend: Backend, local: embeddings.LocalE5, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall_search, "WAIT_PENDING", 0)  # no search embeds what is pending
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    m = store.memories.create(sid, "/pets.md", "The cat sleeps on the sofa all afternoon.",
                            actor=API)
    store.memories.create(sid, "/tax.md", "File the quarterly VAT return before the 20th.",
                        actor=API)
    assert store.search.index(sid).pending == 0
    r = store.search.in_store(sid, "where does my kitten nap", channels=("meaning",))
    assert r.meaning and r.hits[0].path == "/pets.md" and r.hits[0].matched == ("meaning",)
    store.memories.update(sid, m.id, content="Bring the bike to the repair shop.", actor=API)
    r = store.search.in_store(sid, "where does my kitten nap", channels=("meaning",), threshold=0)
    assert [h.path for h in r.hits] == ["/tax.md"]  # its vector is of text it no longer holds
    assert "1 of 2" in (r.note or "")
    assert store.search.status(sid)["indexed"] == 1
    assert store.search.index(sid).embedded == 1
    r = store.search.in_store(sid, "fix my bicycle", threshold=0)
    assert r.hits[0].path == "/pets.md" and r.hits[0].matched == ("meaning",)
    store.memories.delete(sid, m.id, actor=API)
    assert [h.path for h in store.search.in_store(sid, "fix my bicycle",
                                                  threshold=0).hits] == ["/tax.md"]
    status = store.search.status(sid)
    assert status["memories"] == status["indexed"] == 1 and status["reason"] is None


def test_a_memory_not_yet_embedded_is_first_by_its_rare_word(
        backend: Backend, local: embeddings.LocalE5, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written just now, so meaning has not seen it: its exact (and rare) word puts it first,
    above whatever meaning ranks first among the memories it has seen."""
    monkeypatch.setattr(recall_search, "WAIT_PENDING", 0)  # no search embeds what is pending
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    for path, text in (("/pets.md", "The cat sleeps on the sofa all afternoon."),
                       ("/tax.md", "File the quarterly VAT return before the 20th."),
                       ("/deploy.md", "Deploys go out on Tuesdays after the standup.")):
        store.memories.create(sid, path, text, actor=API)
    assert store.search.index(sid).pending == 0
    store.memories.create(sid, "/zorblax.md", "The zorblax key is in the blue vault.", actor=API)
    r = store.search.in_store(sid, "the zorblax key")
    assert r.meaning and "3 of 4" in (r.note or ""), r
    assert r.hits[0].path == "/zorblax.md", r.hits
    assert r.hits[0].matched == ("words",)
    store.search.index(sid)
    r = store.search.in_store(sid, "the zorblax key")
    assert r.hits[0].path == "/zorblax.md" and r.hits[0].matched == ("words", "meaning"), r


def test_two_indexers_do_no_double_work(backend: Backend, local: embeddings.LocalE5) -> None:
    a, b = backend.open(), backend.open()
    sid = a.stores.create("Notes").id
    for i in range(4):
        a.memories.create(sid, f"/n{i}.md", f"note number {i}", actor=API)
    first, second = indexer.Indexer(a, local), indexer.Indexer(b, local)
    assert first._take_lease(sid)
    busy = second.catch_up(sid)
    assert busy.embedded == 0 and busy.reason == "another process is indexing this store"
    assert b.search.status(sid)["indexing"] == first.holder
    first._drop_lease(sid)
    assert second.catch_up(sid).embedded == 4
    assert first.catch_up(sid).embedded == 0  # nothing left to do


KILLED_INDEXER = textwrap.dedent("""
    import sys
    from memfs.recall import embeddings, indexer
    from memfs.store import Store
    store = Store(sys.argv[1])
    indexer.BATCH = 1
    print("ready", flush=True)
    indexer.Indexer(store, embeddings.local()).catch_up(sys.argv[2])
""")


def test_an_indexer_killed_mid_index_leaves_no_half_written_vector(
        backend: Backend, local: embeddings.LocalE5) -> None:
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    for i in range(30):
        store.memories.create(sid, f"/n{i:02}.md", f"note {i}: " + "words " * 60, actor=API)
    p = subprocess.Popen([sys.executable, "-c", KILLED_INDEXER, backend.url, sid],
                         stdout=subprocess.PIPE, text=True, env=os.environ | {"PYTHONPATH": "."})
    assert p.stdout and p.stdout.readline().strip() == "ready"
    wait_until(lambda: store.search.status(sid)["indexed"] >= 3, 60, interval=0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    done = store.search.status(sid)
    assert 3 <= done["indexed"] < 30 and done["indexing"] is not None  # its lease outlives it
    rows = store.database.all("SELECT vector FROM memory_vectors WHERE store_id = ?", (sid,))
    assert len(rows) == done["indexed"] and all(len(bytes(r[0])) == 4 * 384 for r in rows)
    with store.database.write() as c:
        c.execute("UPDATE recall_leases SET expires_at = 0")
    assert store.search.index(sid).embedded == 30 - done["indexed"]  # the rest, not again


class _Hang(http.server.BaseHTTPRequestHandler):
    """A provider that never answers in time: each request is counted in ``asked`` and held
    until the test sets ``released`` (the fixture gives each test its own)."""

    url: str
    asked: list[str]
    released: threading.Event

    def do_POST(self) -> None:  # noqa: N802
        self.asked.append(self.path)
        self.released.wait(60)

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def hanging() -> Iterator[type[_Hang]]:
    """The provider's handler class (``asked``, ``released``) with its ``url``."""
    handler = type("Hang", (_Hang,), {"asked": [], "released": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield handler
    finally:
        handler.released.set()
        server.shutdown()
        server.server_close()


def test_a_provider_that_hangs_costs_a_search_two_seconds_then_words_answer(
        backend: Backend, local: embeddings.LocalE5, hanging: type[_Hang],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider answers only once the test is over: a search that waited for it would
    not return at all, so its answer shows it gave up (after its 2 s, which its note says);
    the provider's count shows the next search did not ask it again."""
    store = backend.open()
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/oncall.md", "Priya carries the pager", actor=API)
    provider = embeddings.from_setting(f"openai:{hanging.url}/v1:e5")
    assert provider is not None
    # Vectors of this model exist (made by the local model under its name), so that the
    # search asks the provider for the question's.
    monkeypatch.setattr(local, "model", provider.model)
    store.search.use_embeddings(local)
    store.search.index(sid)
    store.search.use_embeddings(provider)
    monkeypatch.setattr(recall_search, "_down", {})
    r = store.search.in_store(sid, "who has the pager")
    assert hanging.asked and not hanging.released.is_set()  # asked, and never answered
    assert not r.meaning and [h.path for h in r.hits] == ["/oncall.md"]
    assert "did not answer within 2 s" in (r.note or "") and "words alone" in (r.note or "")
    asked = len(hanging.asked)
    assert not store.search.in_store(sid, "pager").meaning
    assert len(hanging.asked) == asked  # not asked again for a while


@pytest.mark.parametrize("setting, model", [
    ("local", "local:multilingual-e5-small-q4"),
    ("ollama:http://gpu:11434/nomic-embed-text", "ollama:nomic-embed-text@http://gpu:11434"),
    ("openai:http://127.0.0.1:8000/v1:e5-small", "openai:e5-small@http://127.0.0.1:8000/v1"),
])
def test_a_setting_names_a_provider(setting: str, model: str) -> None:
    p = embeddings.from_setting(setting)
    assert p is not None and p.model == model
    assert embeddings.from_setting("none") is None
    # What another process (a mount daemon's indexer process) makes the same provider from.
    again = embeddings.from_setting(getattr(p, "setting", None))
    assert again is not None and again.model == model


class _Ranks:
    """A provider that ranks the store's memories itself, as a mount daemon's indexer process
    does for the daemon: scripted answers, the questions it was asked."""

    model = "test:ranks"

    def __init__(self, *answers: object) -> None:
        self.answers, self.asked = list(answers), list[str]()

    def rank(self, store_id: str, question: str, path_prefix: str | None,
             timeout: float, also: object = (), wait: float = 0.0) -> recall_search.Meaning:
        self.asked.append(question)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return recall_search.Meaning({mid: (score, -1, -1)  # type: ignore[attr-defined]
                                      for mid, score in answer}, 0.77, self.model)

    def passages(self, texts: list[str]) -> object:
        raise AssertionError("a ranker is never asked for vectors")

    def query(self, text: str, timeout: float) -> object:
        raise AssertionError("a ranker is never asked for vectors")


def test_a_provider_that_ranks_itself_ranks_and_may_be_asked_again_at_once(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend.open()
    sid = store.stores.create("Notes").id
    oncall = store.memories.create(sid, "/oncall.md", "Priya carries the pager", actor=API).id
    lunch = store.memories.create(sid, "/lunch.md", "Friday lunch is pizza", actor=API).id
    with store.database.write() as c:  # indexed with its model (the ranker reads them)
        for mid in (oncall, lunch):
            c.execute("INSERT INTO memory_vectors (memory_id, store_id, model, path, "
                      "content_sha256, vector, indexed_at) SELECT id, store_id, ?, path, "
                      "content_sha256, ?, 'x' FROM memories WHERE id = ?",
                      (_Ranks.model, b"\0" * 4, mid))
    monkeypatch.setattr(recall_search, "_down", {})
    ranks = _Ranks([(lunch, 0.9), (oncall, 0.1)],
                   embeddings.Unavailable("it is starting", retry_after=0.0),
                   [(oncall, 0.8)], embeddings.Unavailable("it is down"))
    store.search.use_embeddings(ranks)  # type: ignore[arg-type]
    r = store.search.in_store(sid, "who has the bleeper", threshold=0)
    assert r.meaning and [h.path for h in r.hits] == ["/lunch.md", "/oncall.md"]
    r = store.search.in_store(sid, "who has the bleeper")
    assert not r.meaning and "it is starting" in (r.note or "")
    r = store.search.in_store(sid, "who has the bleeper", threshold=0)  # asked again at once
    assert r.meaning and [h.path for h in r.hits][0] == "/oncall.md"
    assert not store.search.in_store(sid, "bleeper").meaning
    assert not store.search.in_store(sid, "bleeper").meaning  # not asked again for a while
    assert len(ranks.asked) == 4


@pytest.mark.parametrize("setting", ["", "loca", "ollama:gpu/x", "ollama:http://gpu:11434",
                                     "openai:https://api.openai.com/v1", "openai:x:y"])
def test_a_setting_naming_no_provider_says_the_forms(setting: str) -> None:
    with pytest.raises(InvalidRequest, match="local, none, ollama:"):
        embeddings.from_setting(setting)


def test_memfs_serve_takes_the_words_queue_in(store: Store) -> None:
    """Both backends queue the words a write changes (memfs.recall.wordsqueue), and memfs
    serve runs a thread that takes the queue in, with no search asking."""
    from memfs.daemons.server import start_words
    from memfs.recall import wordsqueue

    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/a.md", "the quokka", actor=API)
    assert wordsqueue.queued(store.database, sid) == 1
    words = start_words(store)
    try:
        wait_until(lambda: wordsqueue.queued(store.database, sid) == 0, timeout=10,
                   what="the queue taken in")
    finally:
        words.stop()


def test_a_timeout_reads_as_the_budget_not_what_was_left_of_it(monkeypatch):
    """The query's timeout is what was left of the search's 2 s when it was asked: a few
    microseconds short under load. Its note says 2 s, not 1.99999 s."""
    import httpx

    provider = embeddings.HttpProvider("openai", "http://127.0.0.1:9/v1", "e5")

    def post(*args: object, **kwargs: object) -> None:
        raise httpx.ReadTimeout("timed out")

    monkeypatch.setattr(provider._http(), "post", post)
    with pytest.raises(embeddings.Unavailable, match=r"did not answer within 2 s$"):
        provider.query("who has the pager", 1.999991)
