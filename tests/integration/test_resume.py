"""``memfs run --resume SESSION``: a real session whose agent posts its conversation through
the session API (as a harness does), then a real session resuming it: the same stores, the
metadata pointing back, the last messages in the prompt file with the tool calls condensed,
``memfs session prompt`` equal to that file after the old session goes on; on a local database
and on a server (``--url``), and the one-line errors of a session that cannot be resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.launcher.history import HISTORY_KEY, RESUMED_FROM_KEY
from memfs.store import Store
from tests.support.remote import KEY, remote_env
from tests.support.session import MEMFS, Run, memfs_run

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("fuse")]

#: The agent's side: posts messages 0..5 (user, agent, …), reads a memory, writes one, posts
#: messages 6..11, through its own session token (MEMFS_URL, MEMFS_API_KEY).
CHAT = r"""
post() {
  "$PY" - "$@" <<'EOF'
import os, sys
from memfs.client import Client
c = Client(os.environ["MEMFS_URL"], os.environ["MEMFS_API_KEY"])
c.events.send(os.environ["MEMFS_SESSION_ID"], [
    {"type": "user.message" if int(i) % 2 == 0 else "agent.message",
     "content": [{"type": "text", "text": f"message {i}"}]} for i in sys.argv[1:]])
EOF
}
post 0 1 2 3 4 5
cat "$R/notes/a.md" > /dev/null
echo "tea" > "$R/notes/drinks.md"
post 6 7 8 9 10 11
"""

#: The resumed session's agent keeps what it was given.
KEEP = r"""
cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/prompt2.md"
echo "$MEMFS_SESSION_ID" > "$T/sid2"
"""


def check_block(prompt: str, old: str, root: Path) -> None:
    """The last 10 messages of CHAT, oldest first, with its tool calls on one line each."""
    block = prompt[prompt.index("# The conversation this session resumes"):]
    assert f"This session resumes session {old}." in block
    assert [i for i in range(12) if f"\n\n> message {i}\n" in block] == list(range(2, 12))
    assert f"- tool cat read {root}/notes/a.md -> ok\n" in block
    assert f"{root}/notes/drinks.md -> ok\n" in block
    assert "Its last 10 messages, oldest first, and " in block


def test_resume_on_a_local_database(launch: Callable[..., Run], db: Path, tmp_path: Path
                                    ) -> None:
    with Store(db) as store:
        notes = store.stores.create("Notes").id
        store.memories.create(notes, "/a.md", "hello\n", actor=None)
        store.stores.create("Other")
    root = tmp_path / "root"
    env = {"R": str(root), "PY": sys.executable}
    first = launch(["--store", "Notes:workflow", "--instructions", "Notes=Be brief.",
                    "--root", str(root), "--isolation", "none"], CHAT, env=env)
    assert first.wait() == 0, first.err
    old = first.sid

    second = launch(["--resume", old, "--root", str(root), "--isolation", "none"], KEEP,
                    env=env)
    assert second.wait() == 0, second.err
    assert second.err == ""
    new = (tmp_path / "sid2").read_text().strip()
    prompt = (tmp_path / "prompt2.md").read_text()
    check_block(prompt, old, root)
    assert f"- Mount path: {root}/notes\n" in prompt and "- Instructions: Be brief." in prompt
    assert "- Scope: workflow" in prompt and "## Other" not in prompt

    with Store(db) as store:
        s = store.sessions.get(new)
        assert s.metadata[RESUMED_FROM_KEY] == old
        assert json.loads(s.metadata[HISTORY_KEY])["messages"] == 10
        [r] = s.resources
        assert (r.memory_store_id, r.access, r.memfs_scope, r.instructions) == (
            notes, "read_write", "workflow", "Be brief.")
        # The old session goes on: the new one's prompt is still what its agent got.
        store.events.add(old, [{"type": "user.message",
                                "content": [{"type": "text", "text": "later"}]}])
    env_db = {**os.environ, "MEMFS_DB": str(db)}
    shown = subprocess.run([*MEMFS, "session", "prompt", new], env=env_db,
                           capture_output=True, check=True).stdout
    assert shown == prompt.encode()

    # Fewer messages, a smaller budget, other stores.
    third = launch(["--resume", old, "--last-messages", "3", "--history-budget", "2000",
                    "--store", "Other", "--root", str(root), "--isolation", "none"], KEEP,
                   env=env)
    assert third.wait() == 0, third.err
    prompt3 = (tmp_path / "prompt2.md").read_text()
    assert "## Other" in prompt3 and "## Notes" not in prompt3
    block = prompt3[prompt3.index("# The conversation"):]
    assert [m for m in ("later", "message 11", "message 10", "message 9") if m in block] == [
        "later", "message 11", "message 10"]


def test_a_session_that_cannot_be_resumed(db: Path, tmp_path: Path) -> None:
    with Store(db) as store:
        store.stores.create("Notes")
    for args, code, said in (
        (["--resume", "sesn_nope"], 3, "memfs: session 'sesn_nope' not found\n"),
        (["--resume", "sesn_nope", "--last-messages", "-1"], 2, "--last-messages"),
    ):
        done = memfs_run(db, *args, "--root", str(tmp_path / "root"), "--isolation", "none",
                         "--", "true")
        assert done.returncode == code, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
        if code == 3:
            assert done.stderr == said
    with Store(db) as store:
        assert store.sessions.list().data == []


def test_resume_against_a_server(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--url: the old session and the new one live on the server; a key of another workspace
    does not see the old session (one line, exit 3)."""
    from memfs.client import Client

    root = tmp_path / "root"
    env = {**os.environ, **remote_env(server.url), "T": str(tmp_path), "R": str(root),
           "PY": sys.executable, "MEMFS_DB": str(tmp_path / "unused.db")}
    with Client(server.url, KEY) as c:
        notes = c.stores.create("Resume Notes")
        c.memories.create(notes.id, "/a.md", "hello\n")
    slug = "resume-notes"
    chat = CHAT.replace("$R/notes/", f"$R/{slug}/")
    script = 'echo "$MEMFS_SESSION_ID" > "$T/sid"\n' + chat
    run = [*MEMFS, "run", "--root", str(root), "--isolation", "none"]
    done = subprocess.run([*run, "--store", notes.id, "--", "bash", "-c", script], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    old = (tmp_path / "sid").read_text().strip()
    done = subprocess.run([*run, "--resume", old, "--", "bash", "-c", KEEP], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    prompt = (tmp_path / "prompt2.md").read_text()
    block = prompt[prompt.index("# The conversation this session resumes"):]
    assert [i for i in range(12) if f"\n\n> message {i}\n" in block] == list(range(2, 12))
    assert f"- tool cat read {root}/{slug}/a.md -> ok\n" in block
    new = (tmp_path / "sid2").read_text().strip()
    with Client(server.url, KEY) as c:
        assert c.sessions.get(new).metadata[RESUMED_FROM_KEY] == old
        assert c.sessions.get(new).resources[0].memory_store_id == notes.id
        c.events.send(old, [{"type": "user.message",  # the old session goes on
                             "content": [{"type": "text", "text": "later"}]}])
    shown = subprocess.run([*MEMFS, "session", "prompt", new], env=env, capture_output=True,
                           check=True).stdout
    assert shown == prompt.encode()

    # A key of another workspace sees no such session.
    with Store(server.stderr.parent / "memfs.db") as store:
        other = store.keys.create("team b", workspace="team-b", role="admin").key
    assert other is not None
    done = subprocess.run([*run, "--resume", old, "--", "true"],
                          env={**env, **remote_env(server.url, other)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("memfs: ") and len(done.stderr.splitlines()) == 1
    assert old in done.stderr
