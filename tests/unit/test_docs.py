"""Documentation checks (as sqlite-utils' ``tests/test_docs.py``): every CLI command and
subcommand has help ending in an ``Example:`` block, every option says what it does, and the
README mentions the command groups listed in :data:`README_COMMANDS`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from memfs.cli import cli

README = Path(__file__).resolve().parents[2] / "README.md"

#: Top-level commands the README must mention as ``memfs <name>``. Add each command here when
#: its README section is written.
README_COMMANDS = ["stores", "memories", "versions", "session", "run", "mount", "serve",
                   "export", "import", "db", "dream"]


def _commands(group: click.Group, prefix: str = "memfs") -> Iterator[tuple[str, click.Command]]:
    yield prefix, group
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", cmd


ALL = list(_commands(cli))


def test_the_walk_finds_the_commands():
    names = {name for name, _ in ALL}
    assert {"memfs stores create", "memfs versions diff", "memfs session prompt"} <= names


@pytest.mark.parametrize("name,cmd", ALL, ids=[name for name, _ in ALL])
def test_command_has_help_with_example(name: str, cmd: click.Command):
    text = cmd.help or ""
    assert text.strip(), f"{name} has no help"
    assert cmd.get_short_help_str().strip(), f"{name} has no short help"
    assert "Example:" in text, f"{name}: the help ends with an Example: block (STYLE §3)"
    example = text.split("Example:", 1)[1]
    assert "memfs" in example, f"{name}: the example shows a memfs command line"


@pytest.mark.parametrize("name,cmd", ALL, ids=[name for name, _ in ALL])
def test_every_option_has_help(name: str, cmd: click.Command):
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{name} {param.opts[0]} has no help text"


@pytest.mark.parametrize("command", README_COMMANDS)
def test_readme_mentions_command(command: str):
    assert any(name == f"memfs {command}" for name, _ in ALL), f"no command {command}"
    if not README.exists():
        pytest.skip("README.md is not written yet")
    assert f"memfs {command}" in README.read_text(encoding="utf-8"), (
        f"README.md does not mention `memfs {command}`"
    )
