"""The Console's browser tests: the key their server runs with, signing in on a page, a store
made through the SDK, and the dialogs a page opens."""

from __future__ import annotations

import uuid
from typing import Any

import anthropic

Sdk = anthropic.Anthropic

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


def new_store(sdk: Sdk, name: str, memories: dict[str, str]) -> str:
    """A store with a unique name (``name`` first) holding ``memories`` (path -> content)."""
    sid = sdk.beta.memory_stores.create(name=f"{name} {uuid.uuid4().hex[:6]}").id
    for path, content in memories.items():
        sdk.beta.memory_stores.memories.create(sid, path=path, content=content)
    return sid


def no_dialogs(pg: Any) -> list[str]:
    """Every dialog (alert, confirm) the page opens, dismissed; a test asserts it stays empty."""
    opened: list[str] = []

    def on_dialog(d: Any) -> None:
        opened.append(f"{d.type}: {d.message}")
        d.dismiss()

    pg.on("dialog", on_dialog)
    return opened
