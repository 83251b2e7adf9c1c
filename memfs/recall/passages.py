"""A memory cut into passages, what meaning embeds of it (issue 39).

One vector for a whole memory saw only its beginning (the model reads about 90 tokens in the
time budget, and 512 at most): a 3 kB memory was judged by its first 400 characters. Now a
memory is cut into passages of at most :data:`PASSAGE_CHARS` characters, at line ends where it
can (else at a sentence's or a word's end), each passage beginning with the line that ended
the one before (:data:`OVERLAP_LINES`), so that a sentence cut in two is read whole once. Each
passage is embedded with the memory's path before it (a path's words say much: ``/people/dana
.md``), and a memory scores by its best passage (:mod:`memfs.recall.search`).

A passage is known by its span in the content (``start``, ``end``: the snippet of a hit comes
from the passage that matched) and by a digest of the text embedded (``key``): when a memory
changes, only the passages whose text changed are embedded again (:mod:`memfs.recall.indexer`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import xxhash

__all__ = ["Passage", "split", "PASSAGE_CHARS", "OVERLAP_LINES", "encode", "decode"]

#: The longest passage, in characters of content (about 150 tokens): on the dev conversations
#: of LoCoMo (scripts/bench_recall.py --locomo), 600 ranked sessions best by meaning (hit@5
#: 0.90, against 0.85 for 300 and 0.86 for 1,200).
PASSAGE_CHARS = 600
#: Lines of a passage repeated at the start of the next.
OVERLAP_LINES = 1

_BREAK = re.compile(r"(?<=[.!?;:])\s+|\s+")


@dataclass(frozen=True)
class Passage:
    """A passage: ``content[start:end]``, embedded as ``text``, known by ``key``."""

    start: int
    end: int
    text: str
    key: str


def _lines(content: str) -> list[tuple[int, int]]:
    """The spans of the content's lines that hold something (a blank line is no passage's
    start), overlong lines cut at a sentence's or a word's end."""
    spans: list[tuple[int, int]] = []
    at = 0
    for line in content.splitlines(keepends=True):
        start, end = at, at + len(line.rstrip("\r\n"))
        at += len(line)
        if not content[start:end].strip():
            continue
        while end - start > PASSAGE_CHARS:
            cut = start + PASSAGE_CHARS
            breaks = [m.end() for m in _BREAK.finditer(content, start + PASSAGE_CHARS // 2, cut)]
            if breaks:
                cut = breaks[-1]
            spans.append((start, cut))
            start = cut
        spans.append((start, end))
    return spans


def split(path: str, content: str) -> list[Passage]:
    """The passages of a memory, in order; one at least (a memory with no text is embedded by
    its path)."""
    lines = _lines(content)
    groups: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    for span in lines:
        if current and span[1] - current[0][0] > PASSAGE_CHARS:
            groups.append(current)
            kept = current[-OVERLAP_LINES:] if OVERLAP_LINES else []
            current = kept if kept and span[1] - kept[0][0] <= PASSAGE_CHARS else []
        current.append(span)
    if current:
        groups.append(current)
    if not groups:
        groups = [[(0, len(content))]]
    out = []
    for g in groups:
        start, end = g[0][0], g[-1][1]
        text = path + "\n" + content[start:end]
        out.append(Passage(start, end, text, xxhash.xxh64_hexdigest(text.encode("utf-8",
                                                                                 "surrogatepass"))))
    return out


def encode(passages: list[Passage]) -> str:
    """What ``memory_vectors.passages`` records: ``[[start, end, key], ...]``, in the order of
    the vectors in ``memory_vectors.vector``."""
    return json.dumps([[p.start, p.end, p.key] for p in passages], separators=(",", ":"))


def decode(recorded: str) -> list[tuple[int, int, str]]:
    """The spans and keys :func:`encode` recorded (none for a vector of memfs before passages:
    one vector of the memory's beginning)."""
    if not recorded:
        return []
    return [(int(s), int(e), str(k)) for s, e, k in json.loads(recorded)]
