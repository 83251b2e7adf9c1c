"""What every module of the ``memfs`` command line shares, below its framework
(:mod:`memfs.cli.base`, which builds its groups on this command class): the command class that
takes the global options after its name, aligned tables, and every page of a listing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import click

from ..models import Page
from .globals import after_options, format_options

T = TypeVar("T")

#: Page size when walking every page of a listing.
PAGE = 100


class MemfsCommand(click.Command):
    """A memfs command: its summary in a group's listing is its whole first sentence (click
    would cut it to fit one line), and it takes the global options after its name too
    (``memfs stores list --json --db X`` as ``memfs --json --db X stores list``:
    :mod:`memfs.cli.globals`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(after_options(self.params))

    def get_short_help_str(self, limit: int = 45) -> str:
        return super().get_short_help_str(limit=1000)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        format_options(self, ctx, formatter)


def walk(fetch: Callable[..., Page[T]], size: int | None = None) -> Iterator[T]:
    """The items of a paginated listing in order, fetching a page of ``size`` (default
    :data:`PAGE`) only when the previous one is used up: stop early, and no more is read."""
    page: str | None = None
    while True:
        result = fetch(limit=size or PAGE, page=page)
        yield from result.data
        page = result.next_page
        if page is None:
            return


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """Plain aligned columns, the last one unpadded; ``right`` lists right-aligned columns."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            c.rjust(w) if i in right else (c if i == len(row) - 1 else c.ljust(w))
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
