"""Diffs of two texts as HTML tables, unified or side by side (GitHub's two views): lines
from :mod:`difflib`, and within a changed line the changed characters marked (``<del>``,
``<ins>``). Unchanged stretches longer than the context are folded into a hunk header."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from markupsafe import Markup, escape

MODES = ("unified", "split")


def _lines(text: str | None) -> list[str]:
    return (text or "").splitlines()


def _marked(a: str, b: str) -> tuple[Markup, Markup]:
    """``a`` and ``b`` with the characters that differ wrapped in ``<del>``/``<ins>``."""
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        x, y = escape(a[i1:i2]), escape(b[j1:j2])
        if op == "equal":
            left.append(x)
            right.append(y)
        else:
            if x:
                left.append(Markup("<del>{}</del>").format(x))
            if y:
                right.append(Markup("<ins>{}</ins>").format(y))
    return Markup("").join(left), Markup("").join(right)


def _row(cells: list[tuple[str, object]], cls: str = "") -> Markup:
    tds = Markup("").join(
        Markup('<td class="{}">{}</td>').format(c, v if v is not None else "") for c, v in cells)
    return Markup('<tr class="{}">{}</tr>').format(cls, tds)


def _hunks(old: list[str], new: list[str], context: int) -> Iterator[list[tuple[str, int, int,
                                                                                 int, int]]]:
    yield from difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(
        context)


def changed(old: str | None, new: str | None) -> tuple[int, int]:
    """(lines added, lines removed)."""
    added = removed = 0
    sm = difflib.SequenceMatcher(None, _lines(old), _lines(new), autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def diff_html(old: str | None, new: str | None, *, mode: str = "unified",
              context: int = 3) -> Markup:
    """The diff from ``old`` to ``new`` as a ``<div class="diff">`` table (``mode``
    ``unified`` or ``split``). Identical texts give a one-line note."""
    a, b = _lines(old), _lines(new)
    if a == b:
        if (old or "") == (new or ""):
            return Markup('<p class="muted">No change in content.</p>')
        return Markup('<p class="muted">Only line endings changed (a final newline, or '
                      '<code>\\r\\n</code> and <code>\\n</code>).</p>')
    rows: list[Markup] = []
    cols = 3 if mode == "unified" else 4
    for group in _hunks(a, b, context):
        i0, j0 = group[0][1] + 1, group[0][3] + 1
        rows.append(Markup('<tr class="hunk"><td colspan="{}">@@ -{},{} +{},{} @@</td></tr>')
                    .format(cols, i0, group[-1][2] - group[0][1], j0,
                            group[-1][4] - group[0][3]))
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                rows += _equal_rows(a[i1:i2], i1, j1, mode)
            else:
                rows += _changed_rows(op, a[i1:i2], b[j1:j2], i1, j1, mode)
    return Markup('<div class="diff {}"><table>{}</table></div>').format(
        mode, Markup("").join(rows))


def _equal_rows(lines: list[str], i1: int, j1: int, mode: str) -> list[Markup]:
    """The rows of lines both texts have (old line ``i1 + 1`` is new line ``j1 + 1``)."""
    rows = []
    for k, text in enumerate(lines):
        line = escape(text)
        if mode == "unified":
            rows.append(_row([("num", i1 + k + 1), ("num", j1 + k + 1),
                              ("", Markup("&nbsp;") + line)]))
        else:
            rows.append(_row([("num", i1 + k + 1), ("", line),
                              ("num", j1 + k + 1), ("", line)]))
    return rows


def _changed_rows(op: str, olds: list[str], news: list[str], i1: int, j1: int,
                  mode: str) -> list[Markup]:
    """The rows of a change (``op``: replace, delete, insert) of ``olds`` (from old line
    ``i1 + 1``) into ``news`` (from new line ``j1 + 1``): in a replace, the lines paired in
    order have their changed characters marked."""
    pairs = min(len(olds), len(news)) if op == "replace" else 0
    marked = [_marked(olds[k], news[k]) for k in range(pairs)]
    left = [m[0] for m in marked] + [escape(x) for x in olds[pairs:]]
    right = [m[1] for m in marked] + [escape(x) for x in news[pairs:]]
    rows = []
    if mode == "unified":
        for k, line in enumerate(left):
            rows.append(_row([("num", i1 + k + 1), ("num", None),
                              ("", Markup("-") + line)], "del"))
        for k, line in enumerate(right):
            rows.append(_row([("num", None), ("num", j1 + k + 1),
                              ("", Markup("+") + line)], "add"))
        return rows
    for k in range(max(len(left), len(right))):
        lcell = ("del", left[k]) if k < len(left) else ("", None)
        rcell = ("add", right[k]) if k < len(right) else ("", None)
        rows.append(_row([("num", i1 + k + 1 if k < len(left) else None), lcell,
                          ("num", j1 + k + 1 if k < len(right) else None), rcell]))
    return rows
