"""Running dreams (API.md §5, issue 13): a model reads a memory store and the transcripts of
some sessions and consolidates the store, through the memory tool, into the output store.

The store keeps the rows (:meth:`memfs.store.Store.create_dream` and the rest); this module
runs them, in the process that serves the API (``memfs serve``) or in ``memfs dream`` on a
local database:

- :meth:`Store.start_dream` makes the output store (``create_new``: a copy of the input) and
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
  key: :func:`missing_settings`) is checked before the output store and session are made,
  and a dream that fails before the model (or ``-- COMMAND``) ever ran leaves no output
  store: failed tries leave no copies of the input behind.
- A runner says it is alive in the dream's row (``heartbeat_at``). When a process starts
  serving, and every :data:`SWEEP_SECONDS` while it runs dreams, :meth:`Dreamer.recover`
  fails the dreams whose runner is gone (a dead process on this host, or silent for
  :data:`STALE_SECONDS`): a dream is never left ``running`` forever.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..errors import MemfsError
from ..models import Dream
from ..store import Store

log = logging.getLogger("memfs.dreams")  # the dreams' one logger, whichever module logs

#: How often a running dream checks for a cancel while a model call is in flight.
POLL_SECONDS = 0.1
#: How often it reads its status from the database (a cancel by another process).
DB_POLL_SECONDS = 0.5
#: How often it marks itself alive, and after how long without a mark it counts as dead.
HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 60.0
#: How often a process running dreams looks for dreams whose runner died.
SWEEP_SECONDS = 15.0
#: Model turns before a dream gives up (failed, ``max_turns``), and its time limit.
MAX_TURNS = 100
TIMEOUT_SECONDS = 3600.0
MAX_TOKENS = 8192
#: How much of the input store and of the transcripts the first message holds (characters);
#: the rest of the store the model reads through the tool (the output starts as its copy).
STORE_CHARS = 120_000
TRANSCRIPT_CHARS = 120_000
EVENT_CHARS = 2_000
#: The memory tool's beta (the Messages API refuses the tool without it).
MEMORY_BETA = "context-management-2025-06-27"

SYSTEM = """\
You are dreaming: consolidating a memory store that agents use as long-term memory.
The memory directory /memories is the dream's OUTPUT store. {start}
Read the memories and the session transcripts below, then reorganise /memories with the \
memory tool: merge fragmented and duplicate memories, fix contradictions in favour of the \
newest information, drop what is obsolete, keep every durable fact, keep files small and \
well named. Use only the memory tool. When the store is consolidated, reply with a short \
summary of what you changed and stop."""


class Canceled(Exception):  # noqa: N818 (a signal inside the runner)
    """The dream was canceled (or its process is stopping) while it ran."""


def identity() -> dict[str, Any]:
    """This process, as a dream's ``runner``."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "token": _TOKEN}


_TOKEN = secrets.token_hex(8)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def _event_line(body: dict[str, Any]) -> str:
    kind = body.get("type", "?")
    parts = []
    content = body.get("content")
    if isinstance(content, list):
        parts.append("".join(b.get("text", "") for b in content if isinstance(b, dict)))
    elif isinstance(content, str):
        parts.append(content)
    for key in ("name", "input", "is_error"):
        if key in body:
            parts.append(f"{key}={_text(body[key], EVENT_CHARS)}")
    return f"[{kind}] " + _text(" ".join(p for p in parts if p), EVENT_CHARS)


def build_prompt(store: Store, dream: Dream, root: str = "/memories") -> str:
    """The first message: the instructions, the input store (its paths under ``root``) and
    the sessions' transcripts."""
    out: list[str] = []
    if dream.instructions:
        out.append(f"<instructions>\n{dream.instructions}\n</instructions>")
    budget = STORE_CHARS
    files = []
    for m in store.tree(dream.memory_store_id):
        full = store.get_memory(dream.memory_store_id, m.id)
        text = full.content or ""
        if budget <= 0:
            files.append(f'<memory path="{root}{m.path}" omitted="read it there"/>')
            continue
        shown = text[:budget]
        budget -= len(shown)
        files.append(f'<memory path="{root}{m.path}">\n{shown}\n</memory>')
    out.append("<input_store>\n" + ("\n".join(files) or "(empty)") + "\n</input_store>")
    budget = TRANSCRIPT_CHARS
    for sid in dream.session_ids:
        lines: list[str] = []
        page = None
        while budget > 0:
            p = store.list_events(sid, limit=1000, page=page)
            for e in p.data:
                line = _event_line(e.body)
                lines.append(line[:budget])
                budget -= len(lines[-1])
                if budget <= 0:
                    lines.append("… [the transcripts go on; cut here]")
                    break
            if p.next_page is None:
                break
            page = p.next_page
        out.append(f'<session id="{sid}">\n' + "\n".join(lines) + "\n</session>")
    return "\n\n".join(out)


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
        except _Failed as e:
            return self.store.finish_dream(self.dream_id, "failed", e.error)
        try:
            return self._run(client)
        finally:
            client.close()

    def _run(self, client: Any) -> Dream:
        dream = self.store.start_dream(self.dream_id, runner=identity())
        if dream is None:  # canceled, or another runner took it
            return self.store.get_dream(self.dream_id)
        try:
            summary = self._converse(dream, client)
        except Canceled:
            if self.stop_error is not None:
                return self._fail(self.stop_error)
            return self.store.get_dream(self.dream_id)
        except _Failed as e:
            return self._fail(e.error)
        except Exception as e:  # a bug or a database failure: the dream says so
            log.exception("dream %s failed", self.dream_id)
            return self._fail({"type": "internal_error", "message": f"{type(e).__name__}: {e}"})
        log.info("dream %s completed: %s", self.dream_id, summary[:200])
        return self.store.finish_dream(self.dream_id, "completed")

    def _fail(self, error: dict[str, str]) -> Dream:
        # Before the model's first answer nothing but the copy is in the output store.
        return self.store.finish_dream(self.dream_id, "failed", error,
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
                status = self.store.dream_heartbeat(self.dream_id)
            else:
                status = self.store.get_dream(self.dream_id).status
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
        self.store.add_events(dream.session_id, [
            {"type": "user.message", "content": [{"type": "text", "text": prompt}]}])
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        deadline = time.monotonic() + TIMEOUT_SECONDS
        for _turn in range(MAX_TURNS):
            self._check()
            if time.monotonic() > deadline:
                raise _Failed("timeout", f"the dream ran longer than {TIMEOUT_SECONDS:.0f} s")
            reply = self._call(client, {
                "model": dream.model["id"], "max_tokens": MAX_TOKENS,
                "system": SYSTEM.format(start=start), "messages": messages,
                "tools": [tool.to_dict()], "betas": [MEMORY_BETA]})
            self.answered = True
            usage = reply.usage
            self.store.add_dream_usage(self.dream_id, {
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens or 0,
                "cache_read_input_tokens": usage.cache_read_input_tokens or 0})
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            text = "".join(b.get("text", "") for b in content if b["type"] == "text")
            if text:
                self.store.add_events(dream.session_id, [
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
        raise _Failed("max_turns", f"the model was still working after {MAX_TURNS} turns")

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
            raise _Failed("timeout", f"the Messages API did not answer in time: {error}")
        if isinstance(error, anthropic.APIStatusError):
            raise _Failed("model_error",
                          f"the Messages API answered {error.status_code}: {error.message}")
        if isinstance(error, anthropic.APIConnectionError):
            raise _Failed("model_unreachable",
                          f"the Messages API at {client.base_url} is unreachable: {error}")
        if isinstance(error, anthropic.AnthropicError):
            raise _Failed("model_error", str(error))
        raise error


class _Failed(Exception):
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

    :raises _Failed: no API key.
    """
    import anthropic

    missing = missing_settings()
    if missing:
        raise _Failed("configuration_error",
                      f"{missing[0]} is not set where the dream runs (the memfs server's "
                      "environment)")
    return anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"],
                               base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
                               max_retries=2)


class Dreamer:
    """The dreams a process runs: a thread each, started by :meth:`start`, stopped by
    :meth:`cancel` (this process) or a cancel in the database (any process)."""

    def __init__(self, store: Store, *, client_factory: Callable[[], Any] | None = None) -> None:
        self.store = store
        self.client_factory = client_factory
        self.runs: dict[str, DreamRun] = {}
        self.threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self, dream_id: str) -> None:
        run = DreamRun(self.store, dream_id, client_factory=self.client_factory)
        thread = threading.Thread(target=self._run, args=(run,), name=f"dream-{dream_id}",
                                  daemon=True)
        with self._lock:
            self.runs[dream_id] = run
            self.threads[dream_id] = thread
        self.watch()
        thread.start()

    def watch(self) -> None:
        """Look for dreams whose runner died every :data:`SWEEP_SECONDS` from now on."""
        with self._lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="dream-sweeper",
                                                 daemon=True)
                self._sweeper.start()

    def startup(self) -> None:
        """A process starting to serve: fail the dreams whose runner died, and watch the
        others if any runs elsewhere."""
        self.recover()
        if self.store.live_dreams():
            self.watch()

    def _run(self, run: DreamRun) -> None:
        try:
            run.run()
        except Exception:  # the database failed even to record the failure
            log.exception("dream %s could not be recorded", run.dream_id)
        finally:
            with self._lock:
                self.runs.pop(run.dream_id, None)
                self.threads.pop(run.dream_id, None)

    def cancel(self, dream_id: str) -> None:
        """Stop the dream's run in this process, if it runs here (the store records the
        cancel: :meth:`Store.cancel_dream`)."""
        with self._lock:
            run = self.runs.get(dream_id)
        if run is not None:
            run.stop.set()

    def wait(self, dream_id: str, timeout: float | None = None) -> None:
        with self._lock:
            thread = self.threads.get(dream_id)
        if thread is not None:
            thread.join(timeout)

    def recover(self) -> list[str]:
        """Fail the dreams whose runner is gone: a dead process on this host, or a runner
        silent for :data:`STALE_SECONDS`. Returns their ids."""
        me = identity()
        failed = []
        stale = {d for d, _ in self.store.stale_dreams(older_than=STALE_SECONDS)}
        for dream_id, runner in self.store.live_dreams():
            with self._lock:
                if dream_id in self.runs:
                    continue
            reason = None
            if (runner and runner.get("host") == me["host"]
                    and isinstance(runner.get("pid"), int) and not _pid_alive(runner["pid"])):
                reason = (f"the memfs process running this dream (pid {runner['pid']}) stopped "
                          "before it finished")
            elif dream_id in stale:
                reason = (f"the process running this dream has not been heard from for "
                          f"{STALE_SECONDS:.0f} s")
            if reason is not None:
                # No usage recorded: the model never answered, the output is a bare copy.
                unused = not any(self.store.get_dream(dream_id).usage.values())
                self.store.finish_dream(dream_id, "failed",
                                        {"type": "internal_error", "message": reason},
                                        discard_output=unused)
                log.warning("dream %s failed: %s", dream_id, reason)
                failed.append(dream_id)
        return failed

    def _sweep(self) -> None:
        # Until close(), or until the store is closed without it (nothing left to sweep).
        failing = False
        while not self._closed.wait(SWEEP_SECONDS) and not self.store.closed:
            try:
                self.recover()
            except Exception as e:
                if self.store.closed:  # closed while the sweep read it: nothing to sweep
                    return
                if isinstance(e, MemfsError):
                    # The database refuses (replaced under us, unreachable): one line per
                    # streak, not a traceback every SWEEP_SECONDS.
                    if not failing:
                        log.warning("the sweep for dreams whose runner died failed: %s",
                                    e.message)
                else:
                    log.exception("the sweep for dreams whose runner died failed")
                failing = True
            else:
                failing = False

    def close(self, timeout: float = 5.0) -> None:
        """Stop every dream this process runs: each fails (the process is stopping)."""
        self._closed.set()
        with self._lock:
            runs = list(self.runs.values())
            threads = list(self.threads.values())
        for run in runs:
            run.stop_error = {"type": "internal_error",
                              "message": "the memfs server stopped while the dream ran"}
            run.stop.set()
        for thread in threads:
            thread.join(timeout)


_DREAMERS: weakref.WeakKeyDictionary[Store, Dreamer] = weakref.WeakKeyDictionary()
_DREAMERS_LOCK = threading.Lock()


def dreamer_for(store: Store) -> Dreamer:
    """The :class:`Dreamer` of ``store`` in this process (one per Store object)."""
    with _DREAMERS_LOCK:
        d = _DREAMERS.get(store)
        if d is None:
            d = _DREAMERS[store] = Dreamer(store)
        return d


def close_dreamer(store: Store) -> None:
    """Stop the dreams ``store``'s process runs, if it runs any (a server stopping)."""
    with _DREAMERS_LOCK:
        d = _DREAMERS.pop(store, None)
    if d is not None:
        d.close()


@asynccontextmanager
async def lifespan(store: Store, app: Any) -> AsyncIterator[None]:
    """The API app's lifespan (memfs.api.create_app): a server starting fails the dreams left
    running by a dead one, a server stopping fails the dreams it runs: none stays
    ``running``."""
    import anyio.to_thread

    from .. import errors

    try:
        await anyio.to_thread.run_sync(dreamer_for(store).startup)
    except errors.MemfsError:
        log.exception("could not look for dreams left running")
    try:
        yield
    finally:
        await anyio.to_thread.run_sync(close_dreamer, store)


# --------------------------------------------------------------------------------------------
# memfs dream … -- CMD: any agent program does the consolidation


def run_command(db_path: str | None, dream_id: str, command: list[str]) -> Dream:
    """Run the pending dream ``dream_id`` with ``command`` as the model: launched like
    ``memfs run`` (memfs.launcher) in the dream's session, the output store mounted read-write
    and the input read-only (``create_new``). Its environment names them:
    ``MEMFS_DREAM_OUTPUT`` and ``MEMFS_DREAM_INPUT`` (mount paths), ``MEMFS_DREAM_PROMPT_FILE``
    (the instructions, the input store and the sessions' transcripts, as a model would get
    them) besides ``memfs run``'s ``MEMFS_SYSTEM_PROMPT_FILE`` (the output's instructions hold
    the dream's). Exit status 0 completes the dream, anything else fails it; a cancel (``memfs
    dream cancel``) stops the command with SIGTERM.

    One database connection set at a time in this process (the launcher's, then one to record
    the outcome): the caller must have closed its own.
    """
    from ..errors import MemfsError
    from ..launcher.plan import Launch
    from ..launcher.procs import _process_identity
    from ..launcher.runner import Launcher
    from ..store import open_store

    done = threading.Event()

    class DreamLauncher(Launcher):
        store: Store  # a dream's command runs on the local database (no Launch.url)
        dream: Dream | None = None
        watcher: threading.Thread | None = None

        def _create_session(self) -> Any:
            launcher = _process_identity(os.getpid())
            if self._root_created and not self.namespace:
                launcher["scratch"] = self.root
            dream = self.store.start_dream(dream_id, runner=identity(), session={
                "root": self.root, "launcher": launcher, "status": "idle",
                "agent": {"type": "agent", "id": "local", "name": os.path.basename(command[0])},
                "environment_id": "local"})
            if dream is None:
                raise MemfsError(f"dream {dream_id} is no longer pending")
            self.dream = dream
            session = self.store.get_session(dream.session_id or "")
            paths = {r.memory_store_id: r.mount_path for r in session.resources}
            os.environ["MEMFS_DREAM_ID"] = dream_id
            os.environ["MEMFS_DREAM_OUTPUT"] = paths[dream.output_store_id or ""]
            os.environ["MEMFS_DREAM_INPUT"] = paths[dream.memory_store_id]
            self.watcher = threading.Thread(target=self._watch, name=f"dream-watch-{dream_id}",
                                            daemon=True)
            self.watcher.start()
            return session

        def _watch(self) -> None:  # a cancel from another process stops the command
            last_beat = time.monotonic()
            while not done.wait(DB_POLL_SECONDS):
                if self._stop_signal is not None:
                    # Canceled: a command started after the cancel was seen (the launcher
                    # missed the signal kept for it, a narrow race) still gets it.
                    if self._unforwarded is not None and self._child is not None:
                        self._unforwarded = None
                        self._send(signal.SIGTERM)
                    continue
                try:
                    if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                        last_beat = time.monotonic()
                        status = self.store.dream_heartbeat(dream_id)
                    else:
                        status = self.store.get_dream(dream_id).status
                except Exception:
                    log.exception("cannot read dream %s", dream_id)
                    continue
                if status == "canceled":
                    # As a SIGTERM to memfs itself: sent to the command if it runs, else kept
                    # for it, and a command not started yet is not started at all.
                    self._on_signal(signal.SIGTERM, None)

        def _start_mounts(self) -> None:
            super()._start_mounts()
            assert self.state_dir is not None and self.dream is not None
            prompt = self.state_dir / "dream-prompt.md"
            prompt.write_text(build_prompt(self.store, self.dream,
                                           os.environ["MEMFS_DREAM_INPUT"]), encoding="utf-8")
            if self.agent is not None:
                os.chown(prompt, self.agent.uid, self.agent.gid)
                prompt.chmod(0o400)
            os.environ["MEMFS_DREAM_PROMPT_FILE"] = str(prompt)

        def _cleanup(self) -> None:
            done.set()  # the watcher stops before the launcher's store closes
            if self.watcher is not None:
                self.watcher.join()
            super()._cleanup()

    saved = {k: os.environ.get(k) for k in (
        "MEMFS_DREAM_ID", "MEMFS_DREAM_OUTPUT", "MEMFS_DREAM_INPUT", "MEMFS_DREAM_PROMPT_FILE")}
    error: str | None = None
    launcher = DreamLauncher(Launch(attachments=[], command=command, db_path=db_path))
    try:
        code = launcher.run()
        if code != 0:
            error = f"{command[0]} exited with status {code}"
    except MemfsError as e:
        error = e.message
    finally:
        done.set()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with open_store(db_path, create=False) as store:
        if error is None:
            return store.finish_dream(dream_id, "completed")
        # The command is the model: one that never started wrote nothing to the output.
        return store.finish_dream(dream_id, "failed", {"type": "command_failed",
                                                       "message": error},
                                  discard_output=launcher._child is None)
