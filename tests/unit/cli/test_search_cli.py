"""``memfs search`` and ``memfs search --status`` (issue 20 §3), in-process (click's CliRunner),
on SQLite and PostgreSQL; the ``--embeddings`` setting, checked once and passed to the
servers, mounts and sessions the CLI starts."""

from __future__ import annotations

import functools
import json
import os
import re
import time

import pytest
from click.testing import CliRunner

from memfs.cli import cli
from memfs.cli import search as cli_search
from memfs.models import Actor
from tests.support.cli import assert_error
from tests.support.embedserver import scripted_service
from tests.support.memories import BY_MEANING, MEMORIES

API = Actor.api("apikey_test")
LINE = re.compile(r"^(/\S+) +([01]\.\d{3})  (.+)$")
LOCAL = "local:multilingual-e5-small-q4"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def sid(store) -> str:
    s = store.stores.create("notes").id
    for path, content in MEMORIES.items():
        store.memories.create(s, path, content, actor=API)
    return s


@pytest.fixture
def run(backend, monkeypatch):
    runner = CliRunner()
    monkeypatch.delenv("MEMFS_EMBEDDINGS", raising=False)

    def invoke(*args: str, env: dict[str, str] | None = None):
        return runner.invoke(cli, ["--db", backend.url, *args], env=env)

    return invoke


def lines(result) -> list[tuple[str, float, str]]:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    out = []
    for line in result.stdout.splitlines():
        m = LINE.match(line)
        assert m, line
        out.append((m.group(1), float(m.group(2)), m.group(3)))
    return out


# -- searching -----------------------------------------------------------------------------------


def test_a_fresh_store_is_found_by_meaning_at_once(run, store, sid):
    """Nobody indexed it: the command catches it up first, then meaning answers."""
    assert store.search.status(sid)["indexed"] == 0
    t0 = time.monotonic()
    result = run("search", "notes", BY_MEANING, "--threshold", "0")
    hits = lines(result)
    assert time.monotonic() - t0 < cli_search.CATCH_UP_SECONDS + 5
    assert hits[0] == ("/decisions/db.md", hits[0][1], MEMORIES["/decisions/db.md"])
    assert [s for _, s, _ in hits] == sorted((s for _, s, _ in hits), reverse=True)
    assert len(hits) == 4 and result.stderr == ""  # no note: meaning covered the store
    store.search.use_embeddings("local")
    assert store.search.status(sid)["indexed"] == 4
    # The question may be several words without quotes, and the store named by its id.
    assert lines(run("search", sid, "which", "database", "did", "we", "pick"))[0][0] == (
        "/decisions/db.md")


def test_json_prints_the_result(run, store, sid):
    result = run("search", "notes", BY_MEANING, "--limit", "2", "--threshold", "0", "--json")
    assert result.exit_code == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["type"] == "memfs_search_result" and d["meaning"] is True
    assert (d["indexed"], d["memories"], d["model"], d["note"]) == (4, 4, LOCAL, None)
    assert len(d["data"]) == 2
    top = d["data"][0]
    assert {"path", "memory_id", "score", "snippet", "matched"} <= set(top)
    assert top["path"] == "/decisions/db.md" and top["matched"] == ["meaning"]
    assert top["memory_id"] == store.memories.get_by_path(sid, "/decisions/db.md").id
    # --json before the command, and the filters
    d = json.loads(run("--json", "search", "notes", BY_MEANING, "--path-prefix", "/prefs/",
                       "--threshold", "0.1").stdout)
    assert [h["path"] for h in d["data"]] == ["/prefs/editor.md"]


@pytest.mark.parametrize("how", ["before", "after", "env"])
def test_embeddings_none_words_alone_answer_and_the_note_says_so(run, sid, how):
    args = {"before": ["--embeddings", "none", "search", "notes", "the", "pager"],
            "after": ["search", "notes", "the pager", "--embeddings", "none"],
            "env": ["search", "notes", "the pager"]}[how]
    result = run(*args, env={"MEMFS_EMBEDDINGS": "none"} if how == "env" else None)
    [hit] = lines(result)
    assert hit[0] == "/people/oncall.md"
    assert result.stderr == ("memfs: note: meaning is off (--embeddings none): words alone "
                             "answered\n")


def test_nothing_found_says_so(run, sid):
    result = run("--embeddings", "none", "search", "notes", "zebra")
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == ("memfs: no memory matches (meaning is off (--embeddings none): "
                             "words alone answered)\n")


def test_nothing_over_the_threshold_is_one_line_with_the_best_and_exit_0(run, sid):
    best = lines(run("search", "notes", BY_MEANING, "--threshold", "0"))[0][1]
    d = json.loads(run("search", "notes", BY_MEANING, "--threshold", "0", "--json").stdout)
    assert round(d["best"], 3) == best and d["data"][0]["score"] == d["best"]
    if d["best"] < 1:
        result = run("search", "notes", BY_MEANING, "--threshold", "1")
        assert result.exit_code == 0 and result.stdout == ""
        assert result.stderr == (f"memfs: nothing scored 1 or more (best {d['best']:.2f}): "
                                 "nothing stored seems to answer this\n")
        d = json.loads(run("search", "notes", BY_MEANING, "--threshold", "1",
                           "--json").stdout)
        assert d["data"] == [] and d["note"].startswith("nothing scored 1 or more")
    # --min-score: the old name, still taken
    assert lines(run("search", "notes", BY_MEANING, "--min-score", "0"))[0][1] == best


def test_words_only_answers_by_words_without_meaning(run, sid):
    d = json.loads(run("search", "notes", "vim editor", "--words-only", "--threshold", "0",
                       "--json").stdout)
    assert d["meaning"] is False and d["data"]
    assert all(h["matched"] == ["words"] for h in d["data"])


def test_session_searches_every_store_of_a_session_under_mount_paths(run, store, sid):
    docs = store.stores.create("docs").id
    store.memories.create(docs, "/pager.md", "the pager policy", actor=API)
    other = store.stores.create("secrets").id
    store.memories.create(other, "/pager.md", "the secret pager", actor=API)
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid},
                              {"type": "memory_store", "memory_store_id": docs,
                               "access": "read_only"}])
    result = run("--embeddings", "none", "search", "--session", s.id, "the", "pager",
                 "--threshold", "0")
    got = lines(result)
    assert {p for p, _, _ in got} == {"/mnt/memory/notes/people/oncall.md",
                                      "/mnt/memory/docs/pager.md"}
    assert [x for _, x, _ in got] == sorted((x for _, x, _ in got), reverse=True)
    d = json.loads(run("--embeddings", "none", "search", "--session", s.id, "pager",
                       "--threshold", "0", "--json").stdout)
    assert {h["memory_store_id"] for h in d["data"]} == {sid, docs}
    assert_error(run("search", "--session", "sesn_nope", "pager"), 3, "sesn_nope")
    result = run("search", "--session", s.id)
    assert result.exit_code == 2 and "QUERY" in result.stderr


def test_a_store_still_catching_up_says_so(run, store, sid, monkeypatch):
    store.search.use_embeddings("local")
    store.search.index(sid)
    store.memories.create(sid, "/new/a.md", "fresh one", actor=API)
    store.memories.create(sid, "/new/b.md", "fresh two", actor=API)
    monkeypatch.setattr(cli_search, "CATCH_UP_SECONDS", 0.0)
    result = run("search", "notes", BY_MEANING)
    assert lines(result)[0][0] == "/decisions/db.md"
    assert result.stderr == ("memfs: note: meaning covers 4 of 6 memories (the index is "
                             "catching up)\n")


def test_a_provider_that_hangs_costs_the_command_2_s(run, sid):
    with scripted_service() as service:
        service.mode = "hang"
        t0 = time.monotonic()
        result = run("--embeddings", f"openai:{service.base}/v1:e5", "search", "notes",
                     "pager")
        took = time.monotonic() - t0
    assert took < 3.0, took
    [hit] = lines(result)
    assert hit[0] == "/people/oncall.md"
    assert result.stderr == (f"memfs: note: the embeddings provider is unavailable "
                             f"({service.base}/v1 did not answer within 2 s): words alone "
                             "answered\n")
    assert len(service.requests) == 1  # the index's first batch; the question was not sent


def test_bad_input_is_one_line_and_an_exit_code(run, sid):
    assert_error(run("search", "notes", "x", "--limit", "0"), 5, "limit must be between")
    assert_error(run("search", "notes", "x", "--limit", "101"), 5, "limit must be between")
    assert_error(run("search", "notes", "x", "--path-prefix", "people"), 5, "path_prefix")
    assert_error(run("search", "notes", "x", "--threshold", "2"), 5, "threshold")
    assert_error(run("search", "notes", "x", "--threshold", "nan"), 5, "threshold")
    assert_error(run("search", "notes", "x", "--min-score", "2"), 5, "threshold")
    assert_error(run("search", "notes", ""), 5, "at least one word")
    assert_error(run("search", "notes", "a\x00b"), 5, "NUL")
    assert_error(run("search", "nope", "x"), 3, "nope")
    for args in (["search"], ["search", "notes"], ["search", "--status", "notes", "x"],
                 ["search", "notes", "x", "--limit", "abc"]):
        result = run(*args)
        assert result.exit_code == 2, (args, result.stderr)
        assert result.stdout == ""


# -- --status ------------------------------------------------------------------------------------


def test_status_of_every_store_and_of_one(run, store, sid):
    other = store.stores.create("empty").id
    result = run("search", "--status")
    assert result.exit_code == 0, result.stderr
    head, *rows = result.stdout.splitlines()
    assert head.split() == ["ID", "NAME", "MEMORIES", "BY", "MEANING", "MODEL", "STATUS"]
    by_id = {r.split()[0]: r for r in rows}
    assert set(by_id) == {sid, other}
    assert by_id[sid].split()[1:5] == ["notes", "4", "0", LOCAL]
    assert "not indexed yet" in by_id[sid]
    assert by_id[other].split()[1:6] == ["empty", "0", "0", LOCAL, "indexed"]
    assert lines(run("search", "notes", BY_MEANING))  # catches it up
    d = json.loads(run("search", "--status", "notes", "--json").stdout)
    assert d == {"store_id": sid, "name": "notes", "memories": 4, "indexed": 4,
                 "model": LOCAL, "indexing": None, "reason": None}
    every = json.loads(run("--json", "search", "--status").stdout)
    assert sorted(s["store_id"] for s in every) == sorted([sid, other])
    d = json.loads(run("--embeddings", "none", "search", "--status", sid, "--json").stdout)
    assert d["model"] is None and d["reason"] == "meaning is off (--embeddings none)"
    assert_error(run("search", "--status", "nope"), 3, "nope")


# -- --url: the server's store answers -------------------------------------------------------


def test_with_url_the_server_answers(store, sid, monkeypatch):
    from starlette.testclient import TestClient

    from memfs import client
    from memfs.api import create_app
    from tests.support.asgi import through

    store.search.use_embeddings("local")
    store.search.index(sid)
    with TestClient(create_app(store, ["k"])) as tc:
        monkeypatch.setattr(client, "Client",
                            functools.partial(client.Client, transport=through(tc)))
        runner = CliRunner()
        url = ["--url", "http://memfs", "--api-key", "k"]
        result = runner.invoke(cli, [*url, "search", "notes", BY_MEANING, "--json"])
        assert result.exit_code == 0, (result.stderr, result.exception)
        d = json.loads(result.stdout)
        assert d == store.search.in_store(sid, BY_MEANING).to_dict()
        result = runner.invoke(cli, [*url, "search", "notes", "pager"])
        assert lines(result)[0][0] == "/people/oncall.md"
        result = runner.invoke(cli, [*url, "search", "--status", "--json"])
        assert json.loads(result.stdout) == [store.search.status(sid)]
        assert_error(runner.invoke(cli, [*url, "search", "notes", "x", "--limit", "0"]), 5,
                     "limit must be between")


# -- the setting: checked once, passed on ----------------------------------------------------


@pytest.mark.parametrize("setting", ["bogus", "ollama:", "openai:http://h", "ollama:ftp://x/m"])
def test_a_bad_setting_is_one_line_and_exit_2(run, setting):
    result = run("--embeddings", setting, "stores", "list")
    assert_error(result, 2, f"--embeddings {setting!r} names no provider")
    assert_error(run("stores", "list", "--embeddings", setting), 2, "names no provider")
    result = run("stores", "list", env={"MEMFS_EMBEDDINGS": setting})
    assert_error(result, 2, "names no provider", "(from MEMFS_EMBEDDINGS)")


def test_the_setting_reaches_serve_mount_and_run(run, sid, monkeypatch):
    """The daemons and servers the CLI starts read MEMFS_EMBEDDINGS: the setting given on the
    command line is in the environment by the time they start."""
    from memfs.daemons import mount as daemon
    from memfs.daemons import server
    from memfs.launcher import runner

    seen: list[tuple[str, str | None]] = []

    def record(what):
        return lambda *a, **kw: seen.append((what, os.environ.get("MEMFS_EMBEDDINGS"))) or 0

    monkeypatch.setattr(server, "serve", record("serve"))
    monkeypatch.setattr(daemon, "mount", record("mount"))
    monkeypatch.setattr(runner, "run", record("run"))
    setting = "ollama:http://127.0.0.1:9/e5"
    for args in (["--embeddings", setting, "serve"], ["mount", "notes", "/tmp/x",
                                                      "--embeddings", setting],
                 ["--embeddings", setting, "run", "--store", "notes", "--", "true"]):
        result = run(*args)
        assert result.exit_code == 0, (args, result.stderr, result.exception)
        os.environ.pop("MEMFS_EMBEDDINGS", None)
    assert seen == [("serve", setting), ("mount", setting), ("run", setting)]


def test_the_agent_of_a_session_does_not_get_the_embeddings_key():
    from memfs.launcher.agent import LAUNCHER_ONLY_ENV

    assert "MEMFS_EMBEDDINGS_API_KEY" in LAUNCHER_ONLY_ENV
