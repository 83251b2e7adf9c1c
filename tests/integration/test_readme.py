"""The README's commands, and the docs pages', run as written (issue 10: a newcomer copies them;
issue 19: and follows them again another day).

Every code block right after a ``<!-- test: run -->`` line of README.md or of a page of docs/
(fenced, or indented by four spaces) runs: each file's blocks in order, in one bash shell with
``set -e``, shell blocks as they are, Python blocks with the venv's python. README.md runs
first, then the docs pages by name, all on one fresh database and HOME; then all of it once
more on the same database, as someone following the README a second time would. The only
change made to the blocks is the port: ``8000`` becomes a free one, since the machine may be
serving on 8000 already. A block that starts ``memfs serve`` in the background is followed by a
wait for the server; the server stops when its file's shell ends.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- test: run -->"


def documents() -> list[Path]:
    """README.md, then the pages of docs/ by name."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def runnable_blocks(text: str, name: str = "README.md") -> list[tuple[str, str]]:
    """``(language, code)`` of each block after a marker (``sh`` for an indented block)."""
    lines = text.splitlines()
    blocks: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        assert j < len(lines), f"{name}:{i + 1}: {MARKER} is followed by no code block"
        if lines[j].startswith("```"):
            lang = lines[j][3:].strip() or "sh"
            end = lines.index("```", j + 1)
            blocks.append((lang, "\n".join(lines[j + 1:end])))
        else:
            assert lines[j].startswith("    "), (
                f"{name}:{i + 1}: {MARKER} is followed by no code block: {lines[j]!r}")
            code = []
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                code.append(lines[j][4:])
                j += 1
            blocks.append(("sh", "\n".join(code).strip("\n")))
    return blocks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


WAIT_SERVER = f"""
__wait_server() {{
    {sys.executable} - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{{sys.argv[1]}}/openapi.json", timeout=1)
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("memfs serve did not answer")
PY
}}
"""


def script(blocks: list[tuple[str, str]], port: int) -> str:
    parts = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
             WAIT_SERVER]
    for n, (lang, code) in enumerate(blocks, 1):
        code = code.replace("8000", str(port))
        parts.append(f"echo '--- block {n} ({lang})' >&2")
        if lang in ("sh", "bash", "console"):
            parts.append(code)
            if re.search(r"memfs serve\b.*&", code):
                parts.append(f"__wait_server {port}")
        elif lang == "python":
            parts.append(f"python - <<'MEMFS_README_PY'\n{code}\nMEMFS_README_PY")
        else:
            raise AssertionError(f"block {n}: cannot run a {lang!r} block")
    return "\n".join(parts) + "\n"


def test_the_readme_marks_its_runnable_commands():
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    text = "\n".join(code for _, code in blocks)
    for command in ("memfs stores create", "memfs stores list", "memfs memories create",
                    "memfs memories show", "memfs serve", "MEMFS_API_KEY"):
        assert command in text, f"no runnable README block runs {command}"
    assert any(lang == "python" for lang, _ in blocks)


def test_the_docs_pages_mark_runnable_commands_too():
    """The snippets that moved to docs/ with their sections stay tested."""
    marked = {p.name for p in documents()[1:] if MARKER in p.read_text(encoding="utf-8")}
    assert {"memory-tool-and-dreams.md", "http-api.md"} <= marked, marked


@pytest.fixture
def shell(tmp_path):
    """Runs one file's blocks in a fresh bash on the test's database and HOME."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env.update(HOME=str(home), MEMFS_DB=str(tmp_path / "memfs.db"),
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")

    def run(doc: Path, blocks: list[tuple[str, str]], attempt: int) -> str:
        p = subprocess.run(["bash", "-c", script(blocks, _free_port())], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        where = f"{doc.name}, run {attempt}"
        assert p.returncode == 0, (
            f"{where}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        assert "Traceback" not in p.stderr, f"{where}:\n{p.stderr}"
        assert "warning" not in p.stderr.lower(), f"{where}:\n{p.stderr}"
        return p.stdout

    run.env = env  # type: ignore[attr-defined]
    return run


def test_the_documented_commands_run_as_written_twice(shell, tmp_path):
    docs = [(d, runnable_blocks(d.read_text(encoding="utf-8"), d.name)) for d in documents()]
    docs = [(d, b) for d, b in docs if b]
    assert docs[0][0] == README
    for attempt in (1, 2):
        for doc, blocks in docs:
            out = shell(doc, blocks, attempt)
            if doc == README:
                assert "/mnt/memory/user-preferences" in out  # the Python example's last line
    # Following the documents twice made each of their stores once: no name is ambiguous.
    p = subprocess.run([str(Path(sys.executable).parent / "memfs"), "--json", "stores", "list"],
                       env=shell.env, capture_output=True, text=True, check=True)
    names = Counter(s["name"] for s in json.loads(p.stdout))
    assert names and max(names.values()) == 1, names
