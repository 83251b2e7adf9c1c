"""Typed memories on the command line (SPEC §8, issue 41): ``memfs memories list --type --tag
--preview``, ``memfs stores describe``, ``memfs memories delete STORE --type T``, ``memfs
expire`` and the store metadata keys that turn types and expiry on and off."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memfs.cli import cli
from memfs.store.typed import EXPIRY_ACTOR
from tests.support.cli import assert_error

#: A context memory that expired long ago (its front matter says so), with tags.
OLD = "---\nexpires: 2020-01-01\ntags: [sprint, ui]\n---\nhello world, the old plan\n"


@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def run(backend):
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(cli, ["--db", backend.url, *args], input=input)

    return invoke


@pytest.fixture
def ok(run):
    def invoke(*args: str, input: str | None = None) -> str:
        result = run(*args, input=input)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        return result.stdout

    return invoke


@pytest.fixture
def js(ok):
    def invoke(*args: str):
        return json.loads(ok("--json", *args))

    return invoke


@pytest.fixture
def notes(ok):
    """A store 'notes' (expiry on: a new store) with an expired context memory, a fresh one,
    a knowledge memory with a bad importance (a warning), and an untyped one."""
    ok("stores", "create", "notes")
    ok("memories", "create", "notes", "/context/old.md", "--content", OLD)
    ok("memories", "create", "notes", "/context/today.md", "--content", "what we do today\n")
    ok("memories", "create", "notes", "/knowledge/k.md",
       "--content", "---\nimportance: huge\ntags: [ui]\n---\nfact\n")
    ok("memories", "create", "notes", "/misc.md", "--content", "plain\n")
    return "notes"


# -- memfs memories list -------------------------------------------------------------------------


def test_list_by_type_and_by_tag(js, notes):
    assert [m["path"] for m in js("memories", "list", notes, "--type", "context")] == [
        "/context/old.md", "/context/today.md"]
    assert [m["path"] for m in js("memories", "list", notes, "--tag", "ui")] == [
        "/context/old.md", "/knowledge/k.md"]
    assert [m["path"] for m in js("memories", "list", notes, "--type", "context",
                                  "--tag", "ui")] == ["/context/old.md"]
    listed = js("memories", "list", notes, "--type", "knowledge")
    assert listed[0]["memfs_meta"]["type"] == "knowledge"


def test_list_shows_type_tags_expiry_and_warnings(ok, notes):
    lines = ok("memories", "list", notes).splitlines()
    assert lines[0].split() == ["SIZE", "UPDATED", "TYPE", "TAGS", "EXPIRES", "PATH"]
    old = next(line for line in lines if line.endswith("/context/old.md"))
    assert "context" in old and "sprint,ui" in old and "expired" in old
    today = next(line for line in lines if line.endswith("/context/today.md"))
    assert "in 7 days" in today or "in 6 days" in today
    misc = next(line for line in lines if line.endswith("/misc.md"))
    assert misc.split()[3:6] == ["-", "-", "-"]  # UPDATED is a date and a time
    # The warning is under its memory, on a line of its own.
    k = lines.index(next(line for line in lines if line.endswith("/knowledge/k.md")))
    assert "warning: importance: 'huge'" in lines[k + 1]


def test_list_preview_cuts_content_after_front_matter(ok, js, notes):
    lines = ok("memories", "list", notes, "--type", "context", "--preview", "11").splitlines()
    old = lines.index(next(line for line in lines if line.endswith("/context/old.md")))
    assert lines[old + 1].strip() == "hello world…"
    assert "expires:" not in "\n".join(lines)
    today = lines.index(next(line for line in lines if line.endswith("/context/today.md")))
    assert lines[today + 1].strip() == "what we do…"  # newlines are spaces; cut at 11
    listed = js("memories", "list", notes, "--type", "context", "--preview", "5")
    assert [m["content"] for m in listed] == ["hello", "what "]


def test_list_of_an_untyped_store_is_as_before(ok):
    ok("stores", "create", "plain")
    ok("memories", "create", "plain", "/a.md", "--content", "a")
    assert ok("memories", "list", "plain").splitlines()[0].split() == ["SIZE", "UPDATED", "PATH"]


def test_list_filter_errors_are_one_line(run, notes):
    assert_error(run("memories", "list", notes, "--type", "context", "--depth", "1"), 5,
                 "depth must be 0")
    assert_error(run("memories", "list", notes, "--tag", "x" * 65), 5, "tag must be")
    assert run("memories", "list", notes, "--preview", "0").exit_code == 2


# -- memfs stores describe -----------------------------------------------------------------------


def test_describe_json_is_the_stores_description(js, store, notes):
    sid = store.stores.resolve(notes).id
    got = js("stores", "describe", notes)
    want = store.typed.describe(sid)
    assert got["type"] == "memfs_store_description"
    assert {k: v for k, v in got.items() if k != "at"} == {
        k: v for k, v in want.items() if k != "at"}


def test_describe_human(ok, notes):
    out = ok("stores", "describe", notes)
    assert "3 memories" in out  # the expired one is left out: the store's expiry is on
    assert "context 1" in out and "knowledge 1" in out and "(none) 1" in out
    assert "/context/ 1" in out and "ui 1" in out
    assert "expiring within 7 days: 1" in out and "/context/today.md" in out
    assert "expired: 1" in out and "/context/old.md" in out
    assert "expiry: on" in out and "memfs expire notes" in out
    assert "warnings: 1" in out and "/knowledge/k.md: importance: 'huge'" in out
    assert "oldest change:" in out and "newest change:" in out
    assert "types (default):" in out
    assert [line.split() for line in out.splitlines() if line.strip().startswith("context ")
            ][-1] == ["context", "/context/", "0.2", "workflow", "7d"]


def test_describe_of_a_store_that_only_reports(ok, notes):
    ok("stores", "update", notes, "--metadata", "memfs_expiry=report")
    out = ok("stores", "describe", notes)
    assert "4 memories" in out  # reported, still counted
    assert "expiry: report" in out
    assert "memfs stores update notes --metadata memfs_expiry=on" in out


def test_describe_types_off(ok, notes):
    ok("stores", "update", notes, "--metadata", "memfs_types=off")
    assert "types: off" in ok("stores", "describe", notes)


def test_describe_unknown_store_is_one_line(run):
    run("stores", "create", "x")
    assert_error(run("stores", "describe", "nope"), 3, "nope")


# -- memfs memories delete --type ----------------------------------------------------------------


def test_delete_a_type_needs_yes_then_is_one_undoable_transaction(run, ok, js, store, notes):
    refused = run("memories", "delete", notes, "--type", "context")
    assert_error(refused, 2, "without --yes")
    assert len(js("memories", "list", notes, "--type", "context")) == 2

    dry = ok("memories", "delete", notes, "--type", "context", "--dry-run")
    assert "/context/old.md" in dry and "/context/today.md" in dry and "would delete 2" in dry
    assert len(js("memories", "list", notes, "--type", "context")) == 2

    out = ok("memories", "delete", notes, "--type", "context", "--yes")
    assert "deleted 2 memories of type context" in out
    undo = next(line for line in out.splitlines() if line.startswith("undo with: "))
    revert_id = undo.split()[-1]
    assert undo == f"undo with: memfs session revert {revert_id}"
    assert revert_id.startswith("memrevert_")
    assert js("memories", "list", notes, "--type", "context") == []
    sid = store.stores.resolve(notes).id
    gone = [v for v in store.versions.list(sid, limit=100).data if v.operation == "deleted"]
    assert {v.created_by.type for v in gone} == {"user_actor"}  # the CLI's actor

    ok("session", "revert", revert_id)
    assert len(js("memories", "list", notes, "--type", "context")) == 2


def test_delete_a_type_json_and_nothing_to_delete(js, ok, notes):
    got = js("memories", "delete", notes, "--type", "decision", "--yes")
    assert got["type"] == "memfs_type_cleared" and got["deleted"] == [] and got["revert_id"] is None
    assert "no memories of type decision" in ok("memories", "delete", notes, "--type",
                                                "decision", "--yes")


def test_delete_a_type_errors(run, notes):
    assert_error(run("memories", "delete", notes, "--type", "nope", "--yes"), 5,
                 "not a type of")
    assert run("memories", "delete", notes).exit_code == 2  # neither a memory nor a type
    assert run("memories", "delete", notes, "/misc.md", "--type", "context").exit_code == 2
    assert run("memories", "delete", notes, "/misc.md", "--dry-run").exit_code == 2


def test_delete_one_memory_still_works(js, ok, notes):
    out = js("memories", "delete", notes, "/misc.md")
    assert out["type"] == "memory_deleted"
    assert "deleted /knowledge/k.md" in ok("memories", "delete", notes, "/knowledge/k.md")


# -- memfs expire --------------------------------------------------------------------------------


def test_expire_deletes_as_versions_by_the_expiry_actor(ok, js, store, notes):
    dry = ok("expire", notes, "--dry-run")
    assert "would delete 1 expired memory" in dry and "/context/old.md" in dry
    assert len(js("memories", "list", notes, "--type", "context")) == 2

    out = ok("expire", notes)
    assert "deleted 1 expired memory" in out and "/context/old.md" in out
    undo = next(line for line in out.splitlines() if line.startswith("undo with: "))
    assert undo.split()[-1].startswith("memrevert_")
    assert [m["path"] for m in js("memories", "list", notes, "--type", "context")] == [
        "/context/today.md"]
    sid = store.stores.resolve(notes).id
    gone = [v for v in store.versions.list(sid, limit=100).data if v.operation == "deleted"]
    assert [(v.path, v.created_by) for v in gone] == [("/context/old.md", EXPIRY_ACTOR)]

    assert "nothing has expired" in ok("expire", notes)


def test_expire_in_a_store_that_only_reports(ok, js, notes):
    ok("stores", "update", notes, "--metadata", "memfs_expiry=report")
    out = ok("expire", notes)
    assert "only reported" in out and "/context/old.md" in out
    assert "memfs stores update notes --metadata memfs_expiry=on" in out
    assert len(js("memories", "list", notes, "--type", "context")) == 2
    got = js("expire", notes)
    assert got["type"] == "memfs_expiry_sweep"
    assert [s["path"] for s in got["reported"]] == ["/context/old.md"] and got["deleted"] == []

    ok("stores", "update", notes, "--metadata", "memfs_expiry=on")
    assert "deleted 1 expired memory" in ok("expire", notes)


def test_expire_errors_are_one_line(run):
    run("stores", "create", "x")
    assert_error(run("expire", "nope"), 3, "nope")


# -- memfs stores update: the metadata keys of typed memories -------------------------------------


def test_store_metadata_of_types_and_expiry_is_checked(run, ok, notes):
    assert_error(run("stores", "update", notes, "-m", "memfs_expiry=sometimes"), 5,
                 "memfs_expiry must be")
    assert_error(run("stores", "update", notes, "-m", "memfs_types={not json"), 5,
                 "memfs_types must be")
    types = '{"todo": {"directory": "/todo/", "expires": "1d", "importance": "low"}}'
    ok("stores", "update", notes, "-m", f"memfs_types={types}")
    ok("memories", "create", notes, "/todo/x.md", "--content", "x")
    assert "todo" in ok("memories", "list", notes, "--type", "todo")
