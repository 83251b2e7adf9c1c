"""Tool events: every file operation of a mount as an ``agent.tool_use`` / ``agent.tool_result``
pair (SPEC §4), and where they go.

The events of a write (a close that commits, an unlink, a rename) are recorded by the store in
the transaction of that write, so a version and the event that reports it exist together or
not at all. Every other event (reads, listings, refused operations) is queued in the
:class:`EventSink` and written to the database in batches by the mount's event flusher. Every
event also goes to an optional JSON-lines file; a failure to write that file is logged and never
turns a successful operation into an error.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import IO, Any, ParamSpec, Protocol

from .. import errors
from ..models import ToolPair
from ..protocol import StoreAPI
from ..rules import format_time, format_us, new_id, new_ids

_P = ParamSpec("_P")

log = logging.getLogger(__name__)

#: Tool events kept in memory while the database refuses them; past that the oldest are
#: dropped, with an error in the log that says how many.
MAX_PENDING = 100_000


#: How many processes' ``/proc/<pid>/comm`` stay open (:func:`comm`), the least recently
#: asked closed first.
COMM_FILES = 64
#: Those files' descriptors, by pid, the most recently asked last.
_comm_files: OrderedDict[int, int] = OrderedDict()
#: Held while they are read, opened or closed: a descriptor closed by one thread must not be
#: read by another (its number may be another file's by then).
_comm_lock = threading.Lock()


def comm(pid: int) -> str:
    """The command name of a process (``/proc/<pid>/comm``), or ``"unknown"``.

    Read at every request, never cached: a forked shell opens a redirect as ``bash`` and then
    execs the command under the same pid, and a process may rename itself. The file stays
    open (for the last :data:`COMM_FILES` processes asked) and is read again from its start
    each time: what it reads is that process's name now (the open file is bound to the
    process, not to its number, and follows it through an ``exec``), and once the process is
    gone the read fails, so a pid used again by another process is opened anew. Opening it
    (a walk of ``/proc``) cost most of a read.
    """
    with _comm_lock:
        fd = _comm_files.get(pid)
        if fd is not None:
            try:
                name = os.pread(fd, 64, 0)
            except OSError:  # gone (ESRCH): its pid may be another process's now
                del _comm_files[pid]
                os.close(fd)
            else:
                _comm_files.move_to_end(pid)
                return _comm_text(name)
        try:
            fd = os.open(f"/proc/{pid}/comm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return "unknown"
        try:
            name = os.pread(fd, 64, 0)
        except OSError:
            os.close(fd)
            return "unknown"
        _comm_files[pid] = fd
        if len(_comm_files) > COMM_FILES:
            os.close(_comm_files.popitem(last=False)[1])
        return _comm_text(name)


def _comm_text(name: bytes) -> str:
    return name.decode("utf-8", "replace").strip() or "unknown"


class WrittenVersion(Protocol):
    """What a tool result names of a write: the memory and its version (a
    :class:`~memfs.models.Memory`, or a mount's :class:`~memfs.fuse.tree.FileState` of it)."""

    @property
    def id(self) -> str: ...

    @property
    def memory_version_id(self) -> str: ...


def new_tool_pair(
    name: str,
    pid: int,
    operation: str,
    file_path: str,
    *,
    failure: str | None = None,
    text: str = "",
    memory: WrittenVersion | None = None,
    memory_id: str | None = None,
    new_path: str | None = None,
    us: int | None = None,
) -> ToolPair:
    """One ``agent.tool_use`` / ``agent.tool_result`` pair, new ids and all. Paths are as the
    agent sees them. A write takes it as it is (``events=``): a local store encodes it from a
    template; :meth:`~memfs.models.ToolPair.events` makes its dicts.

    :param failure: the error text of a failed operation (``is_error``).
    :param memory: the memory and version a write produced (``memory_id`` alone: a deletion).
        The store completes both when it records the pair with the write itself.
    :param us: when it happened, in microseconds since the epoch (default: now), as the
        queue of :meth:`EventSink.emit_pair` keeps it.
    """
    use_id, result_id = new_ids("sevt", 2)
    pair = ToolPair(name, pid, operation, file_path, new_path, text, failure,
                    format_us(time.time_ns() // 1000 if us is None else us), use_id, result_id)
    if failure is None:
        if memory is not None:
            pair.memory_id, pair.memory_version_id = memory.id, memory.memory_version_id
        elif memory_id is not None:
            pair.memory_id = memory_id
    return pair


def _as_events(make: Callable[_P, ToolPair]) -> Callable[_P, list[dict[str, Any]]]:
    """``make`` with the pair it makes as its two event dicts (:meth:`ToolPair.events`)."""

    def events(*args: _P.args, **kwargs: _P.kwargs) -> list[dict[str, Any]]:
        return make(*args, **kwargs).events()

    return events


#: :func:`new_tool_pair`, same arguments, as its two event dicts.
tool_pair = _as_events(new_tool_pair)


def tool_pair_rows(
    name: str, pid: int, operation: str, file_path: str, failure: str | None, text: str,
    us: int,
) -> list[tuple[str, str, str, str]]:
    """:func:`tool_pair` (without ``memory`` or ``new_path``) at time ``us`` (microseconds
    since the epoch) as the store records it: ``(id, type, processed_at, JSON body)`` per
    event, the body what ``json.dumps(event, ensure_ascii=False)`` of the pair would be. Built
    from the pair's template (:meth:`~memfs.models.ToolPair.bodies`): the event flusher makes
    one for every read."""
    p = new_tool_pair(name, int(pid), operation, file_path, failure=failure, text=text, us=us)
    use, result = p.bodies()
    return [(p.use_id, "agent.tool_use", p.processed_at, use),
            (p.result_id, "agent.tool_result", p.processed_at, result)]


class EventSink:
    """Where a mount's tool events go: a JSON-lines file (one object per line, flushed as
    written) and the database.

    :meth:`emit` queues events for the database (written by :meth:`flush`, which the daemon
    calls every few hundred milliseconds and at exit); :meth:`log` only writes the file, for
    events the store recorded with their write.
    """

    def __init__(
        self,
        store: StoreAPI,
        store_id: str,
        session_id: str | None,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = store
        self.store_id = store_id
        self.session_id = session_id
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._file_failing = False
        #: Events, or the arguments of a :func:`tool_pair` still to be built (:meth:`emit_pair`).
        self._pending: list[dict[str, Any] | tuple[Any, ...]] = []
        #: Held while a batch is written: the flusher's thread and a write on the event loop
        #: (which records the queue before its own events) must not both write one batch.
        self._flushing = threading.Lock()
        #: Called when the queue goes from empty to not empty (the flusher's wake-up).
        self.on_queued: Callable[[], None] | None = None

    def log(self, events: Sequence[dict[str, Any]] | ToolPair) -> None:
        """Append events to the JSON-lines file (a pair's dicts are made only then). A failure
        is logged (once until the file works again), never raised: the events are in the
        database all the same."""
        if self._file is None:
            return
        if isinstance(events, ToolPair):
            events = events.events()
        try:
            for e in events:
                self._file.write(json.dumps(e, ensure_ascii=False) + "\n")
            self._file.flush()
        except (OSError, ValueError) as e:
            if not self._file_failing:
                log.error("cannot write the tool event log %s: %s (events still go to the "
                          "database)", self._file.name, e)
            self._file_failing = True
            return
        self._file_failing = False

    def emit(self, events: Sequence[dict[str, Any]]) -> None:
        """Record events that no write records: the file now, the database in a batch."""
        self.log(events)
        if events and not self._pending and self.on_queued is not None:
            self.on_queued()
        self._pending.extend(events)
        if len(self._pending) > MAX_PENDING:
            extra = len(self._pending) - MAX_PENDING
            del self._pending[:extra]
            log.error("dropped the %d oldest tool events: the database has refused them for "
                      "too long (they are in the JSON-lines log if one is set)", extra)

    def emit_pair(self, name: str, pid: int, operation: str, file_path: str, *,
                  failure: str | None = None, text: str = "") -> None:
        """:meth:`emit` of ``tool_pair(name, pid, operation, file_path, failure=…, text=…)``.

        Without a JSON-lines file, only its arguments and the time are queued: the flusher
        builds the pair, off the request path (every read-only open→close comes here).
        """
        if self._file is not None:
            self.emit(tool_pair(name, pid, operation, file_path, failure=failure, text=text))
            return
        if not self._pending and self.on_queued is not None:
            self.on_queued()
        self._pending.append(
            (name, pid, operation, file_path, failure, text, time.time_ns() // 1000))
        if len(self._pending) > MAX_PENDING:
            self.emit([])  # drops the oldest, saying so

    @property
    def pending(self) -> int:
        """How many entries are queued (a pair queued by :meth:`emit_pair` is one)."""
        return len(self._pending)

    def flush(self, *, wait: bool = True) -> None:
        """Write the queued events to the database. On a store error they stay queued (and the
        error propagates).

        :param wait: False: return at once if another flush is writing the queue now.
        """
        if not self._pending:
            return
        if not self._flushing.acquire(blocking=wait):
            return
        try:
            batch = list(self._pending)
            try:
                record = getattr(self.store.events, "record_tool_events", None)
                if record is not None:
                    # A local store takes the events built here as they are: the checks of
                    # events.add are for events that come from outside (the API).
                    rows: list[tuple[str, str, str, str]] = []
                    for item in batch:
                        if isinstance(item, tuple):
                            rows += tool_pair_rows(*item)
                        else:
                            if not (item.get("id") and item.get("processed_at")):
                                item = {**item, "id": item.get("id") or new_id("sevt"),
                                        "processed_at": item.get("processed_at")
                                        or format_time(datetime.now(UTC))}
                            rows.append((item["id"], item["type"], item["processed_at"],
                                         json.dumps(item, ensure_ascii=False)))
                    record(self.session_id, rows, store_id=self.store_id)
                else:
                    events: list[dict[str, Any]] = []
                    for item in batch:
                        if isinstance(item, tuple):
                            *args, us = item
                            events += tool_pair(*args[:4], failure=args[4], text=args[5],
                                                us=us)
                        else:
                            events.append(item)
                    self.store.events.add(self.session_id, events, store_id=self.store_id)
            except (errors.NotFound, errors.InvalidRequest, errors.ReadOnly) as e:
                # The session was deleted (or a server refuses them for good): these events
                # can never be recorded; keeping them would only make the queue grow.
                log.error("dropping %d tool events: %s", len(batch), e)
            del self._pending[: len(batch)]
        finally:
            self._flushing.release()

    def close(self) -> None:
        try:
            self.flush()
        except errors.MemfsError as e:
            log.error("could not record %d tool events in the database: %s", self.pending, e)
        finally:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as e:
                    log.error("closing the tool event log: %s", e)
                self._file = None
