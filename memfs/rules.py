"""Rules shared by every layer that are not a store's: ids and timestamps.

Ids are time-ordered (ULID-like, strictly increasing within a process) and timestamps are
RFC 3339 in UTC with microseconds and ``Z``, so both sort chronologically as strings. Nothing
here orders a store's states: that is the change feed's sequence number.
"""

from __future__ import annotations

import getpass
import os
import secrets
import threading
import time
from datetime import UTC, datetime

import xxhash

from .errors import InvalidRequest
from .models import Actor

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # ascending ASCII
_B58_PAIRS = [a + b for a in _B58 for b in _B58]
_id_lock = threading.Lock()
_last_id_value = 0


def new_id(prefix: str) -> str:
    """A time-ordered id: ``<prefix>_01`` then 22 base58 digits of a 128-bit value.

    The value is the millisecond clock in the high 48 bits and randomness below (ULID-like),
    made strictly increasing within a process, so ids sort in creation order. The base58
    alphabet is in ASCII order and the width is fixed, so string order is numeric order.
    """
    global _last_id_value
    with _id_lock:
        value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
        if value <= _last_id_value:
            value = _last_id_value + 1
        _last_id_value = value
    # Two digits per division (a 58² table): ids are made on every file operation's events.
    pairs = []
    for _ in range(11):
        value, r = divmod(value, 3364)
        pairs.append(_B58_PAIRS[r])
    return f"{prefix}_01{''.join(reversed(pairs))}"


def format_time(dt: datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``; these strings sort chronologically."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def local_user_actor() -> Actor:
    """The ``user_actor`` for the person running the CLI on the local database: a stable id
    derived from the login name."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = str(os.getuid())
    return Actor.user("user_" + xxhash.xxh64_hexdigest(login.encode()))

