"""The filters of the Console's templates that every page may use: a memory's Markdown as
safe HTML, a time, who made a version (the pages' own, ``size``, ``marked``..., are registered
by :func:`memfs.console.create_console`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from ..store.typed import EXPIRY_ACTOR

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def render_markdown(text: str | None) -> Markup:
    """Markdown as HTML. Raw HTML in a memory is shown as text, never run (an agent's memory is
    untrusted input), and links with unsafe schemes are not made links (markdown-it's
    ``validateLink``)."""
    return Markup(_MARKDOWN.render(text or ""))


def when(timestamp: str | None) -> Markup:
    """An RFC 3339 time as ``<time>``, readable (UTC, to the second), exact in its title."""
    if not timestamp:
        return Markup("")
    try:
        shown = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        shown = timestamp
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(timestamp, shown)


def actor_label(actor: Any, names: dict[str, str] | None = None) -> Markup:
    """Who made a version: a session links to its timeline; an API key or a Console user
    with the name of the key (``names``, by actor id: :meth:`Console.key_names`)."""
    if actor is None:
        return Markup("unknown")
    d = actor.to_dict() if hasattr(actor, "to_dict") else dict(actor)
    kind = d.get("type", "")
    if kind == "session_actor":
        sid = d.get("session_id", "")
        return Markup('session <a href="/sessions/{0}"><code>{0}</code></a>').format(sid)
    if kind == "service_account_actor" and d.get("service_account_id") == EXPIRY_ACTOR.id:
        return Markup('<span title="a memory that expired, deleted by memfs\'s expiry sweep: '
                      'restore it from its history">the expiry sweep</span> <code>{}</code>'
                      ).format(EXPIRY_ACTOR.id)
    labels = {"api_actor": ("API key", "api_key_id"), "user_actor": ("user", "user_id"),
              "service_account_actor": ("service account", "service_account_id")}
    label, field = labels.get(kind, (kind, "id"))
    shown = Markup("{} <code>{}</code>").format(label, d.get(field, ""))
    name = (names or {}).get(str(d.get(field, "")))
    if name is None:
        return shown
    if kind == "api_actor":
        return Markup('API key <strong class="key-name">{}</strong> <code>{}</code>').format(
            name, d.get(field, ""))
    return Markup('{} <span class="muted">(key <strong class="key-name">{}</strong>)'
                  "</span>").format(shown, name)
