"""Editors and file tools on a real mount (issue 38): vim, nano and ``sed -i`` save through
swap, backup and temporary files, which are session scratch (docs/mounts.md): each save is
one version of the file, and nothing else reaches the store.

vim and nano are installed by scripts/test (scripts/_packages.sh); a machine without them
skips these tests locally and fails them in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support import need, wait_until
from tests.support.mount import ops_of

pytestmark = pytest.mark.fuse


def _only_one_path(store, sid: str, path: str) -> None:
    """The store holds one memory, at ``path``, and no version of any other path."""
    assert [m.path for m in store.memories.tree(sid)] == [path]
    assert {v.path for v in store.versions.list(sid, limit=100).data} == {path}


def _editor(name: str) -> str:
    exe = shutil.which(name)
    need(exe is not None, f"{name} is not installed (scripts/_packages.sh installs it)")
    assert exe is not None
    return exe


def test_vim_saves_one_version_and_its_swap_and_backup_stay_scratch(setup):
    store, sid, m = setup
    vim = _editor("vim.tiny") if shutil.which("vim") is None else _editor("vim")
    (m.root / "x.md").write_text("hello world\n")
    before = store.memories.get_by_path(sid, "/x.md")
    # vim's defaults (-N: 'nocompatible', as any vimrc sets): a binary swap file .x.md.swp,
    # the probe file 4913, and a backup made by renaming x.md to x.md~ before the save.
    for word in ("there", "again"):
        r = subprocess.run(
            [vim, "-N", "-u", "NONE", "-i", "NONE", "-c", f"s/world\\|there/{word}/",
             "-c", "wq", "x.md"],
            cwd=m.root, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stdout.decode(errors="replace")[-500:]
        assert (m.root / "x.md").read_text() == f"hello {word}\n"
    after = store.memories.get_by_path(sid, "/x.md")
    assert (after.id, after.content) == (before.id, "hello again\n")
    assert ops_of(store, sid) == ["created", "modified", "modified"]
    _only_one_path(store, sid, "/x.md")
    assert sorted(os.listdir(m.root)) == ["x.md"]


def test_a_swap_file_takes_any_bytes_and_lives_in_the_mount_only(setup):
    store, sid, m = setup
    swap = m.root / ".x.md.swp"
    swap.write_bytes(b"b0VIM 9.0\x00\xff\xfe")
    assert swap.read_bytes() == b"b0VIM 9.0\x00\xff\xfe"
    assert ".x.md.swp" in os.listdir(m.root)
    assert store.memories.count(sid) == 0 and ops_of(store, sid) == []
    swap.unlink()
    assert os.listdir(m.root) == []


def test_sed_i_leaves_one_version_and_no_temporary_file_in_the_history(setup):
    store, sid, m = setup
    (m.root / "hello.md").write_text("hello world\n")
    subprocess.run(["sed", "-i", "s/world/there/", "hello.md"], cwd=m.root, check=True,
                   timeout=30)
    assert (m.root / "hello.md").read_text() == "hello there\n"
    assert ops_of(store, sid) == ["created", "modified"]
    _only_one_path(store, sid, "/hello.md")


def test_nano_saves_one_version(setup, tmp_path):
    """nano driven through a terminal of tmux's (nano needs one): type, ^S, ^X."""
    store, sid, m = setup
    nano = _editor("nano")
    tmux = _editor("tmux")
    (m.root / "n.md").write_text("first\n")
    sock = str(tmp_path / "tmux.sock")
    env = {**os.environ, "TERM": "xterm"}
    subprocess.run([tmux, "-S", sock, "new-session", "-d", "-x", "80", "-y", "24", "-c",
                    str(m.root), f"{nano} --ignorercfiles n.md; echo $? > {tmp_path}/rc"],
                   check=True, env=env, timeout=30)
    try:
        def showing(text: str) -> bool:
            screen = subprocess.run([tmux, "-S", sock, "capture-pane", "-p"],
                                    capture_output=True, text=True, env=env).stdout
            return text in screen

        def keys(*typed: str) -> None:
            subprocess.run([tmux, "-S", sock, "send-keys", "-t", "0", *typed], check=True,
                           env=env, timeout=30)

        # One step at a time, each seen on the screen: keys sent at once may reach a busy
        # nano before it is ready for them (a loaded machine).
        wait_until(lambda: showing("first"), 30, interval=0.1, what="nano showing n.md")
        keys("added ")
        wait_until(lambda: showing("added first"), 30, interval=0.1, what="the typed text")
        keys("C-s")
        wait_until(lambda: showing("Wrote"), 30, interval=0.1, what="nano's 'Wrote 1 line'")
        keys("C-x")
        wait_until(lambda: (tmp_path / "rc").exists(), 30, interval=0.1, what="nano exited")
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], env=env, capture_output=True)
    assert (tmp_path / "rc").read_text().strip() == "0"
    assert (m.root / "n.md").read_text() == "added first\n"
    assert ops_of(store, sid) == ["created", "modified"]
    _only_one_path(store, sid, "/n.md")
