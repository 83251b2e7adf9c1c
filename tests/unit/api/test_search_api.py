"""Recall over HTTP (issue 20 §3): ``GET .../memfs/search`` and ``.../memfs/search_status``,
in-process (starlette TestClient) on SQLite and PostgreSQL: the wire shapes, the 400s, a
session token's scope, the OpenAPI document, the client's round trip, and the providers over
HTTP (an Ollama-shaped service, an OpenAI-compatible one that hangs)."""

from __future__ import annotations

import os

import pytest
import trio
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import AsyncClient, Client
from memfs.models import Actor
from memfs.recall.indexer import Indexer
from memfs.recall.search import Hit, Result
from tests.support.asgi import through
from tests.support.embedserver import scripted_service
from tests.support.memories import BY_MEANING, MEMORIES

KEY = "search-test-key"
API = Actor.api("apikey_test")
HIT_KEYS = {"type", "path", "memory_id", "score", "snippet", "matched", "updated_at",
            "memory_store_id", "memory_type", "stale"}
RESULT_KEYS = {"type", "data", "meaning", "note", "indexed", "memories", "model", "best"}
STATUS_KEYS = {"type", "store_id", "name", "memories", "indexed", "model", "indexing",
               "reason"}


@pytest.fixture
def store(backend):
    s = backend.open()
    s.search.use_embeddings("none")  # meaning where a test asks for it
    return s


@pytest.fixture
def http(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY},
                    raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def sid(store) -> str:
    s = store.stores.create("notes").id
    for path, content in MEMORIES.items():
        store.memories.create(s, path, content, actor=API)
    return s


def search(http, sid, **params):
    return http.get(f"/v1/memory_stores/{sid}/memfs/search", params=params)


def assert_400(r, *fragments):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    assert r.headers["x-should-retry"] == "false"
    for f in fragments:
        assert f in body["error"]["message"], body
    return body["error"]["message"]


# -- the wire shapes -----------------------------------------------------------------------------


def test_a_search_by_meaning_answers_the_contract_s_shape(http, store, sid):
    store.search.use_embeddings("local")
    assert store.search.index(sid).pending == 0
    r = search(http, sid, query=BY_MEANING, threshold="0")
    assert r.status_code == 200, r.text
    d = r.json()
    assert set(d) == RESULT_KEYS and d["type"] == "memfs_search_result"
    assert d["meaning"] is True and d["note"] is None
    assert (d["indexed"], d["memories"]) == (4, 4)
    assert d["model"] == "local:multilingual-e5-small-q4"
    top = d["data"][0]
    assert set(top) == HIT_KEYS and top["type"] == "memfs_search_hit"
    assert top["path"] == "/decisions/db.md" and top["matched"] == ["meaning"]
    assert top["memory_id"] == store.memories.get_by_path(sid, "/decisions/db.md").id
    assert 0 < top["score"] <= 1 and top["snippet"] == MEMORIES["/decisions/db.md"]
    assert top["updated_at"].endswith("Z")
    scores = [h["score"] for h in d["data"]]
    assert scores == sorted(scores, reverse=True)
    # Words and meaning both: a hit says which found it.
    d = search(http, sid, query="favourite text editor vim").json()
    assert d["data"][0]["path"] == "/prefs/editor.md"
    assert d["data"][0]["matched"] == ["words", "meaning"]


def test_words_alone_answer_when_meaning_is_off_and_say_so(http, sid):
    d = search(http, sid, query="the pager", limit=3).json()
    assert [h["path"] for h in d["data"]] == ["/people/oncall.md"]
    assert d["data"][0]["matched"] == ["words"]
    assert d["meaning"] is False and d["model"] is None
    assert d["note"] == "meaning is off (--embeddings none): words alone answered"


def test_limit_path_prefix_and_threshold_are_applied(http, store, sid):
    store.search.use_embeddings("local")
    store.search.index(sid)
    assert len(search(http, sid, query=BY_MEANING, threshold="0").json()["data"]) == 4
    assert len(search(http, sid, query=BY_MEANING, limit=2, threshold="0").json()["data"]) == 2
    d = search(http, sid, query=BY_MEANING, path_prefix="/prefs/", threshold="0").json()
    assert [h["path"] for h in d["data"]] == ["/prefs/editor.md"]
    d = search(http, sid, query=BY_MEANING, threshold="0").json()
    top = d["data"][0]["score"]
    assert d["best"] == top
    for name in ("threshold", "min_score"):  # min_score: the deprecated name, still taken
        d = search(http, sid, query=BY_MEANING, **{name: str(top)}).json()
        assert [h["path"] for h in d["data"]] == ["/decisions/db.md"]
    # threshold wins over min_score
    assert search(http, sid, query=BY_MEANING, threshold="0",
                  min_score=str(top)).json()["data"][1:]
    # Above the best: nothing, and the note says so with the best seen.
    if top < 1:
        d = search(http, sid, query=BY_MEANING, threshold="1").json()
        assert d["data"] == [] and d["best"] == top
        assert d["note"] == (f"nothing scored 1 or more (best {top:.2f}): nothing stored "
                             "seems to answer this")
    # The default threshold: every hit passes it, or the note says none did.
    d = search(http, sid, query="zzzz qqqq").json()
    assert all(h["score"] >= 0.7 for h in d["data"])
    assert d["data"] or d["best"] is None or d["note"].startswith("nothing scored 0.7 or more")
    # Words alone, at once.
    d = search(http, sid, query="vim editor", channels="words", threshold="0").json()
    assert d["meaning"] is False and {tuple(h["matched"]) for h in d["data"]} == {("words",)}


def test_a_memory_is_found_by_its_words_as_soon_as_its_write_returns(http, store, sid):
    r = http.post(f"/v1/memory_stores/{sid}/memories",
                  json={"path": "/trips/lisbon.md", "content": "Flight TP1351 lands at nine"})
    assert r.status_code == 200
    [hit] = search(http, sid, query="TP1351").json()["data"]
    assert hit["path"] == "/trips/lisbon.md" and hit["memory_id"] == r.json()["id"]
    assert http.delete(f"/v1/memory_stores/{sid}/memories/{hit['memory_id']}").status_code == 200
    assert search(http, sid, query="TP1351").json()["data"] == []


def test_search_status_says_how_far_the_store_is_indexed(http, store, sid):
    url = f"/v1/memory_stores/{sid}/memfs/search_status"
    d = http.get(url).json()
    assert set(d) == STATUS_KEYS and d["type"] == "memfs_search_status"
    assert d == {"type": "memfs_search_status", "store_id": sid, "name": "notes",
                 "memories": 4, "indexed": 0, "model": None, "indexing": None,
                 "reason": "meaning is off (--embeddings none)"}
    store.search.use_embeddings("local")
    d = http.get(url).json()
    assert (d["indexed"], d["model"]) == (0, "local:multilingual-e5-small-q4")
    assert d["reason"].startswith("not indexed yet")
    store.search.index(sid)
    d = http.get(url).json()
    assert (d["memories"], d["indexed"], d["reason"], d["indexing"]) == (4, 4, None, None)


def test_an_unknown_store_is_a_404(http):
    for url in ("/v1/memory_stores/memstore_nope/memfs/search?query=x",
                "/v1/memory_stores/memstore_nope/memfs/search_status"):
        r = http.get(url)
        assert r.status_code == 404, r.text
        assert r.json()["error"]["type"] == "not_found_error"


# -- bad input: the envelope and a 400, never a 500 


@pytest.mark.parametrize(("query", "fragment"), [
    ("", "query is required"),
    ("query=", "query is empty"),
    ("query=%20%20", "at least one word"),
    ("query=" + "a" * 1001, "at most 1000 characters"),
    ("query=a%00b", "NUL"),
    ("query=%ED%A0%80", "query is not valid UTF-8"),  # a lone surrogate's bytes (CESU-8)
    ("query=caf%E9", "query is not valid UTF-8"),  # latin-1
    ("query=x&limit=0", "limit must be between 1 and 100"),
    ("query=x&limit=101", "limit must be between 1 and 100"),
    ("query=x&limit=abc", "limit must be an integer"),
    ("query=x&limit=1.5", "limit must be an integer"),
    ("query=x&limit=%C2%B2", "limit must be an integer"),  # '²'
    ("query=x&path_prefix=people", "path_prefix must be a path beginning with /"),
    ("query=x&path_prefix=/a%00", "NUL"),
    ("query=x&path_prefix=/%ED%A0%80", "path_prefix is not valid UTF-8"),
    ("query=x&threshold=-0.1", "threshold must be between 0 and 1"),
    ("query=x&threshold=1.5", "threshold must be between 0 and 1"),
    ("query=x&threshold=abc", "threshold must be a number"),
    ("query=x&min_score=-0.1", "threshold must be between 0 and 1"),
    ("query=x&min_score=1.5", "threshold must be between 0 and 1"),
    ("query=x&min_score=abc", "min_score must be a number"),
    ("query=x&min_score=nan", "min_score must be a number"),
    ("query=x&min_score=inf", "min_score must be a number"),
    ("query=x&min_score=1e999", "min_score must be a number"),
    ("query=x&channels=tea", "channels"),
    ("query=x&channels=words,", "channels"),
])
def test_bad_input_is_a_400_with_the_envelope(http, sid, query, fragment):
    assert_400(http.get(f"/v1/memory_stores/{sid}/memfs/search?{query}"), fragment)


def test_good_numbers_in_every_form_a_client_writes(http, sid):
    for value in ("0", "1", "0.5", ".5", "5e-1", "0.0", "1.0"):
        r = search(http, sid, query="pager", min_score=value)
        assert r.status_code == 200, (value, r.text)


def test_hostile_questions_are_only_words(http, sid):
    """FTS5 and tsquery syntax, quotes, operators: words to look for, never a 500."""
    for q in ('"', "*", "NEAR(", "a OR", "-x", "AND AND", "'; DROP TABLE memories; --",
              "(((", "pager:*", "!", "é" * 300, "\\", "%", "_"):
        r = search(http, sid, query=q)
        assert r.status_code == 200, (q, r.text)
    assert [h["path"] for h in search(http, sid, query='"pager"').json()["data"]] == [
        "/people/oncall.md"]


# -- a session token: its session's stores only --------------------------------------------------


def _a_session_and_a_store_it_lacks(store, sid):
    """A running session of ``sid`` and of ``docs`` (read only), and ``secrets``, not its:
    each store holding ``/pager.md``. Returns ``(docs, secrets, session)``."""
    ro = store.stores.create("docs").id
    store.memories.create(ro, "/pager.md", "the pager policy", actor=API)
    other = store.stores.create("secrets").id
    store.memories.create(other, "/pager.md", "the secret pager", actor=API)
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid},
                              {"type": "memory_store", "memory_store_id": ro,
                               "access": "read_only"}], status="running")
    return ro, other, s


def test_a_session_token_searches_its_attached_stores_only(store, sid):
    ro, other, s = _a_session_and_a_store_it_lacks(store, sid)
    token = store.sessions.create_token(s.id).token
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": token}) as agent:
        for attached in (sid, ro):  # read access is enough
            r = search(agent, attached, query="pager")
            assert r.status_code == 200 and r.json()["data"], r.text
            r = agent.get(f"/v1/memory_stores/{attached}/memfs/search_status")
            assert r.status_code == 200 and r.json()["store_id"] == attached
        # who indexes is the server's business: a session token is told that someone does,
        # not the host and pid of the process
        store.search.use_embeddings("local")
        # A host name that the store's random id happens to contain, as CI's "vm" once was
        # in "memstore_011ChhHvmfx...": only what is told about the indexer counts.
        host = sid[-6:-2]
        indexer = Indexer(store, store.search.embeddings, holder=f"{host}:{os.getpid()}:1")
        assert indexer._take_lease(sid)
        try:
            d = agent.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()
            assert d["indexing"] == "an indexer" and d["reason"] == "catching up", d
            told = str({k: v for k, v in d.items() if k not in ("id", "store_id")})
            assert host not in told and str(os.getpid()) not in told, d
            admin = TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY})
            assert admin.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()[
                "indexing"] == indexer.holder
        finally:
            indexer._drop_lease(sid)
            store.search.use_embeddings("none")
        unknown = search(agent, "memstore_nope", query="pager")
        for url in (f"/v1/memory_stores/{other}/memfs/search?query=pager",
                    f"/v1/memory_stores/{other}/memfs/search_status"):
            r = agent.get(url)
            assert r.status_code == 404, r.text
            # the body of a store that does not exist, but for its id
            assert r.json()["error"]["message"] == unknown.json()["error"]["message"].replace(
                "memstore_nope", other)
    store.sessions.set_status(s.id, "terminated")
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": token}) as agent:
        assert search(agent, sid, query="pager").status_code == 401


def test_a_session_s_stores_are_searched_at_once_by_its_token_only(store, sid):
    ro, other, s = _a_session_and_a_store_it_lacks(store, sid)
    theirs = store.sessions.create([{"type": "memory_store", "memory_store_id": other}],
                                  status="running")
    token = store.sessions.create_token(s.id).token
    url = f"/v1/sessions/{s.id}/memfs/search"
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": token}) as agent:
        d = agent.get(url, params={"query": "pager", "threshold": "0"}).json()
        assert d["type"] == "memfs_search_result"
        assert {(h["memory_store_id"], h["path"]) for h in d["data"]} == {
            (sid, "/people/oncall.md"), (ro, "/pager.md")}  # never the other store's
        scores = [h["score"] for h in d["data"]]
        assert scores == sorted(scores, reverse=True) and d["best"] == scores[0]
        assert search(agent, sid, query="pager", threshold="0").json()["data"][0]["score"] in (
            scores)
        # The same options as a store's search; the same refusals.
        d = agent.get(url, params={"query": "pager", "threshold": "0", "limit": "1",
                                   "path_prefix": "/people/"}).json()
        assert [h["path"] for h in d["data"]] == ["/people/oncall.md"]
        assert agent.get(url, params={"query": "pager", "threshold": "2"}).status_code == 400
        # Another session: as if it did not exist.
        r = agent.get(f"/v1/sessions/{theirs.id}/memfs/search", params={"query": "pager"})
        assert r.status_code == 404, r.text
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as admin:
        d = admin.get(f"/v1/sessions/{theirs.id}/memfs/search",
                      params={"query": "pager", "threshold": "0"}).json()
        assert {h["memory_store_id"] for h in d["data"]} == {other}
        assert admin.get("/v1/sessions/sesn_nope/memfs/search",
                         params={"query": "pager"}).status_code == 404
        remote = Client("http://memfs", KEY, transport=through(admin))
        got = remote.search.in_session(s.id, "pager", threshold=0)
        want = store.search.in_session(s.id, "pager", threshold=0)
        assert got.hits == want.hits and got.best == want.best


def test_a_search_by_type_over_http_and_through_the_client(http, store, sid):
    """``memfs_type`` (issue 41): only the memories of that type (/decisions/db.md is a
    decision by its directory), in a store's search and a session's; each hit says its
    type."""
    r = search(http, sid, query="PostgreSQL MySQL pager", threshold="0")
    assert r.status_code == 200, r.text
    types = {h["path"]: h["memory_type"] for h in r.json()["data"]}
    assert types["/decisions/db.md"] == "decision" and types["/people/oncall.md"] is None
    assert not any(h["stale"] for h in r.json()["data"])
    r = search(http, sid, query="PostgreSQL MySQL pager", threshold="0", memfs_type="decision")
    assert [h["path"] for h in r.json()["data"]] == ["/decisions/db.md"]
    assert search(http, sid, query="pager", memfs_type="decision").json()["data"] == []
    assert_400(search(http, sid, query="pager", memfs_type="x" * 65), "type")
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    d = http.get(f"/v1/sessions/{sess.id}/memfs/search",
                 params={"query": "PostgreSQL pager", "threshold": "0",
                         "memfs_type": "decision"}).json()
    assert [h["path"] for h in d["data"]] == ["/decisions/db.md"]
    remote = Client("http://memfs", KEY, transport=through(http))
    for ask in (lambda s: s.search.in_store(sid, "PostgreSQL pager", threshold=0,
                                            memory_type="decision"),
                lambda s: s.search.in_session(sess.id, "PostgreSQL pager", threshold=0,
                                              memory_type="decision")):
        got, want = ask(remote), ask(store)
        assert got.hits == want.hits and [h.path for h in got.hits] == ["/decisions/db.md"]
        assert got.hits[0].memory_type == "decision"


def test_without_a_key_it_is_a_401(store, sid):
    with TestClient(create_app(store, [KEY])) as anon:
        assert search(anon, sid, query="pager").status_code == 401


# -- the OpenAPI document --------------------------------------------------------------------------


def test_openapi_documents_search_and_its_status(http):
    doc = http.get("/openapi.json").json()
    ms = "/v1/memory_stores/{memory_store_id}/memfs"
    op = doc["paths"][ms + "/search"]["get"]
    assert op["x-memfs-extension"] is True and op["operationId"] == "search_memories"
    params = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
    assert {n: (p["schema"]["type"], p["required"]) for n, p in params.items()} == {
        "query": ("string", True), "limit": ("integer", False),
        "path_prefix": ("string", False), "threshold": ("number", False),
        "min_score": ("number", False), "channels": ("string", False),
        "memfs_type": ("string", False)}
    assert "deprecated" in params["min_score"]["description"]
    assert all(p.get("description") for p in params.values())
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/SearchResult"}
    schemas = doc["components"]["schemas"]
    assert set(schemas["SearchResult"]["properties"]) == RESULT_KEYS
    assert set(schemas["SearchHit"]["properties"]) == HIT_KEYS
    status = doc["paths"][ms + "/search_status"]["get"]
    assert status["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SearchStatus"}
    assert set(schemas["SearchStatus"]["properties"]) == STATUS_KEYS


# -- the client: the same Result as the store's, rebuilt from the wire 


def test_the_client_rebuilds_the_store_s_result(http, store, sid):
    store.search.use_embeddings("local")
    store.search.index(sid)
    remote = Client("http://memfs", KEY, transport=through(http))
    got = remote.search.in_store(sid, BY_MEANING, limit=3, path_prefix="/", threshold=0.1)
    want = store.search.in_store(sid, BY_MEANING, limit=3, path_prefix="/", threshold=0.1)
    assert isinstance(got, Result) and all(isinstance(h, Hit) for h in got.hits)
    assert got.hits == want.hits and len(got.hits) == 3
    assert (got.meaning, got.note, got.indexed, got.memories, got.model, got.best) == (
        want.meaning, want.note, want.indexed, want.memories, want.model, want.best)
    assert {h.memory_store_id for h in got.hits} == {sid}
    assert got.hits[0].matched == ("meaning",)
    cut = remote.search.in_store(sid, "vim", threshold=1.0, channels=("words",))
    want = store.search.in_store(sid, "vim", threshold=1.0, channels=("words",))
    assert (cut.hits, cut.note, cut.best, cut.meaning) == (
        want.hits, want.note, want.best, want.meaning)
    assert remote.search.status(sid) == store.search.status(sid)
    with pytest.raises(errors.InvalidRequest, match="limit must be between 1 and 100"):
        remote.search.in_store(sid, "x", limit=0)
    with pytest.raises(errors.InvalidRequest, match="at least one word"):
        remote.search.in_store(sid, " ")
    with pytest.raises(errors.NotFound):
        remote.search.in_store("memstore_nope", "x")
    with pytest.raises(errors.NotFound):
        remote.search.status("memstore_nope")


async def test_the_async_client_searches_too(store, sid):
    import httpx

    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with AsyncClient("http://memfs", KEY, transport=transport) as remote:
        with trio.fail_after(10):
            got = await remote.search.in_store(sid, "pager")
            status = await remote.search.status(sid)
    assert [h.path for h in got.hits] == ["/people/oncall.md"]
    assert got.note == "meaning is off (--embeddings none): words alone answered"
    assert status["memories"] == 4 and status["model"] is None


# -- providers over HTTP 


def test_an_ollama_service_indexes_and_answers_by_meaning(http, store, sid):
    with scripted_service() as ollama:
        store.search.use_embeddings(f"ollama:{ollama.base}/e5")
        progress = store.search.index(sid)
        assert (progress.embedded, progress.pending, progress.reason) == (4, 0, None)
        d = search(http, sid, query=BY_MEANING, threshold=0).json()
        assert d["meaning"] is True and d["note"] is None
        assert d["model"] == f"ollama:e5@{ollama.base}"
        assert d["data"][0]["path"] == "/decisions/db.md"
        paths = {p for p, _ in ollama.requests}
        assert paths == {"/api/embed"}
        assert all(b["model"] == "e5" and isinstance(b["input"], list)
                   for _, b in ollama.requests)
        assert ollama.requests[-1][1]["input"] == [BY_MEANING]  # the question, last
        assert http.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()["indexed"] == 4


def test_a_provider_that_hangs_costs_one_search_2_s_then_words_answer(http, store, sid):
    """Indexed through the service, which then hangs (accepts, reads, never answers): the
    next search answers by words after its 2 s and says why; the one after does not wait. The
    service answers no hung request until the test ends: an answer shows the search gave up,
    its requests show the next one did not ask, with no wall-clock bound."""
    with scripted_service() as service:
        store.search.use_embeddings(f"openai:{service.base}/v1:e5")
        assert store.search.index(sid).pending == 0
        assert search(http, sid, query=BY_MEANING).json()["meaning"] is True
        service.mode = "hang"
        d = search(http, sid, query="the pager").json()
        assert not service.released.is_set()  # the question that hung is still unanswered
        assert d["meaning"] is False and [h["path"] for h in d["data"]] == [
            "/people/oncall.md"]
        assert d["note"] == (f"the embeddings provider is unavailable ({service.base}/v1 did "
                             "not answer within 2 s): words alone answered")
        again = search(http, sid, query="pager").json()
        assert again["note"] == d["note"] and again["data"] == d["data"]
        # the index's batch, the first question, the one that hung: none since
        assert [b["input"] for _, b in service.requests][1:] == [[BY_MEANING], ["the pager"]]


def test_a_failing_provider_is_a_note_never_a_500(http, store, sid):
    with scripted_service() as service:
        service.mode = "fail"
        store.search.use_embeddings(f"openai:{service.base}/v1:e5")
        progress = store.search.index(sid)
        assert progress.embedded == 0 and "answered 500" in progress.reason
        d = search(http, sid, query="pager").json()
        assert d["meaning"] is False and d["data"][0]["path"] == "/people/oncall.md"
        assert d["note"] == "no memory is indexed by meaning yet: words alone answered"
        status = http.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()
        # why not: the provider's failure, not "no indexer is running" (the server's own
        # indexer tried and failed)
        assert status["indexed"] == 0, status
        assert status["reason"].startswith("the embeddings provider is unavailable"), status
        assert "answered 500" in status["reason"], status
        service.mode = "answer"
        assert store.search.index(sid).pending == 0
        status = http.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()
        assert (status["indexed"], status["reason"]) == (4, None), status
        store.memories.create(sid, "/new.md", "a new memory", actor=API)
        status = http.get(f"/v1/memory_stores/{sid}/memfs/search_status").json()
        assert status["reason"].startswith("not indexed yet"), status  # the failure is over
