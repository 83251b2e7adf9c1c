"""The model a dream calls: the Messages API through the ``anthropic`` SDK
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL`` for any compatible endpoint), what a process
needs to call it, and the failure a dream records."""

from __future__ import annotations

import os
from typing import Any

#: The memory tool's beta (the Messages API refuses the tool without it).
MEMORY_BETA = "context-management-2025-06-27"


class Failed(Exception):
    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.error = {"type": type_, "message": message}


def missing_settings() -> list[str]:
    """The environment variables the process running a dream lacks to call its model
    (:func:`default_client`): empty when it has what it needs."""
    return [] if os.environ.get("ANTHROPIC_API_KEY") else ["ANTHROPIC_API_KEY"]


def local_problem() -> str | None:
    """Why ``memfs dream`` cannot run a dream on a local database, or None. The dream runs in
    that command, so the command's own environment is the one that counts (on a server, the
    server's: :func:`default_client` says so)."""
    missing = missing_settings()
    if not missing:
        return None
    name = missing[0]
    return (f"{name} is not set in this shell, and a dream on a local database calls the model "
            f"from this command: export {name}=... here (ANTHROPIC_BASE_URL for another "
            "endpoint), or consolidate with an agent program: memfs dream STORE -s ID -- COMMAND")


def default_client() -> Any:
    """The SDK client a dream uses: ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` from
    the environment of the process running it.

    :raises Failed: no API key.
    """
    import anthropic

    missing = missing_settings()
    if missing:
        raise Failed("configuration_error",
                      f"{missing[0]} is not set where the dream runs (the memfs server's "
                      "environment)")
    return anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"],
                               base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
                               max_retries=2)
