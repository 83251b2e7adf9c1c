"""Pinned memories through ``memfs run`` (SPEC §9, issue 43): the agent's system-prompt file
holds each store's pinned memories after its note, within the budgets (``:pinned=N`` per
attachment), and ``memfs session prompt`` prints that file byte for byte, also after the
pinned memories changed (it renders from the versions the session recorded). A real session:
FUSE missing, skipped locally and failed when CI=true."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.store import Store
from tests.support.session import MEMFS, Run
from tests.support.storekit import API

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("fuse")]

SCRIPT = r"""
cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/prompt.md"
echo "Prefers: tea" >> "$ROOT/profile/pinned/profile.md"
"""


def test_the_prompt_file_is_memfs_session_prompt_before_and_after_a_change(
        open_store: Callable[..., Store], launch: Callable[..., Run], db: Path,
        tmp_path: Path) -> None:
    store = open_store()
    profile = store.stores.create("Profile").id
    notes = store.stores.create("Notes").id
    store.memories.write_path(profile, "/pinned/profile.md", "Name: Ada\n", actor=API)
    store.memories.write_path(profile, "/pinned/big.md", "b" * 6000, actor=API)
    store.memories.write_path(notes, "/todo.md", "---\npinned: true\n---\nship it\n", actor=API)
    root = tmp_path / "root"
    run = launch(["--isolation", "none", "--root", str(root), "--store", "Profile:pinned=8000",
                  "--store", "Notes:pinned=10"], SCRIPT, env={"ROOT": str(root)})
    assert run.wait() == 0, run.err
    prompt = (tmp_path / "prompt.md").read_text(encoding="utf-8")
    assert "```\nName: Ada\n```" in prompt and "b" * 6000 in prompt  # 8,000 for Profile
    assert "- `/todo.md` (29 characters): over this store's budget of 10 characters" in prompt
    assert prompt.index("## Profile") < prompt.index("Name: Ada") < prompt.index("## Notes")
    # The agent changed its pinned memory: the store has a new version, the prompt is as was.
    assert "Prefers: tea" in store.memories.get_by_path(profile, "/pinned/profile.md").content
    env = {**os.environ, "MEMFS_DB": str(db)}
    done = subprocess.run([*MEMFS, "session", "prompt", run.sid], env=env,
                          capture_output=True, check=True)
    assert done.stdout == prompt.encode("utf-8")
