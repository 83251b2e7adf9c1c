"""What the commands on a store share (``stores``, ``memories``, ``versions``, ``session``, ...:
the local database, or a server's with ``--url``; SPEC §5).

Writes are attributed to the person at the keyboard (``local_user_actor``). A store is named by
id or name, a memory by id or by path (a ref that starts with "/"). Here: the actor, every page
of a listing, times for tables, ``KEY=VALUE`` options, content from ``--content``, ``--file``
or stdin, confirmations, the memory a ref names, and the typed memories' part of a store
(:func:`typed`) with how long a memory has left (:func:`expires_text`).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, cast

import click

from .. import errors
from ..models import Actor, Memory, Page
from ..rules import local_user_actor, parse_time, slash_hint
from .base import AnyStore, fail
from .shared import PAGE as _PAGE
from .shared import walk as _walk


def actor() -> Actor:
    return local_user_actor()


def pages(fetch: Callable[..., Page[Any]], limit: int | None) -> list[Any]:
    """Every item of a paginated listing, or the first ``limit`` of them."""
    return list(itertools.islice(_walk(fetch, min(_PAGE, limit or _PAGE)), limit))


def when(ts: str | None) -> str:
    """An RFC 3339 UTC timestamp, shortened for tables (``2025-01-31 12:00:59``)."""
    return ts[:19].replace("T", " ") if ts else "-"


#: The options a session's attachments take beside ``--store`` (``memfs run``, ``memfs mcp``).
instructions_option = click.option(
    "--instructions",
    "instructions",
    multiple=True,
    metavar="REF=TEXT",
    help="Instructions for the agent on the attached store REF (id or name; at most 4,096 "
    "characters).",
)
spec_option = click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A session spec file (YAML or JSON: resources, title, metadata) instead of --store "
    "and --instructions.",
)


def kv_pairs(values: Sequence[str], option: str, form: str = "KEY=VALUE") -> list[tuple[str, str]]:
    """``k=v`` option values as ``(k, v)`` pairs in order; anything else is a usage error that
    names ``form``."""
    out: list[tuple[str, str]] = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected {form}, got {item!r}", param_hint=option)
        out.append((key, value))
    return out


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def given_content(content: str | None, file: str | None, *, use_stdin: bool) -> str | bytes | None:
    """The content given by ``--content``, ``--file`` (``-`` is stdin) or, when ``use_stdin``
    and stdin is not a terminal, stdin. Files and stdin are passed on as bytes: the store checks
    UTF-8 and size. Returns None when no content was given.

    Nothing on a stdin that was not asked for (``</dev/null``, a job with no input) is a usage
    error, not empty content made in silence: ``--content ''`` (or ``--file -``) asks for it.
    """
    if content is not None and file is not None:
        raise click.UsageError("give --content or --file, not both")
    if content is not None:
        return content
    if file == "-":
        return sys.stdin.buffer.read()
    if file is None and use_stdin and not _stdin_is_tty():
        data = sys.stdin.buffer.read()
        if not data:
            raise click.UsageError("stdin is empty: pipe the content, or give --content '' "
                                   "for empty content")
        return data
    if file is not None:
        try:
            with open(file, "rb") as f:
                return f.read()
        except OSError as e:
            fail(f"cannot read {file}: {e.strerror or e}", 1)
    return None


def confirm(yes: bool, question: str, what: str) -> None:
    """Ask ``question`` on a terminal unless ``--yes``; without a terminal, require ``--yes``."""
    if yes:
        return
    if not _stdin_is_tty():
        fail(f"refusing to {what} without --yes (stdin is not a terminal)", 2)
    if not click.confirm(question, default=False):
        fail("aborted", 1)


def resolve_memory(store: AnyStore, store_id: str, ref: str, view: str = "full") -> Memory:
    """The live memory ``ref`` (an id, or a path) names; a ref that is neither a path nor an
    id (``hello.md``) gets the hint that paths start with '/'."""
    try:
        return store.memories.resolve(store_id, ref, view=view)
    except errors.NotFound as e:
        if ref.startswith(("/", "mem_")):
            raise
        raise errors.NotFound(f"{e.message} ({slash_hint(ref)})") from None


def memory_id(store: AnyStore, store_id: str, ref: str) -> str:
    """The id of the memory ``ref`` names, live or deleted: an id as is; a path names the
    memory there now or, failing that, the memory most recently at that path.

    :raises NotFound: a path that no memory has ever had.
    """
    if not ref.startswith("/"):
        return ref
    try:
        return store.memories.resolve(store_id, ref, view="basic").id
    except errors.NotFound:
        pass
    versions = _walk(lambda **kw: store.versions.list(store_id, **kw))
    found = next((v.memory_id for v in versions if v.path == ref), None)
    if found is None:
        raise errors.NotFound(f"no memory at {ref} in {store_id}, now or in its history")
    return found


def actor_text(actor: Actor | None) -> str:
    if actor is None:
        return "-"
    return f"{actor.type.removesuffix('_actor')}:{actor.id}"


def deleted(type_: str, id_: str) -> dict[str, str]:
    return {"id": id_, "type": type_}


class TypedAPI(Protocol):
    """The typed memories' part of a store (SPEC §8), as a Store and a Client both have it
    (:class:`memfs.store.typed.Typed`): what the commands call."""

    def describe(self, store_id: str) -> dict[str, Any]: ...

    def sweep(self, store_id: str | None = None, *, dry_run: bool = False) -> dict[str, Any]: ...

    def clear_type(self, store_id: str, type_: str, *, actor: Actor | None,
                   dry_run: bool = False) -> dict[str, Any]: ...


class _Typed(Protocol):
    @property
    def typed(self) -> TypedAPI: ...


def typed(store: AnyStore) -> TypedAPI:
    """``store.typed``: describe, sweep, clear a type, on the local database or a server's."""
    return cast(_Typed, store).typed


def expires_text(expires_at: str | None, now: datetime) -> str:
    """How long a memory has left, for tables: ``expired``, ``in 3 days``, ``in 5 hours``,
    ``in 12 minutes``; ``-`` when it never expires."""
    if expires_at is None:
        return "-"
    left = (parse_time(expires_at) - now).total_seconds()
    if left <= 0:
        return "expired"
    if left >= 2 * 86400:
        n, unit = round(left / 86400), "day"
    elif left >= 2 * 3600:
        n, unit = round(left / 3600), "hour"
    else:
        n, unit = max(1, round(left / 60)), "minute"
    return f"in {n} {unit}{'' if n == 1 else 's'}"
