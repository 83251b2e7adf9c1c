"""Names every part of the store uses: constants, ids and time, and the checks of
arguments that several parts make."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Collection
from typing import Any, TypeVar

from ..backends import Row
from ..errors import InvalidRequest, NotFound, PreconditionFailed, StoreArchived
from ..models import Event, Memory, MemoryPrefix, ToolEvents, ToolPair, tool_event_dicts
from ..rules import SHA256_PATTERN, format_us, new_id, parse_time, validate_text

log = logging.getLogger(__name__)

T = TypeVar("T")


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: A memory's columns without its content (``view=basic``), so the content is never read.
BASIC_MEMORY_COLS = (
    "id, store_id, path, NULL AS content, content_sha256, content_size_bytes, version_id, "
    "created_at, updated_at, mtype, importance, expires_at, pinned, meta"
)
#: A memories row, every column named: the memory, then what it says about itself
#: (:meth:`memfs.store.frontmatter.Derived.columns`).
INSERT_MEMORY = (
    "INSERT INTO memories (id, store_id, path, content, content_sha256, content_size_bytes, "
    "version_id, created_at, updated_at, mtype, importance, expires_at, pinned, meta, "
    "meta_rev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The derived columns of a memories row, set again at each change or when a store's types
#: change (:meth:`memfs.store.frontmatter.Derived.columns`, in this order).
DERIVED_SET = "mtype = ?, importance = ?, expires_at = ?, pinned = ?, meta = ?, meta_rev = ?"
_SHA256_RE = re.compile(SHA256_PATTERN)
#: ASCII's upper-case letters to lower case, nothing else (what SQL's lower() does here).
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: A cursor's integers are SQLite integers.
INT64 = range(-(2**63), 2**63)
OPERATIONS = ("created", "modified", "deleted")
SESSION_STATUSES = ("rescheduling", "running", "idle", "terminated")
#: Event types a client may send to a session (API.md §4.1 events.send).
CLIENT_EVENT_TYPES = (
    "user.message",
    "user.interrupt",
    "user.tool_confirmation",
    "user.custom_tool_result",
    "user.define_outcome",
    "user.tool_result",
    "system.message",
    "agent.message",
)
#: The conversation's messages (SPEC §9): a transcript shows them whole.
MESSAGE_EVENT_TYPES = ("user.message", "agent.message")
#: The blocks a message may hold (the SDK's BetaManagedAgents…MessageEvent content).
MESSAGE_BLOCK_TYPES = {
    "user.message": ("text", "image", "document", "redacted"),
    "agent.message": ("text", "redacted"),
}
#: The most events one ``events.send`` records (all or none of them).
MAX_SEND_EVENTS = 100
#: The most characters of text one message holds (its text blocks together): a transcript is
#: read by people and put in prompts, not a place for documents.
MAX_MESSAGE_CHARS = 100_000
#: The most content blocks one message holds.
MAX_MESSAGE_BLOCKS = 100
#: The most characters one event a client sends takes as JSON (compact, unescaped non-ASCII):
#: a message at :data:`MAX_MESSAGE_CHARS` with room to spare, where what is not text (an
#: image's data, an event of another type) was not counted at all: a reader of 100 events
#: (``.sessions/``, ``--resume``) held hundreds of megabytes (review 43 #1).
MAX_EVENT_CHARS = 256 * 1024
#: The most characters the events of one ``events.send`` take as JSON together.
MAX_SEND_CHARS = 1024 * 1024
#: The keys of a message's blocks and of their sources, as the SDK (2.14.0) types a
#: user.message's params: ``type -> (required, optional)``. Anything else is refused.
MESSAGE_BLOCK_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "text": (("text",), ()),
    "redacted": ((), ()),
    "image": (("source",), ()),
    "document": (("source",), ("title", "context")),
}
MESSAGE_SOURCE_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "image": {"base64": ("data", "media_type"), "url": ("url",), "file": ("file_id",)},
    "document": {"base64": ("data", "media_type"), "text": ("data", "media_type"),
                 "url": ("url",), "file": ("file_id",)},
}
#: A session's metadata key naming the session it resumes (``memfs run --resume``,
#: :mod:`memfs.launcher.history`): such a session has marked the other's history.
RESUMED_FROM_KEY = "memfs_resumed_from"
#: Event types a mount records for the session it acts as (SPEC §4).
TOOL_EVENT_TYPES = ("agent.tool_use", "agent.tool_result")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave this field as it is" in update calls (``None`` also means that, per API.md §8.2).
UNSET: Any = _Unset()


# --------------------------------------------------------------------------------------------
# ids and time


def utc_now() -> str:
    """Now, as :func:`~memfs.rules.format_time` writes it (:func:`~memfs.rules.format_us`:
    every write takes it twice)."""
    return format_us(time.time_ns() // 1000)


#: Session tokens (:meth:`Store.sessions.create_token`): the secret's prefix (which tells it
#: from a server key at a glance), and the life a token gets by default and at most, seconds.
SESSION_TOKEN_PREFIX = "memfs_session_"
SESSION_TOKEN_TTL = 24 * 3600.0
SESSION_TOKEN_MIN_TTL = 1
SESSION_TOKEN_MAX_TTL = 30 * 24 * 3600.0


def key_refusal(key_id: str, revoked_at: str | None, expires_at: str | None,
                 now: str) -> str | None:
    """Why the stored key ``key_id`` is refused at ``now`` (revoked, expired); None: it is
    not. The same for a session token minted with that key (:meth:`Store.sessions.grant`)."""
    if revoked_at is not None:
        return f"API key {key_id} was revoked at {revoked_at}"
    if expires_at is not None and expires_at <= now:
        return f"API key {key_id} expired at {expires_at}"
    return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_token_ttl(ttl_seconds: Any) -> float:
    """The life of a new session token: ``ttl_seconds`` (None: the default).

    :raises InvalidRequest: not a number of seconds within the bounds.
    """
    ttl = SESSION_TOKEN_TTL if ttl_seconds is None else ttl_seconds
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not (
            SESSION_TOKEN_MIN_TTL <= ttl <= SESSION_TOKEN_MAX_TTL):
        raise InvalidRequest(f"a session token's life (ttl_seconds, memfs run --token-ttl) "
                             f"must be {SESSION_TOKEN_MIN_TTL} to {SESSION_TOKEN_MAX_TTL:.0f} "
                             "seconds")
    return float(ttl)


def only_ids(where: list[str], params: list[Any], ids: Collection[str] | None) -> None:
    """Restrict a listing to the rows ``ids`` (none at all for an empty collection)."""
    if ids is None:
        return
    if not ids:
        where.append("1 = 0")  # no "IN ()": PostgreSQL refuses it
        return
    where.append(f"id IN ({','.join('?' * len(ids))})")
    params.extend(sorted(ids))


#: The most ids one ``IN (…)`` of a look-up by ids holds (well within SQLite's and
#: PostgreSQL's limits on a statement's parameters); more take a query per so many.
IDS_PER_QUERY = 1000


def id_chunks(ids: Collection[str]) -> list[list[str]]:
    """``ids`` without repeats, sorted, in lists of at most :data:`IDS_PER_QUERY` (none for
    no ids: no "IN ()", which PostgreSQL refuses)."""
    ordered = sorted(set(ids))
    return [ordered[i:i + IDS_PER_QUERY] for i in range(0, len(ordered), IDS_PER_QUERY)]


def only_workspace(where: list[str], params: list[Any], workspace: str | None) -> None:
    """Narrow a listing to the rows of ``workspace`` (None: every workspace's). The workspace
    is also a filter of the listing's cursor, through ``params``."""
    if workspace is not None:
        where.append("workspace_id = ?")
        params.append(workspace)


def no_store(store_id: str) -> NotFound:
    """What a store that does not exist (or that the caller may not see) answers."""
    return _no_store(store_id)


def no_session(session_id: str) -> NotFound:
    """What a session that does not exist (or that the caller may not see) answers."""
    return _no_session(session_id)


def _no_session(session_id: str) -> NotFound:
    return NotFound(f"session {session_id!r} not found")


def _no_store(store_id: str) -> NotFound:
    return NotFound(f"memory store {store_id!r} not found")


def complete_event(session_id: str | None, body: dict[str, Any]) -> Event:
    """An event with its ``id`` and ``processed_at`` filled in when missing."""
    body = dict(body)
    body["id"] = body.get("id") or new_id("sevt")
    body["processed_at"] = body.get("processed_at") or utc_now()
    return Event(body["id"], session_id, body["type"], body["processed_at"], body)


def archived(store_id: str) -> StoreArchived:
    return StoreArchived(f"memory store {store_id} is archived: its memories are read-only")


def sort_key(item: Memory | MemoryPrefix) -> list[Any]:
    """Where the next page starts: ``[path, inclusive]``. A roll-up resumes at the first path
    past everything below it ("/a/" -> "/a0", "0" being the byte after "/")."""
    if isinstance(item, MemoryPrefix):
        return [item.path[:-1] + "0", True]
    return [item.path, False]


def check_tool_events(events: Any, *, text: bool = True) -> None:
    """:raises InvalidRequest: ``events`` is neither a :class:`~memfs.models.ToolPair` nor a
        list of tool events, with their ids.

    :param text: also check that every string is valid UTF-8 text (False: the caller's
        :func:`tool_event_rows` does it as it encodes them).
    """
    if events is None:
        return
    if isinstance(events, ToolPair):
        _check_tool_pair(events, text)
        return
    if not isinstance(events, list):
        raise InvalidRequest("events must be a list")
    for e in events:
        if not isinstance(e, dict) or e.get("type") not in TOOL_EVENT_TYPES:
            kind = e.get("type") if isinstance(e, dict) else e
            raise InvalidRequest(
                f"a mount records only {' and '.join(TOOL_EVENT_TYPES)} events, not {kind!r}"
            )
        if not isinstance(e.get("id"), str) or not e["id"].startswith("sevt_"):
            raise InvalidRequest("every tool event needs its 'sevt_' id")
        if text:
            validate_text(e, "event")
        parse_time(e.get("processed_at") or "")


def _check_tool_pair(p: ToolPair, text: bool) -> None:
    """:func:`check_tool_events` of a pair: the rules of its two events' dicts, and what its
    template takes for granted (strings, an integer pid)."""
    if not (isinstance(p.name, str) and isinstance(p.operation, str)
            and isinstance(p.file_path, str) and isinstance(p.text, str)
            and isinstance(p.processed_at, str) and type(p.pid) is int
            and all(s is None or isinstance(s, str) for s in (
                p.new_path, p.failure, p.memory_id, p.memory_version_id))):
        raise InvalidRequest("a tool pair's fields are text, and its pid an integer")
    if not (isinstance(p.use_id, str) and p.use_id.startswith("sevt_")
            and isinstance(p.result_id, str) and p.result_id.startswith("sevt_")):
        raise InvalidRequest("every tool event needs its 'sevt_' id")
    if text:
        validate_text(p.events(), "event")
    parse_time(p.processed_at)


#: ``json.dumps(body, ensure_ascii=False)`` of a write's tool event, without making an encoder
#: at each call (every close that commits records two).
_event_json = json.JSONEncoder(ensure_ascii=False).encode
#: An events row: id, session_id, store_id, type, processed_at, body.
EventRow = tuple[str, str | None, str, str, str, str]


def tool_event_rows(events: ToolEvents, session_id: str | None,
                    store_id: str) -> list[EventRow]:
    """The rows of a write's tool events (checked by :func:`check_tool_events`, completed by
    :func:`~memfs.models.complete_tool_results`), each body
    ``json.dumps(event, ensure_ascii=False)``: a :class:`~memfs.models.ToolPair` from its
    template (:meth:`~memfs.models.ToolPair.bodies`: every close that commits records one).

    :raises InvalidRequest: a string is not valid UTF-8 text (a lone surrogate), found as the
        body is encoded; said as :func:`~memfs.rules.validate_text` says it.
    """
    if not events:
        return []
    if isinstance(events, ToolPair):
        p, now = events, events.processed_at
        use, result = p.bodies()
        rows: list[EventRow] = [
            (p.use_id, session_id, store_id, "agent.tool_use", now, use),
            (p.result_id, session_id, store_id, "agent.tool_result", now, result)]
        bodies: list[dict[str, Any]] | None = None
    else:
        rows, bodies = [], []
        for body in events:
            e = complete_event(session_id, body)
            rows.append((e.id, session_id, store_id, e.type, e.processed_at,
                         _event_json(e.body)))
            bodies.append(e.body)
    for i, row in enumerate(rows):
        # The UTF-8 check (check_tool_events left it to here): a lone surrogate fails the
        # encode, and the caller's transaction is rolled back.
        try:
            row[5].encode("utf-8")
        except UnicodeEncodeError:
            validate_text((bodies or tool_event_dicts(events) or [])[i], "event")  # says where
            raise
    return rows


def check_sha256_arg(value: Any, what: str) -> None:
    """:raises InvalidRequest: ``value`` is neither None nor 64 lowercase hex digits."""
    if value is not None and (not isinstance(value, str) or not _SHA256_RE.match(value)):
        raise InvalidRequest(f"{what} must be 64 lowercase hex digits")


def check_precondition(row: Row, expected_sha256: str | None) -> None:
    """:raises PreconditionFailed: the memory's content hash is not ``expected_sha256``."""
    if expected_sha256 is not None and expected_sha256 != row["content_sha256"]:
        raise PreconditionFailed(
            f"memory {row['id']} has content_sha256 {row['content_sha256']}, "
            f"not {expected_sha256}"
        )
