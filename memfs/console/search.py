"""A store's search page (``/stores/{id}/search?q=``).

By default the memories are ranked by ``store.search.in_store`` (words
and meaning, :mod:`memfs.recall.search`): best first, each with its path, score, a snippet
with the question's words marked, and why it matched (``words``, ``meaning`` or both); the
result's note says when meaning was not used or covers only part of the store. ``limit``
(1 to 100, default :data:`RANKED_LIMIT`) asks for more. ``mode=exact`` is the substring
search of paths and contents (:meth:`Store.search.hits`), path hits first.

The store page's search-status line (:meth:`Store.search.status`) is
``templates/_search_status.html``, in the store page's live region.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..recall.schema import fold
from ..recall.words import words
from ..rules import parse_int
from .web import Console, page

#: Ranked hits shown unless more are asked for, and the most one may ask for (the store's).
RANKED_LIMIT = 20
#: Exact-text searches show this many hits at most.
EXACT_LIMIT = 100

_WORD = re.compile(r"[^\W_]+")


def _stem(word: str) -> str:
    # As memfs.recall.words places a snippet: a word's first five folded letters.
    return fold(word).lower()[:5]


def marked(snippet: str, question: str) -> list[tuple[str, bool]]:
    """``snippet`` in pieces, each with whether it is one of the question's words (by its
    first five letters, accents and case folded, as the snippet was chosen)."""
    stems = {_stem(w) for w in words(question)}
    pieces: list[tuple[str, bool]] = []
    at = 0
    for m in _WORD.finditer(snippet):
        if _stem(m.group()) in stems:
            if m.start() > at:
                pieces.append((snippet[at:m.start()], False))
            pieces.append((m.group(), True))
            at = m.end()
    if at < len(snippet):
        pieces.append((snippet[at:], False))
    return pieces


def sentence(note: str) -> str:
    """A note of a result as a sentence: its first letter upper-case, a full stop."""
    note = note.strip()
    return (note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")) if note else ""


async def store_search(console: Console, request: Request) -> Response:
    store = console.store
    sid = request.path_params["store_id"]
    query = request.query_params.get("q", "")
    exact = request.query_params.get("mode") == "exact"
    current = await console.run(store.stores.get, sid)
    context: dict[str, Any] = dict(store=current, query=query, exact=exact, hits=[],
                                   result=None, more=None, error=None, everything=None,
                                   store_limit=store.search.max_limit)
    if query:
        try:
            if exact:
                context.update(await _exact(console, sid, query))
            else:
                context.update(await _ranked(console, request, sid, query))
        except errors.InvalidRequest as e:
            context["error"] = e.message
    return console.render(request, "search.html", status=400 if context["error"] else 200,
                          **context)


async def _exact(console: Console, sid: str, query: str) -> dict[str, Any]:
    """The hits of the substring search, and whether there are more than are shown."""
    store = console.store
    hits = await console.run(store.search.hits, sid, query,
                             limit=EXACT_LIMIT + 1)
    return dict(hits=hits[:EXACT_LIMIT], more=len(hits) > EXACT_LIMIT)


async def _ranked(console: Console, request: Request, sid: str,
                  query: str) -> dict[str, Any]:
    """The ranked search's result and hits, with a link to more hits when the page is full
    (``more``) and to every memory ranked when none passed the threshold (``everything``).

    :raises InvalidRequest: the store's refusal of the limit or threshold asked.
    """
    store = console.store
    out: dict[str, Any] = {}
    text = request.query_params.get("limit")
    # Not a number: the store's refusal says what a limit is.
    limit: int | str = RANKED_LIMIT if text is None else (parse_int(text) or text)
    # ?threshold=0 ranks every candidate (the store refuses what is no relevance); by default
    # the search's own, as an agent gets it.
    raw = request.query_params.get("threshold")
    threshold: float | str | None = None
    if raw is not None:
        try:
            threshold = float(raw)
        except ValueError:
            threshold = raw
    result = await console.run(store.search.in_store, sid, query, limit=limit,
                               threshold=threshold)
    if isinstance(limit, int) and len(result.hits) == limit < store.search.max_limit:
        out["more"] = f"/stores/{sid}/search?" + urllib.parse.urlencode(
            {"q": query, "limit": store.search.max_limit,
             **({"threshold": raw} if raw is not None else {})})
    if not result.hits and result.best is not None:
        out["everything"] = f"/stores/{sid}/search?" + urllib.parse.urlencode(
            {"q": query, "threshold": 0})
    out.update(result=result, hits=result.hits)
    return out


routes: list[BaseRoute] = [
    page("/stores/{store_id}/search", store_search),
]
