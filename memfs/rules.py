"""Rules every layer shares: limits, validation of paths, content and strings, ids and time.

Every limit is in :class:`Limits` and every input rule in one function here; the store calls
them on every write (it decides), and the filesystem uses the same path rule to name a new file
before anything is written. Ids are time-ordered (ULID-like, strictly increasing within a
process) and timestamps are RFC 3339 in UTC with microseconds and ``Z``, so both sort
chronologically as strings. Nothing here orders a store's states: that is the change feed's
sequence number.
"""

from __future__ import annotations

import functools
import getpass
import hashlib
import json
import os
import re
import secrets
import threading
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import xxhash

from .errors import (
    ContentTooLarge,
    InvalidContent,
    InvalidPath,
    InvalidRequest,
    PathEncoding,
    PathTooLong,
)
from .models import Actor, SessionPinned

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # ascending ASCII
_B58_PAIRS = [a + b for a in _B58 for b in _B58]
_B58_12 = 58**12
_id_lock = threading.Lock()
_last_id_value = 0


def new_id(prefix: str) -> str:
    """A time-ordered id: ``<prefix>_01`` then 22 base58 digits of a 128-bit value.

    The value is the millisecond clock in the high 48 bits and randomness below (ULID-like),
    made strictly increasing within a process, so ids sort in creation order. The base58
    alphabet is in ASCII order and the width is fixed, so string order is numeric order.
    """
    return new_ids(prefix, 1)[0]


def new_ids(prefix: str, n: int) -> list[str]:
    """``n`` consecutive :func:`new_id` ids from one clock reading and one random draw (the
    tool event flusher makes two per file operation)."""
    global _last_id_value
    with _id_lock:
        value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
        if value <= _last_id_value:
            value = _last_id_value + 1
        _last_id_value = value + n - 1
    first = _id_text(prefix, value)
    if n == 1:
        return [first]
    # value + i differs from value in its last two digits only, unless they wrap.
    low, head = value % 3364, first[:-2]
    return [first] + [head + _B58_PAIRS[low + i] if low + i < 3364 else _id_text(prefix, value + i)
                      for i in range(1, n)]


def _id_text(prefix: str, value: int) -> str:
    # Two digits per division (a 58² table), unrolled: ids are made on every write and
    # every file operation's events, and the loop cost a third of this. The low twelve
    # digits, then the ten above them (the value is below 58²², the id's width).
    p = _B58_PAIRS
    high, low = divmod(value, _B58_12)
    low, a = divmod(low, 3364)
    low, b = divmod(low, 3364)
    low, c = divmod(low, 3364)
    low, d = divmod(low, 3364)
    f, e = divmod(low, 3364)
    high, g = divmod(high, 3364)
    high, h = divmod(high, 3364)
    high, i = divmod(high, 3364)
    k, j = divmod(high, 3364)
    return (f"{prefix}_01{p[k % 3364]}{p[j]}{p[i]}{p[h]}{p[g]}"
            f"{p[f]}{p[e]}{p[d]}{p[c]}{p[b]}{p[a]}")


def format_time(dt: datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``; these strings sort chronologically (the
    year always in four digits: ``%Y`` gives ``999`` for the year 999, which sorts last)."""
    u = dt.astimezone(UTC)
    if u.year >= 1000:
        return u.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{u.year:04d}-" + u.strftime("%m-%dT%H:%M:%S.%fZ")


def format_us(us: int) -> str:
    """:func:`format_time` of a time in microseconds since the epoch (the second's text made
    once and kept: every write formats its time, and its change's, and the tool events of a
    mount, mostly within the same second or two). Outside the years 1000-9999, where
    ``strftime`` would not write four digits, :func:`format_time` itself (which raises
    OverflowError past 9999)."""
    if not FORMAT_US_MIN <= us < FORMAT_US_END:
        return format_time(datetime.fromtimestamp(0, UTC) + timedelta(microseconds=us))
    sec, frac = divmod(us, 1_000_000)
    return f"{_second_text(sec)}.{frac:06d}Z"


@functools.lru_cache(maxsize=16)
def _second_text(sec: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))


#: The first microsecond :func:`format_us` formats itself (0:00 on 1 January 1000, UTC), and
#: the first past its range (the year 10000).
FORMAT_US_MIN = (datetime(1000, 1, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) \
    // timedelta(microseconds=1)
FORMAT_US_END = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
                 - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) + 1


def format_ago(us: int, ago: timedelta) -> str:
    """:func:`format_time` of ``ago`` before ``us`` (microseconds since the epoch): as
    ``format_time(t - ago)`` of the datetime ``t`` of ``us``, and as fast as
    :func:`format_us` when that is after the year 1000 (the cutoff of a retention prune,
    at every write)."""
    then = us - ago // timedelta(microseconds=1)
    if then >= FORMAT_US_MIN:
        return format_us(then)
    return format_time(datetime.fromtimestamp(0, UTC) + timedelta(microseconds=us) - ago)


def parse_time(value: str | datetime) -> datetime:
    """Parse RFC 3339 (``Z``, offsets, fractions); a value without an offset is UTC.

    :raises InvalidRequest: on anything else.
    """
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(value.strip().replace("z", "Z"))
        except (ValueError, AttributeError):
            raise InvalidRequest(f"invalid timestamp {value!r}: expected RFC 3339") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt


def api_key_id(key: str) -> str:
    """The stable, non-secret id of an API key: ``apikey_`` + 24 hex digits of its SHA-256
    (what the API records as ``api_actor``, and what the Console derives its user ids from)."""
    return "apikey_" + hashlib.sha256(key.encode()).hexdigest()[:24]


#: The integers a client may send (query parameters, headers, cookies): what a signed 64-bit
#: column holds on both backends.
MAX_INT = 2**63 - 1
_INT_RE = re.compile(r"-?[0-9]{1,19}")


_WORKSPACE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def validate_workspace(workspace: Any) -> str:
    """A workspace id: 1 to 64 of lowercase letters, digits, ``-`` and ``_``, starting with
    a letter or digit (``team-a``). :raises InvalidRequest:"""
    if not isinstance(workspace, str) or not _WORKSPACE_RE.fullmatch(workspace):
        raise InvalidRequest(
            f"invalid workspace {workspace!r}: 1 to 64 lowercase letters, digits, '-' and "
            "'_', starting with a letter or digit")
    return workspace


_DURATION_RE = re.compile(r"([0-9]{1,9})([smhdw]?)")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The longest a key may be made to live for (ten years).
MAX_DURATION = 10 * 365 * 86400


def parse_duration(value: Any) -> int:
    """Seconds, from a number of seconds or a text such as ``90s``, ``15m``, ``12h``, ``30d``
    or ``2w``: at least 1, at most :data:`MAX_DURATION`. :raises InvalidRequest:"""
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and (m := _DURATION_RE.fullmatch(value.strip())):
        seconds = int(m.group(1)) * _DURATION_UNITS[m.group(2)]
    else:
        raise InvalidRequest(f"invalid duration {value!r}: seconds, or a number with s, m, "
                             "h, d or w (30d)")
    if not 1 <= seconds <= MAX_DURATION:
        raise InvalidRequest(f"a duration is 1 second to 10 years (not {value!r})")
    return seconds


def parse_int(text: str) -> int | None:
    """An integer as a client writes one: ASCII digits, a leading ``-`` allowed, within
    ``±``:data:`MAX_INT`; None for anything else. ``int()`` alone takes far more: Unicode
    digits (``'١٢'`` is 12), ``_`` separators and spaces, and raises ValueError past 4,300
    digits, while ``str.isdigit()`` is true for ``'²'``, which ``int()`` refuses."""
    if not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if -MAX_INT <= value <= MAX_INT else None


def local_user_actor() -> Actor:
    """The ``user_actor`` for the person running the CLI on the local database: a stable id
    derived from the login name."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = str(os.getuid())
    return Actor.user("user_" + xxhash.xxh64_hexdigest(login.encode()))



#: The code points a path may not hold (API.md §2.16): the control characters (Cc), the
#: format characters (Cf, Unicode 14.0's, as this Python's unicodedata has them:
#: tests/unit/api/test_openapi_constraints.py checks it) and the line and paragraph
#: separators. One table for :func:`validate_path` and the OpenAPI document's path pattern.
_PATH_FORBIDDEN = (
    (0x00, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
    (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
    (0x2028, 0x2029), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_PATH_FORBIDDEN_CLASS = "".join(
    chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in _PATH_FORBIDDEN)
_PATH_FORBIDDEN_RE = re.compile(f"[{_PATH_FORBIDDEN_CLASS}]")


def path_pattern(limits: Limits | None = None) -> str:
    """The regular expression of a valid path, for the OpenAPI document: ``/`` then 1 to
    ``max_path_segments`` segments, none empty, ``.`` or ``..``, no character of
    :data:`_PATH_FORBIDDEN`. What it cannot say (at most ``max_path_bytes`` bytes of UTF-8,
    NFC) the parameter's description does."""
    limits = limits or Limits()
    bad = _PATH_FORBIDDEN_CLASS
    # No look-ahead (not every generator of examples has it): a segment starts with a
    # character other than '.', or is '.' or '..' followed by more.
    seg = f"(?:[^/.{bad}][^/{bad}]*|\\.[^/.{bad}][^/{bad}]*|\\.\\.[^/{bad}]+)"
    return f"^(?:/{seg}){{1,{limits.max_path_segments}}}$"


#: A content hash as the API takes one (``expected_content_sha256``, a precondition's).
SHA256_PATTERN = "^[0-9a-f]{64}$"
#: A name: no control character (:func:`validate_name`).
NAME_PATTERN = "^[^\x00-\x1f\x7f-\x9f]*$"
_NAME_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
#: The most items of one page of a session's events or resources, and of a store's change
#: feed (whose ``limit`` may be 0: its position only).
MAX_EVENTS_PAGE = 1000
#: The events shown before and after one event (``events.around``) by default and at most.
DEFAULT_AROUND_CONTEXT = 5
MAX_AROUND_CONTEXT = 100
MAX_CHANGES_PAGE = 1000
#: A search: the longest question (characters), the default and the most hits.
MAX_QUERY_CHARS = 1000
SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 10, 100
#: A search's default threshold: hits of a lower relevance (0 to 1) are left out, so that an
#: empty answer can mean "nothing stored answers this" (issue 39).
SEARCH_DEFAULT_THRESHOLD = 0.7
#: The store metadata key that says whose sessions a mount's ``.sessions/`` shows
#: (:mod:`memfs.fuse.sessionlog`): ``session`` (the default: a session sees its own only) or
#: ``workspace`` (every session that had the store attached).
SESSIONS_VISIBILITY_KEY = "memfs_sessions_visibility"
SESSIONS_VISIBILITIES = ("session", "workspace")


def sessions_visibility(metadata: Mapping[str, str]) -> str:
    """Whose sessions a mount acting as a session shows in ``.sessions/``: the store's
    :data:`SESSIONS_VISIBILITY_KEY`, else (or when it means nothing) ``session``."""
    value = metadata.get(SESSIONS_VISIBILITY_KEY)
    return value if value in SESSIONS_VISIBILITIES else "session"


#: A search's question (at least one word, no NUL) and its path_prefix (a path's start).
SEARCH_PATTERN = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"
SEARCH_PREFIX_PATTERN = "^/[^\\x00]*$"

#: A UTF-16 surrogate code point: never valid alone in UTF-8 (JSON's ``"\ud800"`` makes one).
SURROGATE_RE = re.compile("[\ud800-\udfff]")
_VIEWS = ("basic", "full")


@dataclass(frozen=True)
class Limits:
    """Every limit in one place (SPEC §1), configurable for tests."""

    max_memories: int = 2000
    max_content_bytes: int = 102_400
    max_path_bytes: int = 1024
    max_path_segments: int = 20
    max_session_stores: int = 8
    max_instructions_chars: int = 4096
    max_name_chars: int = 255
    max_description_chars: int = 1024
    max_metadata_pairs: int = 16
    max_metadata_key_chars: int = 64
    max_metadata_value_chars: int = 512
    max_page_size: int = 100
    max_full_page_size: int = 20
    retention_days: float = 30.0
    retention_keep: int = 10
    #: Versions one import may hold (an archive's history; SPEC §7): 100 times a full
    #: store's retained versions would be 2,000 memories x 100.
    max_import_versions: int = 200_000

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Limits:
        """Defaults, with ``MEMFS_MAX_MEMORIES``, ``MEMFS_RETENTION_DAYS`` and
        ``MEMFS_RETENTION_KEEP`` overriding them (tests use a small memory limit)."""
        env = os.environ if environ is None else environ
        kw: dict[str, Any] = {}
        if "MEMFS_MAX_MEMORIES" in env:
            kw["max_memories"] = int(env["MEMFS_MAX_MEMORIES"])
        if "MEMFS_RETENTION_DAYS" in env:
            kw["retention_days"] = float(env["MEMFS_RETENTION_DAYS"])
        if "MEMFS_RETENTION_KEEP" in env:
            kw["retention_keep"] = int(env["MEMFS_RETENTION_KEEP"])
        return cls(**kw)


# --------------------------------------------------------------------------------------------
# validation (API.md §2.16, §7.1)


def slash_hint(path: str) -> str:
    """The hint for a memory path typed without its leading ``/`` (``hello.md``): the path
    rule's message, and the CLI's when such a ref names no memory."""
    return f"paths start with '/': did you mean /{path}?"


def validate_path(path: object, limits: Limits = Limits()) -> str:
    """Check a memory path against every rule of API.md §2.16 and return it as ``str``.

    Bytes (as the filesystem passes them) must be valid UTF-8; anything else but a ``str``
    (a value read from a request or an archive) is refused.

    :raises PathEncoding: not valid UTF-8 (or lone surrogates), or not NFC.
    :raises PathTooLong: over the byte or segment limit.
    :raises InvalidPath: any other rule.
    """
    if isinstance(path, bytes):
        try:
            path = path.decode("utf-8")
        except UnicodeDecodeError:
            raise PathEncoding("path is not valid UTF-8") from None
    if not isinstance(path, str):
        raise InvalidPath("path must be a string")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise PathEncoding("path contains lone surrogates (not valid UTF-8)") from None
    if not path.startswith("/"):
        if not path:
            raise InvalidPath("path must start with '/': ''")
        raise InvalidPath(f"path {path!r}: {slash_hint(path)}")
    if len(encoded) > limits.max_path_bytes:
        raise PathTooLong(
            f"path is {len(encoded)} bytes long; the limit is {limits.max_path_bytes} bytes"
        )
    segments = path[1:].split("/")
    if len(segments) > limits.max_path_segments:
        raise PathTooLong(
            f"path has {len(segments)} segments; the limit is {limits.max_path_segments}"
        )
    for seg in segments:
        if seg == "":
            raise InvalidPath(f"path has an empty segment (no '//' or trailing '/'): {path!r}")
        if seg in (".", ".."):
            raise InvalidPath(f"path has a '{seg}' segment: {path!r}")
    bad = _PATH_FORBIDDEN_RE.search(path)
    if bad is not None:
        raise InvalidPath(
            f"path contains the control or format character U+{ord(bad.group()):04X}")
    if not unicodedata.is_normalized("NFC", path):
        raise PathEncoding(f"path is not in Unicode NFC: {path!r}")
    return path


def validate_prefix(prefix: str, limits: Limits = Limits()) -> str:
    """A ``path_prefix``: ``/`` or a valid path followed by ``/``."""
    if not isinstance(prefix, str):
        raise InvalidPath("path_prefix must be a string")
    if prefix == "/":
        return prefix
    if not prefix.endswith("/"):
        raise InvalidPath(f"path_prefix must end with '/': {prefix!r}")
    validate_path(prefix[:-1], limits)
    return prefix


def encode_content(content: str | bytes | None, limits: Limits = Limits()) -> tuple[str, bytes]:
    """Check memory content and return it as ``(text, utf8_bytes)``; ``None`` is ``""``.

    :raises InvalidContent: bytes that are not UTF-8, or a string with lone surrogates.
    :raises ContentTooLarge: over ``limits.max_content_bytes``.
    """
    if content is None:
        content = ""
    if isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        if len(data) > limits.max_content_bytes:
            raise ContentTooLarge(too_large(len(data), limits))
        try:
            return data.decode("utf-8"), data
        except UnicodeDecodeError as e:
            raise InvalidContent(f"content is not valid UTF-8 (byte {e.start})") from None
    if not isinstance(content, str):
        raise InvalidContent("content must be a string")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidContent("content contains lone surrogates (not valid UTF-8)") from None
    if len(data) > limits.max_content_bytes:
        raise ContentTooLarge(too_large(len(data), limits))
    return content, data


def too_large(size: int, limits: Limits) -> str:
    return f"content is {size} bytes; the limit is {limits.max_content_bytes} bytes"


def validate_text(value: Any, what: str) -> Any:
    """Refuse any string in ``value`` that is not valid UTF-8 text, i.e. holds a lone surrogate
    (JSON's ``"\\ud800"`` escape, or a CLI argument of undecodable bytes): SQLite and every
    JSON response would fail on it later, for every reader. ``value`` is a string or JSON data
    (objects' keys and values, lists), walked to any depth; it is returned unchanged.

    :raises InvalidRequest: naming where the string is (``what``, then keys and indexes).
    """
    try:
        # One pass in C for the common case (every mount's tool event comes through here):
        # UTF-8 encoding fails on a lone surrogate, anywhere in keys or values.
        json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass  # find where it is, to say so
    stack: list[tuple[Any, str]] = [(value, what)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if SURROGATE_RE.search(item):
                raise InvalidRequest(
                    f"{where} is not valid UTF-8 text (it holds a lone surrogate)"
                )
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and SURROGATE_RE.search(k):
                    raise InvalidRequest(
                        f"a key of {where} is not valid UTF-8 text (it holds a lone surrogate)"
                    )
                stack.append((v, f"{where}.{k}"))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return value


def validate_name(name: Any, limits: Limits) -> str:
    if not isinstance(name, str):
        raise InvalidRequest("name must be a string")
    validate_text(name, "name")
    if not 1 <= len(name) <= limits.max_name_chars:
        raise InvalidRequest(f"name must be 1 to {limits.max_name_chars} characters")
    if _NAME_CONTROL_RE.search(name):
        raise InvalidRequest("name must not contain control characters")
    return name


def validate_description(description: Any, limits: Limits) -> str:
    if not isinstance(description, str):
        raise InvalidRequest("description must be a string")
    validate_text(description, "description")
    if len(description) > limits.max_description_chars:
        raise InvalidRequest(
            f"description must be at most {limits.max_description_chars} characters"
        )
    return description


def validate_metadata(metadata: Any, limits: Limits, what: str = "metadata") -> dict[str, str]:
    if not isinstance(metadata, dict):
        raise InvalidRequest(f"{what} must be an object of strings")
    if len(metadata) > limits.max_metadata_pairs:
        raise InvalidRequest(f"{what} may hold at most {limits.max_metadata_pairs} pairs")
    for k, v in metadata.items():
        if not isinstance(k, str) or not 1 <= len(k) <= limits.max_metadata_key_chars:
            raise InvalidRequest(
                f"{what} keys must be 1 to {limits.max_metadata_key_chars} characters"
            )
        if not isinstance(v, str) or len(v) > limits.max_metadata_value_chars:
            raise InvalidRequest(
                f"{what} values must be strings of at most "
                f"{limits.max_metadata_value_chars} characters"
            )
    validate_text(metadata, what)
    return dict(metadata)


#: A session resource's ``memfs_scope`` (SPEC §8), the first the default.
SCOPES = ("general", "workflow")


def validate_session_resource(
    resource: Any, limits: Limits
) -> tuple[str, str, str | None, str]:
    """One entry of a session's ``resources`` (API.md §4.2), without looking its store up:
    ``{"type": "memory_store", "memory_store_id", "access"?, "instructions"?,
    "memfs_scope"?}`` (``memfs_scope``, a memfs extension: general or workflow).

    :returns: ``(memory_store_id, access, instructions, scope)``, access defaulting to
        read_write and scope to general.
    :raises InvalidRequest:
    """
    if not isinstance(resource, dict) or resource.get("type") != "memory_store":
        raise InvalidRequest("only resources of type 'memory_store' are supported")
    store_id = resource.get("memory_store_id")
    if not isinstance(store_id, str) or not store_id:
        raise InvalidRequest("memory_store_id is required on every memory_store resource")
    access = resource.get("access") or "read_write"
    if access not in ("read_write", "read_only"):
        raise InvalidRequest("access must be 'read_write' or 'read_only'")
    instructions = resource.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("instructions must be a string")
    if instructions is not None and len(instructions) > limits.max_instructions_chars:
        raise InvalidRequest(
            f"instructions are {len(instructions)} characters; the limit is "
            f"{limits.max_instructions_chars}"
        )
    scope = resource.get("memfs_scope") or SCOPES[0]
    if scope not in SCOPES:
        raise InvalidRequest("memfs_scope must be 'general' or 'workflow'")
    return store_id, access, instructions, scope


def patch_metadata(
    current: dict[str, str], patch: Any, limits: Limits, what: str = "metadata"
) -> dict[str, str]:
    """Apply a metadata patch (a ``None`` value removes the key); limits apply to the result."""
    if not isinstance(patch, dict):
        raise InvalidRequest(f"{what} must be an object")
    result = dict(current)
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = v
    return validate_metadata(result, limits, what)


def dict_list(value: Any, what: str) -> list[dict[str, Any]]:
    """``None`` -> ``[]``; else a list of objects. :raises InvalidRequest:"""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidRequest(f"{what} must be a list of objects")
    return list(value)


def slugify(name: str) -> str:
    """The mount directory name of a store name (API.md §4.3): lowercase, every run of
    characters other than ASCII letters and digits one hyphen, hyphens trimmed. May be ``""``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def check_limit(
    limit: object, limits: Limits, view: str = "basic", maximum: int | None = None
) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidRequest("limit must be an integer")
    top = limits.max_page_size if maximum is None else maximum
    if not 1 <= limit <= top:
        raise InvalidRequest(f"limit must be between 1 and {top}")
    if view == "full":
        limit = min(limit, limits.max_full_page_size)
    return limit


def check_view(view: Any) -> str:
    if view not in _VIEWS:
        raise InvalidRequest("view must be 'basic' or 'full'")
    return str(view)


# --------------------------------------------------------------------------------------------
# pinned memories (SPEC §9)

#: The characters of pinned memories one attachment may put in a session's prompt by default
#: (``--store NAME:pinned=N``, a spec's ``pinned_budget``, a resource's
#: ``memfs_pinned_budget``), and those of all its attachments together.
PINNED_BUDGET = 4_000
SESSION_PINNED_BUDGET = 16_000
#: The store metadata key naming the directory whose memories are all pinned (``off``: only
#: those whose front matter says ``pinned: true``), and its default.
PINNED_PREFIX_KEY = "memfs_pinned_prefix"
DEFAULT_PINNED_PREFIX = "/pinned/"
#: At most this many pinned memories of a store are considered (the most important first);
#: how many more the store has is recorded and said, as a count.
MOST_PINNED = 100
#: The pinned block lists this many of the memories it does not show, then how many more.
PINNED_LISTED = 10
#: A path longer than this is shown cut (its start, "…", its end) in the pinned block.
PINNED_PATH_SHOWN = 120
#: What a shown memory's heading and fences add to its text and its path in the block
#: (:mod:`memfs.launcher.pinned`: six line breaks, "#### ", two fences of three backticks).
PINNED_FRAME = 17
#: A memory's importance when it says none (the ranking's too: memfs.recall.search).
PINNED_IMPORTANCE = 0.5


@dataclass(frozen=True)
class PinnedCandidate:
    """A pinned memory of a store: its current version, the length of its text in characters,
    and what orders it (importance, then the time of its last change)."""

    path: str
    memory_id: str
    version_id: str
    size: int
    importance: float | None = None
    updated_at: str = ""


def pinned_prefix(metadata: dict[str, str]) -> str | None:
    """The directory whose memories are pinned, from a store's ``metadata``
    (:data:`PINNED_PREFIX_KEY`), framed by ``/`` (``notes`` is ``/notes/``); None: ``off``."""
    value = metadata.get(PINNED_PREFIX_KEY, DEFAULT_PINNED_PREFIX).strip()
    if value.lower() == "off":
        return None
    inner = value.strip("/")
    return f"/{inner}/" if inner else "/"


def pinned_order(found: list[PinnedCandidate]) -> list[PinnedCandidate]:
    """``found`` most important first, then newest (then by path), at most :data:`MOST_PINNED`."""
    newest = sorted(found, key=lambda c: (c.updated_at, c.path), reverse=True)
    newest.sort(key=lambda c: -(PINNED_IMPORTANCE if c.importance is None else c.importance))
    return newest[:MOST_PINNED]


def pinned_path(path: str) -> str:
    """``path`` as the pinned block shows it (a heading, a line of the list of those not
    shown): inline code that nothing in the path ends (a run of backticks longer than any in
    it, spaced from one at an edge), with each control or line-breaking character escaped
    (``\\u001b``): a path is as free as a memory's text, whoever could write the store chose
    it, so it must stay data as the fenced texts do (SPEC §9). A path longer than
    :data:`PINNED_PATH_SHOWN` is cut: the block stays within its budgets."""
    shown = "".join(f"\\u{ord(ch):04x}" if unicodedata.category(ch) in _BREAKING else ch
                    for ch in path)
    if len(shown) > PINNED_PATH_SHOWN:
        head = PINNED_PATH_SHOWN * 2 // 3
        shown = shown[:head] + "…" + shown[head + 1 - PINNED_PATH_SHOWN:]
    tick = "`" * (1 + max((len(m) for m in re.findall(r"`+", shown)), default=0))
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{tick}{pad}{shown}{pad}{tick}"


#: The categories of the characters :func:`pinned_path` escapes: controls, line and
#: paragraph separators, and the invisible formats (bidirectional overrides).
_BREAKING = frozenset({"Cc", "Zl", "Zp", "Cf"})


def pinned_cost(path: str, size: int) -> int:
    """What a memory of ``size`` characters at ``path`` costs of the budgets when shown: its
    text, and its heading and fences, which are in the prompt too (a fence longer than three
    backticks only around a text that holds backticks, as many as it adds)."""
    return size + len(pinned_path(path)) + PINNED_FRAME


def fit_pinned(candidates: list[PinnedCandidate], budget: int, left: int,
               session_budget: int = SESSION_PINNED_BUDGET,
               ) -> tuple[list[SessionPinned], int]:
    """Which of ``candidates`` (in order) go in whole within the attachment's ``budget`` and
    what is ``left`` of the session's: each memory whole or not at all; one that does not fit
    says which budget it is over, and the next ones are still tried. A memory costs its text
    and its heading (:func:`pinned_cost`).

    :returns: each as a :class:`~memfs.models.SessionPinned`, and what is left of the
        session's budget.
    """
    out: list[SessionPinned] = []
    room = budget
    for c in candidates:
        reason = None
        cost = pinned_cost(c.path, c.size)
        if cost > room:
            reason = f"over this store's budget of {budget:,} characters"
        elif cost > left:
            reason = f"over the session's budget of {session_budget:,} characters"
        else:
            room -= cost
            left -= cost
        out.append(SessionPinned(path=c.path, memory_id=c.memory_id,
                                 memory_version_id=c.version_id, size=c.size,
                                 shown=reason is None, reason=reason))
    return out, left


def validate_pinned_budget(resource: dict[str, Any]) -> int:
    """A session resource's ``memfs_pinned_budget`` (default :data:`PINNED_BUDGET`): whole
    characters, from 0 (none shown, all listed) to the session's budget.

    :raises InvalidRequest:
    """
    value = resource.get("memfs_pinned_budget")
    if value is None:
        return PINNED_BUDGET
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 0 <= value <= SESSION_PINNED_BUDGET:
        raise InvalidRequest(
            "memfs_pinned_budget must be a whole number of characters from 0 to "
            f"{SESSION_PINNED_BUDGET:,} (the session's budget of pinned memories)")
    return value


def is_pinned(path: str, pinned: bool, expires_at: str | None, prefix: str | None,
              now: str) -> bool:
    """Is the memory at ``path`` pinned (its front matter's ``pinned: true``, or under the
    store's ``prefix``) and not expired at ``now`` (SPEC §8: an expired memory leaves the
    prompt at once)? Times are RFC 3339 UTC strings, which sort by time."""
    if expires_at is not None and expires_at <= now:
        return False
    return pinned or (prefix is not None and path.startswith(prefix))
