"""The Console's browser tests: the key their server runs with, and signing in on a page."""

from __future__ import annotations

from typing import Any

KEY = "sk-memfs-console-test"


def sign_in(pg: Any, key: str = KEY, *, goto: bool = True) -> None:
    if goto:
        pg.goto("/signin")
    pg.get_by_label("API key").fill(key)
    pg.get_by_role("button", name="Sign in").click()


def page_width(pg: Any) -> int:
    """The page's width as styled (``scrollWidth``). The Console's stylesheet is revalidated
    at every page load (``no-cache``): measured before it came, the width is the unstyled
    page's (a sha256 that nothing wraps yet), which no one ever sees, since a browser shows
    nothing until it came. So wait for the page's load first."""
    pg.wait_for_load_state("load")
    return int(pg.evaluate("document.documentElement.scrollWidth"))
