"""The Console's browser tests: the key their server runs with, and signing in on a page."""

from __future__ import annotations

from typing import Any

KEY = "sk-memfs-console-test"


def sign_in(pg: Any, key: str = KEY, *, goto: bool = True) -> None:
    if goto:
        pg.goto("/signin")
    pg.get_by_label("API key").fill(key)
    pg.get_by_role("button", name="Sign in").click()
