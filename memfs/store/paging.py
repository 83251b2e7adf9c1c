"""Cursors of the store's listings: opaque, tied to their listing's filters."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import xxhash

from ..errors import InvalidCursor
from ..models import Page
from ..rules import SURROGATE_RE
from .common import INT64

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# cursors


def _fingerprint(filters: Any) -> str:
    return xxhash.xxh64_hexdigest(json.dumps(filters, sort_keys=True).encode())


def encode_cursor(kind: str, filters: Any, key: Any) -> str:
    """An opaque cursor: base64url of the listing kind, a fingerprint of its filters and the
    sort key of the last item returned."""
    raw = json.dumps({"k": kind, "f": _fingerprint(filters), "v": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str, filters: Any) -> Any:
    """The sort key of a cursor made by :func:`encode_cursor` for this listing and filters.
    A cursor is client input: the key is only ever JSON of SQLite-safe values (strings of valid
    UTF-8, integers within 64 bits, booleans, lists); each listing checks its exact shape.

    :raises InvalidCursor: anything else, however forged.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        obj = json.loads(raw)
        ok = isinstance(obj, dict) and obj.get("k") == kind and _cursor_safe(obj.get("v"))
    except (binascii.Error, ValueError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise InvalidCursor("invalid page cursor")
    if obj.get("f") != _fingerprint(filters):
        raise InvalidCursor("page cursor does not belong to this listing's filters")
    return obj.get("v")


def after_cursor(page: str, kind: str, filters: list[Any], where: list[str],
                  params: list[Any]) -> None:
    """Continue a newest-first listing (``created_at`` desc, then ``id`` desc) after the
    position in ``page``: its condition appended to ``where`` and ``params``.

    :raises InvalidCursor: not a cursor of this listing with these filters.
    """
    key = decode_cursor(page, kind, filters)
    if not (isinstance(key, list) and len(key) == 2
            and all(isinstance(k, str) for k in key)):  # fmt: skip
        raise InvalidCursor("invalid page cursor")
    where.append("(created_at < ? OR (created_at = ? AND id < ?))")
    params += [key[0], key[0], key[1]]


class _Listed(Protocol):
    """What a newest-first listing pages by (a store, a version, a dream)."""

    @property
    def created_at(self) -> str: ...

    @property
    def id(self) -> str: ...


#: An item of a newest-first listing.
L = TypeVar("L", bound=_Listed)


def newest_first_page(rows: Sequence[Any], limit: int, kind: str, filters: list[Any],
                       make: Callable[[Any], L]) -> Page[L]:
    """The page of ``rows`` (fetched with ``LIMIT limit + 1``) and the cursor to the next."""
    items = [make(r) for r in rows[:limit]]
    next_page = None
    if len(rows) > limit:
        last = items[-1]
        next_page = encode_cursor(kind, filters, [last.created_at, last.id])
    return Page(items, next_page)


def _cursor_safe(key: Any) -> bool:
    """Whether a decoded cursor key holds only values SQLite can bind (see decode_cursor)."""
    if isinstance(key, bool):
        return True
    if isinstance(key, int):
        return key in INT64
    if isinstance(key, str):
        return not SURROGATE_RE.search(key)
    if isinstance(key, list):
        return len(key) <= 2 and all(_cursor_safe(k) for k in key)
    return False
