"""How an import or an export reports its progress (the CLI's progress bar): a callback
given a count, of memories or files, or of the bytes read."""

from __future__ import annotations

from collections.abc import Callable

#: Told each step's count as it is made.
Progress = Callable[[int], None]


def no_progress(n: int) -> None:
    """No one is told (the default)."""


class Halves:
    """A progress callback fed twice the bytes (two passes): it reports half of them."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.odd = 0

    def __call__(self, n: int) -> None:
        n, self.odd = divmod(n + self.odd, 2)
        if n:
            self.progress(n)

