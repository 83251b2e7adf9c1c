"""What the CLI tests share: the walk over every command, and the shape of a failed command
(one line on stderr)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click


def commands(group: click.Group, prefix: str = "memfs") -> Iterator[tuple[str, click.Command]]:
    """Every command of ``group`` and below, with its full name (``memfs stores create``)."""
    yield prefix, group
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            yield from commands(cmd, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", cmd


def assert_error(result: Any, code: int, *fragments: str) -> None:
    """One line on stderr, starting with ``memfs:``, nothing on stdout, the given exit code."""
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: "), result.stderr
    assert result.stdout == ""
    for f in fragments:
        assert f in lines[0]
