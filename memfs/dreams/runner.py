"""Running dreams (API.md §5, issue 13): a model reads a memory store and the transcripts of
some sessions and consolidates the store, through the memory tool, into the output store.

The store keeps the rows (:meth:`memfs.store.Store.dreams.create` and the rest); this module
runs one (:class:`DreamRun`), in the process that serves the API (``memfs serve``) or in
``memfs dream`` on a local database (:mod:`memfs.dreams.dreamer` runs a process's dreams):

- :meth:`Store.dreams.start` makes the output store (``create_new``: a copy of the input) and
  the dream's session (the output attached read_write, the input read_only).
- The model is called through the ``anthropic`` SDK (``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_BASE_URL`` for any compatible endpoint, the dream's model). Its only tool is the
  memory tool (:class:`memfs.tools.MemoryTool`) bound to the OUTPUT store and the dream's
  session: every write is a version of that session, every command a tool event pair of it.
  The input store and the sessions' events are in the first message, as text: the model has
  no way to write the input (with ``create_new``), whatever path it names.
- Between turns, and every :data:`POLL_SECONDS` while a call is in flight, the runner checks
  for a cancel (in this process at once, from another process through the database); a
  cancel closes the HTTP connection of the call in flight, so it stops within a second.
- Usage (tokens) is added after every call; an error fails the dream with its reason, and
  the output store is marked (metadata ``memfs_dream_status``). What the model needs (its
  key: :func:`~memfs.dreams.model.missing_settings`) is checked before the output store and
  session are made, and a dream that fails before the model (or ``-- COMMAND``) ever ran
  leaves no output store: failed tries leave no copies of the input behind.
- A runner says it is alive in the dream's row (``heartbeat_at``). When a process starts
  serving, and every :data:`~memfs.dreams.dreamer.SWEEP_SECONDS` while it runs dreams,
  :meth:`~memfs.dreams.dreamer.Dreamer.recover` fails the dreams whose runner is gone (a dead
  process on this host, or silent for :data:`~memfs.dreams.dreamer.STALE_SECONDS`): a dream
  is never left ``running`` forever.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..models import Dream
from ..store import Store
from .model import MEMORY_BETA, Failed, default_client
from .prompt import SYSTEM, build_prompt

log = logging.getLogger("memfs.dreams")  # the dreams' one logger, whichever module logs

#: How often a running dream checks for a cancel while a model call is in flight.
POLL_SECONDS = 0.1
#: How often it reads its status from the database (a cancel by another process).
DB_POLL_SECONDS = 0.5
#: How often it marks itself alive (silent for :data:`~memfs.dreams.dreamer.STALE_SECONDS`, it
#: counts as dead).
HEARTBEAT_SECONDS = 5.0
#: Model turns before a dream gives up (failed, ``max_turns``), and its time limit.
MAX_TURNS = 100
TIMEOUT_SECONDS = 3600.0
MAX_TOKENS = 8192


class Canceled(Exception):  # noqa: N818 (a signal inside the runner)
    """The dream was canceled (or its process is stopping) while it ran."""


def identity() -> dict[str, Any]:
    """This process, as a dream's ``runner``."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "token": _TOKEN}


_TOKEN = secrets.token_hex(8)


class DreamRun:
    """One dream, run to its end by :meth:`run` (in a thread of its own in a server)."""

    def __init__(self, store: Store, dream_id: str, *,
                 client_factory: Callable[[], Any] | None = None) -> None:
        self.store = store
        self.dream_id = dream_id
        self.stop = threading.Event()
        #: Why :attr:`stop` was set: None for a cancel, else the failure to record.
        self.stop_error: dict[str, str] | None = None
        self.client_factory = client_factory or default_client
        #: The model has answered once (from then on the output store holds its work).
        self.answered = False
        self._last_poll = self._last_beat = time.monotonic()

    def run(self) -> Dream:
        """Start the dream, run the model to its end, record the outcome; never raises for
        what the model or the network do (the dream fails with the reason instead). What the
        model needs (its key) is checked before the dream's store and session are made, and
        a dream that fails before the model ever answered leaves no output store."""
        try:
            client = self.client_factory()
        except Failed as e:
            return self.store.dreams.finish(self.dream_id, "failed", e.error)
        try:
            return self._run(client)
        finally:
            client.close()

    def _run(self, client: Any) -> Dream:
        dream = self.store.dreams.start(self.dream_id, runner=identity())
        if dream is None:  # canceled, or another runner took it
            return self.store.dreams.get(self.dream_id)
        try:
            summary = self._converse(dream, client)
        except Canceled:
            if self.stop_error is not None:
                return self._fail(self.stop_error)
            return self.store.dreams.get(self.dream_id)
        except Failed as e:
            return self._fail(e.error)
        except Exception as e:  # a bug or a database failure: the dream says so
            log.exception("dream %s failed", self.dream_id)
            return self._fail({"type": "internal_error", "message": f"{type(e).__name__}: {e}"})
        log.info("dream %s completed: %s", self.dream_id, summary[:200])
        return self.store.dreams.finish(self.dream_id, "completed")

    def _fail(self, error: dict[str, str]) -> Dream:
        # Before the model's first answer nothing but the copy is in the output store.
        return self.store.dreams.finish(self.dream_id, "failed", error,
                                       discard_output=not self.answered)

    def _check(self) -> None:
        """:raises Canceled: a cancel here, or seen in the database."""
        if self.stop.is_set():
            raise Canceled
        now = time.monotonic()
        if now - self._last_poll >= DB_POLL_SECONDS:
            self._last_poll = now
            beat = now - self._last_beat >= HEARTBEAT_SECONDS
            if beat:
                self._last_beat = now
                status = self.store.dreams.heartbeat(self.dream_id)
            else:
                status = self.store.dreams.get(self.dream_id).status
            if status != "running":
                raise Canceled

    def _converse(self, dream: Dream, client: Any) -> str:
        from anthropic.lib.tools import ToolError

        from ..tools import MemoryTool

        out = dream.output_store_id
        assert out is not None and dream.session_id is not None
        tool = MemoryTool(self.store, out, session_id=dream.session_id)
        start = ("It starts as a copy of the input store shown below; the input store itself "
                 "is never changed." if out != dream.memory_store_id else
                 "It is the input store shown below: your changes rewrite it.")
        prompt = build_prompt(self.store, dream)
        self.store.events.add(dream.session_id, [
            {"type": "user.message", "content": [{"type": "text", "text": prompt}]}])
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        deadline = time.monotonic() + TIMEOUT_SECONDS
        for _turn in range(MAX_TURNS):
            self._check()
            if time.monotonic() > deadline:
                raise Failed("timeout", f"the dream ran longer than {TIMEOUT_SECONDS:.0f} s")
            reply = self._call(client, {
                "model": dream.model["id"], "max_tokens": MAX_TOKENS,
                "system": SYSTEM.format(start=start), "messages": messages,
                "tools": [tool.to_dict()], "betas": [MEMORY_BETA]})
            self.answered = True
            usage = reply.usage
            self.store.dreams.add_usage(self.dream_id, {
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens or 0,
                "cache_read_input_tokens": usage.cache_read_input_tokens or 0})
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            text = "".join(b.get("text", "") for b in content if b["type"] == "text")
            if text:
                self.store.events.add(dream.session_id, [
                    {"type": "agent.message", "content": [{"type": "text", "text": text}]}])
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if reply.stop_reason != "tool_use" or not uses:
                return text
            results = []
            for b in uses:
                self._check()
                if b.get("name") != "memory":
                    result, is_error = f"Unknown tool: {b.get('name')}", True
                else:
                    try:
                        result, is_error = str(tool.call(b["input"])), False
                    except ToolError as e:
                        result, is_error = str(e.content), True
                results.append({"type": "tool_result", "tool_use_id": b["id"],
                                "content": result, "is_error": is_error})
            messages.append({"role": "user", "content": results})
        raise Failed("max_turns", f"the model was still working after {MAX_TURNS} turns")

    def _call(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """One Messages API call, in a thread of its own, so that a cancel can close its
        connection without waiting for the answer."""
        import anthropic

        box: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                box["reply"] = client.beta.messages.create(**kwargs)
            except BaseException as e:  # noqa: BLE001 (handed to the runner's thread)
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=call, name=f"dream-call-{self.dream_id}", daemon=True).start()
        while not done.wait(POLL_SECONDS):
            try:
                self._check()
            except Canceled:
                client.close()  # aborts the request in flight
                raise
        error = box.get("error")
        if error is None:
            return box["reply"]
        if isinstance(error, anthropic.APITimeoutError):
            raise Failed("timeout", f"the Messages API did not answer in time: {error}")
        if isinstance(error, anthropic.APIStatusError):
            raise Failed("model_error",
                          f"the Messages API answered {error.status_code}: {error.message}")
        if isinstance(error, anthropic.APIConnectionError):
            raise Failed("model_unreachable",
                          f"the Messages API at {client.base_url} is unreachable: {error}")
        if isinstance(error, anthropic.AnthropicError):
            raise Failed("model_error", str(error))
        raise error
