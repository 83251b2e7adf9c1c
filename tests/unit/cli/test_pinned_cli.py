"""``memfs stores create --pinned-template FILE`` (SPEC §9, issue 43): the store's first pinned
memory, its working memory, made from a template, which the next session's prompt shows; a
template the store refuses leaves no store behind; a store whose pinned prefix is off has
nowhere to put it. ``memfs session prompt`` shows the block. On SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memfs.cli import cli
from tests.support.cli import assert_error

TEMPLATE = "# Working memory\n\n- Name:\n- Preferences:\n"


@pytest.fixture
def run(backend):
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, ["--db", backend.url, *args])

    return invoke


def test_a_store_made_with_its_working_memory(run, backend, tmp_path) -> None:
    (tmp_path / "t.md").write_text(TEMPLATE)
    done = run("stores", "create", "profile", "--pinned-template", str(tmp_path / "t.md"))
    assert done.exit_code == 0, done.stderr
    assert "with its working memory /pinned/working-memory.md" in done.stdout
    store = backend.open()
    sid = store.stores.resolve("profile").id
    assert store.memories.get_by_path(sid, "/pinned/working-memory.md").content == TEMPLATE
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    prompt = run("session", "prompt", session.id)
    assert "#### `/pinned/working-memory.md`\n\n```\n# Working memory\n" in prompt.stdout
    # Under the store's own prefix.
    done = run("stores", "create", "p2", "-m", "memfs_pinned_prefix=/keep", "--pinned-template",
               str(tmp_path / "t.md"))
    assert done.exit_code == 0, done.stderr
    assert store.memories.get_by_path(store.stores.resolve("p2").id,
                                      "/keep/working-memory.md").content == TEMPLATE


def test_a_refused_template_leaves_no_store(run, backend, tmp_path) -> None:
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe not utf-8")
    assert_error(run("stores", "create", "profile", "--pinned-template",
                     str(tmp_path / "bad.md")), 5, "UTF-8")
    assert backend.open().stores.list().data == []
    done = run("stores", "create", "profile", "-m", "memfs_pinned_prefix=off",
               "--pinned-template", str(tmp_path / "bad.md"))
    assert done.exit_code == 2 and "memfs_pinned_prefix=off" in done.stderr
    assert_error(run("stores", "create", "profile", "--pinned-template",
                     str(tmp_path / "none.md")), 1, "cannot read")
    assert backend.open().stores.list().data == []
