"""What the store's tests (tests/unit/store) share: the actors they write as, a listing followed
to its end, a session's resource as the store takes it, and the shape of the times it gives."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memfs import Actor

API = Actor.api("apikey_test")
USER = Actor.user("user_alice")
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def all_pages(fetch: Callable[..., Any], **kw: Any) -> tuple[list[Any], int]:
    """Follow next_page to the end; returns (items, number of pages)."""
    items, pages, page = [], 0, None
    while True:
        p = fetch(page=page, **kw)
        pages += 1
        items.extend(p.data)
        if p.next_page is None:
            return items, pages
        assert p.data, "a page with a next_page must not be empty"
        page = p.next_page
        assert pages < 10_000


def res(store_id: str, **kw: Any) -> dict[str, Any]:
    """A session's resource: the store ``store_id``, with ``kw`` (access, instructions)."""
    return {"type": "memory_store", "memory_store_id": store_id, **kw}
