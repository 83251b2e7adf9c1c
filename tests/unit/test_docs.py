"""Documentation checks (as sqlite-utils' ``tests/test_docs.py``): every CLI command and
subcommand has help ending in an ``Example:`` block, every option says what it does, the README
mentions every top-level command (its tour and its map of docs/ are where a newcomer finds
them), every command is documented in the README or a page of docs/, the README stays a quick
start (at most 300 lines), and every relative link of the README and of docs/ leads to a file
and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from memfs.cli import cli
from tests.support.cli import commands

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

#: The README is the quick start and a map; reference sections live in docs/ (issue 19).
README_MAX_LINES = 300


ALL = list(commands(cli))


def test_the_walk_finds_the_commands():
    names = {name for name, _ in ALL}
    assert {"memfs stores create", "memfs versions diff", "memfs session prompt"} <= names


@pytest.mark.parametrize("name,cmd", ALL, ids=[name for name, _ in ALL])
def test_command_has_help_with_example(name: str, cmd: click.Command):
    text = cmd.help or ""
    assert text.strip(), f"{name} has no help"
    assert cmd.get_short_help_str().strip(), f"{name} has no short help"
    assert "Example:" in text, f"{name}: the help ends with an Example: block, as sqlite-utils's do"
    example = text.split("Example:", 1)[1]
    assert "memfs" in example, f"{name}: the example shows a memfs command line"


@pytest.mark.parametrize("name,cmd", ALL, ids=[name for name, _ in ALL])
def test_every_option_has_help(name: str, cmd: click.Command):
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{name} {param.opts[0]} has no help text"


TOP_LEVEL = [name for name, _ in ALL if name.count(" ") == 1]


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_readme_mentions_every_top_level_command(name: str):
    assert f"`{name}" in README.read_text(encoding="utf-8") or name in _readme_code(), (
        f"README.md does not mention `{name}`"
    )


def _readme_code() -> str:
    return "\n".join(re.findall(r"^(?:    |```).*$", README.read_text(encoding="utf-8"), re.M))


@pytest.mark.parametrize("name,cmd", ALL[1:], ids=[name for name, _ in ALL[1:]])
def test_every_command_is_documented(name: str, cmd: click.Command):
    text = "\n".join(p.read_text(encoding="utf-8") for p in [README, *DOCS])
    assert name in text, f"neither README.md nor docs/*.md mentions `{name}`"


def test_the_readme_is_a_quick_start():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert "scripts/demo" in "\n".join(lines[:30]) and "scripts/test" in "\n".join(lines[:30])


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_anchor(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


LINKED = [README, *DOCS]


@pytest.mark.parametrize("doc", LINKED, ids=[p.name for p in LINKED])
def test_relative_links_lead_somewhere(doc: Path):
    text = doc.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links or doc.name == "EXPORT-FORMAT.md"
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: {link}: no file {path}"
        if anchor:
            assert anchor in _anchors(path), f"{doc.name}: {link}: no heading #{anchor}"


def test_the_endpoint_table_is_one_table_with_one_row_per_endpoint():
    text = (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8")
    table = text[text.index("| Endpoint | What it does |"):]
    rows = table[:table.index("\n\n")].splitlines()[2:]
    assert all(r.startswith("| ") for r in rows)
    firsts = [r.split(" | ")[0] for r in rows]
    assert len(firsts) == len(set(firsts)), firsts
    for needle in ("/changes?after", "/changes/stream", "/memfs/revert", "/memfs/snapshot"):
        assert any(needle in f for f in firsts), needle


def test_development_cites_no_file_the_repository_lacks():
    for doc in [README, *DOCS]:
        for name in re.findall(r"\b([A-Z][A-Z-]+\.md)\b", doc.read_text(encoding="utf-8")):
            found = (ROOT / name).exists() or (ROOT / "docs" / name).exists()
            assert found, f"{doc.name} cites {name}, which is not in the repository"
