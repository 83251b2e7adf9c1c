"""``memfs search``: find memories by what they mean (issue 20), and ``memfs search --status``.

On a local database the command first catches the store's index up for at most
:data:`CATCH_UP_SECONDS` (so that a store nobody indexes yet is found by meaning at once),
then asks :meth:`memfs.store.Store.search.in_store`; with ``--url`` the server's store answers (its
``memfs serve`` keeps every store indexed). Hits go to stdout, one a line, best first:
``path  score  snippet``; the result's note (why words alone answered, how much of the store
meaning covers) to stderr, one line. ``--json`` prints the whole result.

A provider that hangs costs this command :data:`memfs.recall.search.QUERY_TIMEOUT` once: a
batch of the catch-up must answer within it, and once the provider failed the question is not
sent to it again (:class:`_Bounded`): the words answer, and the note says why.
"""

from __future__ import annotations

import copy
import posixpath
from typing import TYPE_CHECKING, Any

import click

from ..daemons import logs
from ..recall.embeddings import HttpProvider, Provider, Unavailable
from ..recall.search import QUERY_TIMEOUT
from ..rules import SEARCH_DEFAULT_THRESHOLD
from ..store import Store
from .shared import MemfsCommand, table, walk

if TYPE_CHECKING:
    from .base import Context

__all__ = ["search_cmd", "CATCH_UP_SECONDS"]

#: Seconds a local ``memfs search`` spends at most catching the store's index up first.
CATCH_UP_SECONDS = 3.0


class _Bounded:
    """The provider of one local ``memfs search``: an HTTP provider's batch of passages must
    answer within :data:`QUERY_TIMEOUT` (not the indexer's minute), and a provider that failed
    while catching up is not asked the question (the search's words answer, its note says
    why): a provider that hangs costs the command that long, once."""

    def __init__(self, inner: Provider) -> None:
        if isinstance(inner, HttpProvider):
            inner = copy.copy(inner)  # this command's own: its timeout only
            inner.passage_timeout = QUERY_TIMEOUT
        self.inner = inner
        self.model = inner.model
        self.failed: Unavailable | None = None

    def passages(self, texts: list[str]) -> Any:
        try:
            return self.inner.passages(texts)
        except Unavailable as e:
            self.failed = e
            raise

    def query(self, text: str, timeout: float) -> Any:
        if self.failed is not None:
            raise Unavailable(str(self.failed))
        return self.inner.query(text, timeout)


def _status_lines(statuses: list[dict[str, Any]]) -> str:
    rows = [(s["store_id"], s["name"], s["memories"], s["indexed"], s["model"] or "-",
             s["reason"] or ("indexing now" if s["indexing"] else "indexed"))
            for s in statuses]
    return table(("ID", "NAME", "MEMORIES", "BY MEANING", "MODEL", "STATUS"), rows,
                 right=(2, 3))


# Registered on the memfs group by memfs.cli (its __init__), like the commands of the other modules.
@click.command("search", cls=MemfsCommand)
@click.argument("store_ref", metavar="STORE", required=False)
@click.argument("words", metavar="QUERY", nargs=-1)
@click.option("--session", "session_id", default=None, metavar="ID",
              help="Search every store of session ID at once (no STORE), hits merged by "
              "relevance and shown under their mount paths.")
@click.option("--limit", type=int, default=None, metavar="N",
              help="Show at most N hits (1 to 100; default 10).")
@click.option("--path-prefix", default=None, metavar="P",
              help="Only memories whose path begins with P (e.g. /people/).")
@click.option("--threshold", type=float, default=None, metavar="S",
              help=f"Only hits of a relevance of at least S (0 to 1; default "
              f"{SEARCH_DEFAULT_THRESHOLD}).")
@click.option("--min-score", "min_score", type=float, default=None, hidden=True,
              help="The old name of --threshold.")
@click.option("--words-only", is_flag=True,
              help="Rank by words alone (at once: meaning may still be catching up).")
@click.option("--status", is_flag=True,
              help="Say how far each store (or STORE) is indexed by meaning, with which "
              "model, and why not.")
@click.pass_obj
def search_cmd(ctx: Context, store_ref: str | None, words: tuple[str, ...],
               session_id: str | None, limit: int | None, path_prefix: str | None,
               threshold: float | None, min_score: float | None, words_only: bool,
               status: bool) -> None:
    """Find the memories of STORE (id or name) that answer QUERY, by words and meaning.

    Prints the best hits first, one a line: path, relevance (0 to 1) and a one-line snippet;
    --json prints the result (each hit with path, memory_id, score, snippet and which of
    words and meaning matched it). Only hits of a relevance of at least --threshold
    (default 0.7) are shown: when none is, nothing is printed, one line on stderr says so
    with the best relevance seen, and the exit status is still 0. Words are always current;
    meaning covers the memories an indexer has embedded: on a local database this command
    catches the store up for a few seconds first, and `memfs serve` and mounts keep their
    stores indexed. When meaning cannot help (--embeddings none, a provider down, nothing
    indexed yet), words answer alone and a note on stderr says why.

    `memfs search --session ID QUERY`: every store of session ID (those attached to it, but
    its time-travel snapshots), hits merged by relevance, each under its mount path.

    `memfs search --status [STORE]`: per store (every store without STORE), how many
    memories are indexed by meaning, with which model, and why not all are.

    Example:

    \b
        memfs search notes "who gets paged at night"
        memfs search notes editor settings --path-prefix /prefs/ --limit 3 --json
        memfs search notes "anything about tea?" --threshold 0.5
        memfs search --session sesn_01... "who gets paged at night"
        memfs --embeddings none search notes "exact words only"
        memfs search --status
    """
    store = ctx.store
    if status:
        if words or session_id is not None:
            raise click.UsageError("--status takes a STORE at most, not a QUERY or --session")
        if store_ref is not None:
            one = store.search.status(store.stores.resolve(store_ref).id)
            ctx.output(one, _status_lines([one]))
            return
        statuses = [store.search.status(s.id) for s in walk(
            lambda **kw: store.stores.list(include_archived=True, **kw))]
        ctx.output(statuses, _status_lines(statuses) if statuses else "no memory stores")
        return
    if session_id is not None and store_ref is not None:
        words = (store_ref, *words)  # no STORE with --session: every word is the query's
    if not words:
        raise click.UsageError("give STORE and QUERY: memfs search STORE QUERY (or "
                               "--session ID QUERY, or --status)")
    options: dict[str, Any] = {
        "limit": limit, "path_prefix": path_prefix,
        "threshold": threshold if threshold is not None else min_score,
        **({"channels": ("words",)} if words_only else {})}
    mounts: dict[str, str] = {}  # a session's: store id -> mount path
    if session_id is not None:
        mounts = {r.memory_store_id: r.mount_path
                  for r in store.sessions.get(session_id).resources}
    if session_id is None:
        sids = [store.stores.resolve(store_ref or "").id]
    elif isinstance(store, Store):
        sids = [r.memory_store_id for r in store.search.session_stores(session_id)]
    else:
        sids = []  # a server's stores: its server indexes them
    bounded = None
    if isinstance(store, Store) and not words_only:
        provider = store.search.embeddings
        if provider is not None:
            bounded = _Bounded(provider)
            store.search.use_embeddings(bounded)
            for sid in sids:
                store.search.index(sid, seconds=CATCH_UP_SECONDS / len(sids))
    query = " ".join(words)
    result = (store.search.in_session(session_id, query, **options) if session_id is not None
              else store.search.in_store(sids[0], query, **options))
    if bounded is not None and bounded.failed is not None and not result.meaning:
        # Whatever else the store says (nothing indexed yet): why meaning did not help.
        why = (f"the embeddings provider is unavailable ({bounded.failed}): words alone "
               "answered")
        cut = (result.note or "").split("; ")[0] if not result.hits else ""
        result.note = f"{cut}; {why}" if cut.startswith("nothing scored") else why
    if ctx.as_json:
        ctx.output(result)
        return

    def shown(h: Any) -> str:
        if h.memory_store_id in mounts:
            return posixpath.join(mounts[h.memory_store_id], h.path.lstrip("/"))
        return str(h.path)

    width = max((len(shown(h)) for h in result.hits), default=0)
    for h in result.hits:
        click.echo(f"{shown(h).ljust(width)}  {h.score:.3f}  {h.snippet}".rstrip())
    if result.hits:
        if result.note:
            logs.say(f"note: {result.note}")
    elif result.best is not None and result.note:  # the threshold left every memory out
        logs.say(result.note)  # one line: nothing scored S or more (best B)...
    else:
        logs.say("no memory matches" + (f" ({result.note})" if result.note else ""))

