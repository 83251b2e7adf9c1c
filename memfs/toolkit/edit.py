"""What an edit of a memory's text needs, for a tool: its lines (:func:`split_lines_keeping_cr`),
numbered as the SDK's memory tool numbers them (:func:`numbered`), the lines where a text
occurs (:func:`occurrence_lines`, for an ambiguous ``str_replace``), and how often an edit
is made again on what the memory holds now when other writers keep changing it
(:data:`EDIT_ATTEMPTS`). The memory tool (:mod:`memfs.tools`) and the MCP server
(:mod:`memfs.mcp`) word their answers their own way over these."""

from __future__ import annotations

#: How wide line numbers are: the SDK's memory tool shows at most 999,999 lines.
LINE_NUMBER_WIDTH = len(str(999999))
#: Attempts of an edit that keeps meeting concurrent changes (its text says what to change,
#: so it is made again on what the memory holds now).
EDIT_ATTEMPTS = 5


def numbered(lines: list[str], start: int) -> str:
    """``lines`` numbered from ``start``, right-aligned, a tab before each line."""
    return "\n".join(
        f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)
    )


def split_lines_keeping_cr(content: str) -> list[str]:
    """The lines of ``content`` (a ``\\r`` kept, as the memory holds it), without the empty
    one after a final newline: ``"a\\nb\\n"`` -> ``["a", "b"]``, ``""`` -> ``[]``."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def occurrence_lines(content: str, text: str) -> list[int]:
    """The line (from 1) where each occurrence of ``text`` in ``content`` starts, overlapping
    ones included."""
    found: list[int] = []
    at = content.find(text)
    while at != -1:
        found.append(content.count("\n", 0, at) + 1)
        at = content.find(text, at + 1)
    return found
