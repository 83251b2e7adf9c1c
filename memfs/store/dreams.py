"""Dreams' rows (API.md §5; :mod:`memfs.dreams` runs them)."""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..backends import Connection, Row
from ..backends.scopes import dream_scope, store_scope
from ..errors import Conflict, InvalidRequest, LimitExceeded, NotFound, StoreArchived
from ..models import DREAM_FINAL, DREAM_STATUSES, DREAM_USAGE, Actor, Dream, Page
from ..rules import check_limit, format_time, new_id, parse_time, validate_text
from .base import Core, Part
from .common import INSERT_MEMORY, no_session, no_store, only_workspace, utc_now
from .frontmatter import EXPIRY_KEY, TYPES_KEY, derive, registry
from .rows import dream_from_row

if TYPE_CHECKING:
    from .memories import Memories
    from .sessions import Sessions
    from .stores import Stores
log = logging.getLogger(__name__)


def _dream_inputs(inputs: Any) -> tuple[str, list[str]]:
    """(store id, sorted session ids) of a dream's ``inputs``: exactly one memory_store and
    one sessions entry."""
    if not isinstance(inputs, list | tuple) or not all(isinstance(i, dict) for i in inputs):
        raise InvalidRequest("inputs must be a list of objects")
    stores = [i for i in inputs if i.get("type") == "memory_store"]
    sessions = [i for i in inputs if i.get("type") == "sessions"]
    if len(stores) != 1 or len(sessions) != 1 or len(inputs) != 2:
        raise InvalidRequest("inputs must hold exactly one 'memory_store' entry and exactly one "
                             "'sessions' entry")
    store_id = stores[0].get("memory_store_id")
    if not isinstance(store_id, str) or not store_id or set(stores[0]) - {
            "type", "memory_store_id"}:
        raise InvalidRequest("the memory_store input needs a memory_store_id (and nothing else)")
    ids = sessions[0].get("session_ids")
    if not isinstance(ids, list) or not all(isinstance(s, str) and s for s in ids) or set(
            sessions[0]) - {"type", "session_ids"}:
        raise InvalidRequest("the sessions input needs session_ids, a list of session ids")
    if not 1 <= len(ids) <= 100:
        raise InvalidRequest(f"session_ids must hold 1 to 100 ids ({len(ids)} given)")
    if len(set(ids)) != len(ids):
        raise InvalidRequest("session_ids holds an id twice")
    return store_id, sorted(ids)


def _dream_model(model: Any) -> dict[str, Any]:
    """A dream's model as its wire object ``{id, speed}``."""
    if isinstance(model, str):
        model = {"id": model}
    if not isinstance(model, dict) or set(model) - {"id", "speed"}:
        raise InvalidRequest("model must be a model id or an object {id, speed}")
    mid, speed = model.get("id"), model.get("speed")
    if not isinstance(mid, str) or not 1 <= len(mid) <= 256:
        raise InvalidRequest("the model id must be 1 to 256 characters")
    if speed not in (None, "standard"):
        raise InvalidRequest(f"dreams accept only the 'standard' speed, not {speed!r}")
    return {"id": mid, "speed": "standard"}


def _dream_output_behavior(value: Any, store_id: str) -> dict[str, Any]:
    if value is None:
        return {"type": "create_new"}
    if isinstance(value, dict) and value.get("type") == "create_new" and set(value) == {"type"}:
        return {"type": "create_new"}
    if isinstance(value, dict) and value.get("type") == "update_existing" and set(value) == {
            "type", "memory_store_id"}:
        if value["memory_store_id"] != store_id:
            raise InvalidRequest("update_existing must name the input memory store "
                                 f"({store_id})")
        return {"type": "update_existing", "memory_store_id": store_id}
    raise InvalidRequest("output_behavior must be {type: create_new} or {type: update_existing, "
                         "memory_store_id}")


class Dreams(Part):
    """The store's dreams (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, stores: Stores, sessions: Sessions, memories: Memories) -> None:
        super().__init__(core)
        self.stores = stores
        self.sessions = sessions
        self.memories = memories

    # -- dreams (API.md §5) ------------------------------------------------------------------
    # The rows and their status changes; memfs.dreams runs them (the model, the memory tool).

    def create(
        self,
        inputs: Any,
        model: Any,
        *,
        instructions: Any = None,
        output_behavior: Any = None,
        runner: dict[str, Any] | None = None,
        workspace: str | None = None,
    ) -> Dream:
        """A ``pending`` dream over one memory store and 1–100 sessions (API.md §5), of
        ``workspace`` (whose store and sessions alone it may read; None: its store's).

        :raises InvalidRequest: bad inputs, model, instructions or output_behavior.
        :raises NotFound: unknown store or session. :raises StoreArchived:
        :raises Conflict: an ``update_existing`` dream on the store has not ended.
        """
        lim = self.limits
        validate_text([inputs, model, instructions, output_behavior, runner], "the dream")
        store_id, session_ids = _dream_inputs(inputs)
        model_obj = _dream_model(model)
        if instructions is not None and not (
                isinstance(instructions, str)
                and 1 <= len(instructions) <= lim.max_instructions_chars):
            raise InvalidRequest(
                f"instructions must be 1 to {lim.max_instructions_chars} characters, or null")
        behavior = _dream_output_behavior(output_behavior, store_id)
        did = new_id("drm")
        now = utc_now()
        # The store's dreams (at most one update_existing dream not ended) are its own rule.
        with self.core.write(dream_scope(did), store_scope(store_id)) as c:
            store = self.core.store_in(c, store_id)
            owner = c.execute("SELECT workspace_id FROM stores WHERE id = ?",
                              (store_id,)).fetchone()["workspace_id"]
            if workspace is not None and owner != workspace:
                raise no_store(store_id)
            if store.archived_at is not None:
                raise StoreArchived(f"memory store {store_id} is archived; a dream cannot read it")
            found = {r["id"] for r in c.execute(
                f"SELECT id FROM sessions WHERE id IN ({','.join('?' * len(session_ids))}) "
                "AND workspace_id = ?", [*session_ids, owner])}
            missing = [s for s in session_ids if s not in found]
            if missing:
                raise no_session(missing[0])
            if behavior["type"] == "update_existing":
                busy = c.execute(
                    "SELECT id FROM dreams WHERE status IN ('pending', 'running') "
                    "AND memory_store_id = ? AND output_behavior LIKE ?",
                    (store_id, '%"update_existing"%')).fetchone()
                if busy is not None:
                    raise Conflict(f"dream {busy['id']} is still updating memory store "
                                   f"{store_id}; wait until it ends or cancel it")
            c.execute(
                "INSERT INTO dreams (id, status, memory_store_id, session_ids, model, "
                "instructions, output_behavior, created_at, runner, heartbeat_at, workspace_id) "
                "VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (did, store_id, json.dumps(session_ids), json.dumps(model_obj), instructions,
                 json.dumps(behavior), now, None if runner is None else json.dumps(runner),
                 now, owner),
            )
        return self.get(did)

    def get(self, dream_id: str) -> Dream:
        """Archived dreams too. :raises NotFound:"""
        row = self.core.one("SELECT * FROM dreams WHERE id = ?", (dream_id,))
        if row is None:
            raise NotFound(f"no dream {dream_id!r}")
        return dream_from_row(row)

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        workspace: str | None = None,
    ) -> Page[Dream]:
        """Dreams, newest first (``created_at`` desc, then ``id`` desc); ``workspace``: only
        that workspace's."""
        limit = check_limit(limit, self.limits)
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        only_workspace(where, params, workspace)
        if statuses:
            for s in statuses:
                if s not in DREAM_STATUSES:
                    raise InvalidRequest(f"invalid dream status {s!r}")
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params += list(statuses)
        if not include_archived:
            where.append("archived_at IS NULL")
        for op, value in ((">", created_at_gt), ("<", created_at_lt)):
            if value is not None:
                where.append(f"created_at {op} ?")
                params.append(format_time(parse_time(value)))
        filters = ["dreams", include_archived, list(params)]  # a copy: see list_stores
        return self.core.newest_first("dreams", filters, where, params, limit, page, dream_from_row)

    def _dream_row_in(self, c: Connection, dream_id: str) -> Row:
        row: Row | None = c.execute("SELECT * FROM dreams WHERE id = ?", (dream_id,)).fetchone()
        if row is None:
            raise NotFound(f"no dream {dream_id!r}")
        return row

    def archive(self, dream_id: str) -> Dream:
        """Archive an ended dream (idempotent, irreversible).

        :raises InvalidRequest: the dream is pending or running. :raises NotFound:
        """
        with self.core.write(dream_scope(dream_id)) as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] not in DREAM_FINAL:
                raise InvalidRequest(
                    f"dream {dream_id} is {row['status']}: only a completed, failed or "
                    "canceled dream can be archived (cancel it first)")
            if row["archived_at"] is None:
                c.execute("UPDATE dreams SET archived_at = ? WHERE id = ?", (utc_now(), dream_id))
        return self.get(dream_id)

    def cancel(self, dream_id: str) -> Dream:
        """Cancel a pending or running dream (a canceled one is returned unchanged); its
        runner stops at its next check (memfs.dreams).

        :raises InvalidRequest: the dream already completed or failed. :raises NotFound:
        """
        with self.core.write(dream_scope(dream_id)) as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] in ("completed", "failed"):
                raise InvalidRequest(
                    f"dream {dream_id} is {row['status']}: only a pending or running dream "
                    "can be canceled")
            if row["status"] != "canceled":
                c.execute("UPDATE dreams SET status = 'canceled', ended_at = ? WHERE id = ?",
                          (utc_now(), dream_id))
        dream = self.get(dream_id)
        self._dream_ended(dream)
        return dream

    def start(self, dream_id: str, *, runner: dict[str, Any] | None = None,
                    session: dict[str, Any] | None = None) -> Dream | None:
        """Move a pending dream to ``running``: its output store (``create_new``: a new store,
        a copy of the input whose versions are the dream session's) and its session (the
        output attached read_write, the input read_only; ``session``: more arguments of
        :meth:`create_session`, e.g. the ``root`` and ``launcher`` of ``memfs dream -- CMD``).
        None: the dream is not pending (canceled meanwhile, or another runner took it).
        """
        with self.core.write(dream_scope(dream_id)) as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] != "pending":
                return None
            # Taken: no other runner starts it too.
            c.execute("UPDATE dreams SET runner = ?, heartbeat_at = ? WHERE id = ?",
                      (json.dumps(runner) if runner is not None else row["runner"], utc_now(),
                       dream_id))
            behavior = json.loads(row["output_behavior"])
            source = self.core.store_in(c, row["memory_store_id"])
            if behavior["type"] == "create_new":
                suffix = f" (dream {dream_id})"
                name = source.name[: self.limits.max_name_chars - len(suffix)] + suffix
                now = utc_now()
                out_id = new_id("memstore")
                # Its memories have the types of its source's and expire as they do (SPEC §8:
                # never by surprise): the same registry, expiry mode and default.
                expiry = c.execute("SELECT expiry FROM stores WHERE id = ?",
                                   (source.id,)).fetchone()["expiry"]
                typed = {k: v for k, v in source.metadata.items() if k in (TYPES_KEY, EXPIRY_KEY)}
                c.execute(
                    "INSERT INTO stores (id, name, description, metadata, created_at, "
                    "updated_at, workspace_id, expiry) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (out_id, name, f"The output of dream {dream_id} over {source.id}",
                     json.dumps({"memfs_dream_id": dream_id, "memfs_dream_status": "running",
                                 **typed}),
                     now, now, row["workspace_id"], expiry),
                )
            else:
                out_id = source.id
        guide = "The dream's output: consolidate the memories here."
        if row["instructions"]:
            guide = (guide + " " + row["instructions"])[: self.limits.max_instructions_chars]
        resources = [{"type": "memory_store", "memory_store_id": out_id, "access": "read_write",
                      "instructions": guide}]
        if out_id != source.id:
            resources.append({"type": "memory_store", "memory_store_id": source.id,
                              "access": "read_only",
                              "instructions": "The dream's input: never changed."})
        session_ = self.sessions.create(
            resources, **{"status": "running", "title": f"dream {dream_id}",
                          "metadata": {"memfs_dream_id": dream_id}, **(session or {})})
        actor = Actor.session(session_.id)
        # The output store's copy of its input, as one commit of the input left it.
        with self.core.write(dream_scope(dream_id), store_scope(out_id),
                             store_scope(source.id)) as c:
            if out_id != source.id:
                types = registry(source.metadata)  # the output store's: copied above
                for m in c.execute(
                        "SELECT path, content, content_sha256, content_size_bytes FROM memories "
                        "WHERE store_id = ? ORDER BY path", (source.id,)).fetchall():
                    now = utc_now()
                    mid = new_id("mem")
                    vid = self.memories.insert_version(c, out_id, mid, "created", m["path"],
                                               m["content"], m["content_sha256"],
                                               m["content_size_bytes"], actor, now)
                    d = derive(m["path"], m["content"], types, now)
                    c.execute(INSERT_MEMORY,
                              (mid, out_id, m["path"], m["content"], m["content_sha256"],
                               m["content_size_bytes"], vid, now, now, *d.columns()))
                    self.core.change(c, out_id, "put", mid, m["path"])
            c.execute(
                "UPDATE dreams SET output_store_id = ?, session_id = ?, heartbeat_at = ? "
                "WHERE id = ?", (out_id, session_.id, utc_now(), dream_id))
            started = c.execute(
                "UPDATE dreams SET status = 'running' WHERE id = ? AND status = 'pending' "
                "RETURNING id", (dream_id,)).fetchone()
        dream = self.get(dream_id)
        if started is None:  # canceled while its store was made
            self._dream_ended(dream)
            return None
        return dream

    def add_usage(self, dream_id: str, usage: dict[str, int]) -> None:
        """Add a model call's token counts (after a cancel too; frozen once completed or
        failed) and mark the dream's runner alive."""
        counts = [int(usage.get(k) or 0) for k in DREAM_USAGE]
        with self.core.write(dream_scope(dream_id)) as c:
            c.execute(
                "UPDATE dreams SET " + ", ".join(f"{k} = {k} + ?" for k in DREAM_USAGE)
                + ", heartbeat_at = ? WHERE id = ? AND status IN ('pending', 'running', "
                "'canceled')", (*counts, utc_now(), dream_id))

    def heartbeat(self, dream_id: str) -> str:
        """Mark the dream's runner alive; returns the dream's status."""
        with self.core.write(dream_scope(dream_id)) as c:
            c.execute("UPDATE dreams SET heartbeat_at = ? WHERE id = ? AND status IN "
                      "('pending', 'running')", (utc_now(), dream_id))
            return str(self._dream_row_in(c, dream_id)["status"])

    def finish(self, dream_id: str, status: str, error: dict[str, str] | None = None,
                     *, discard_output: bool = False) -> Dream:
        """End a pending or running dream: ``completed``, or ``failed`` with ``error``
        ({type, message}); a dream that already ended keeps its status. Ends its session and
        marks its new output store with the status (metadata ``memfs_dream_status``).

        :param discard_output: the dream failed before its model ran: its new output store,
            a copy of the input nothing else wrote, is deleted in the same transaction (its
            ``outputs`` empty again), so that failed tries leave no copies behind. The input
            (``update_existing``) is never deleted.
        """
        if status not in ("completed", "failed"):
            raise InvalidRequest(f"a dream cannot end as {status!r}")
        if not discard_output:
            with self.core.write(dream_scope(dream_id)) as c:
                self._finish_in(c, dream_id, status, error, discard_output)
        else:
            # Deleting its output store: that store's scope too, read first (start sets
            # it, holding the dream's scope: read again once held).
            def scopes_of(c: Connection) -> list[str]:
                out = c.execute("SELECT output_store_id FROM dreams WHERE id = ?",
                                (dream_id,)).fetchone()
                return [dream_scope(dream_id),
                        *([store_scope(out[0])] if out and out[0] else [])]

            self.core.write_holding(
                scopes_of, lambda c: self._finish_in(c, dream_id, status, error, True))
        dream = self.get(dream_id)
        self._dream_ended(dream)
        return dream

    def _finish_in(self, c: Connection, dream_id: str, status: str,
                   error: dict[str, str] | None, discard_output: bool) -> None:
        ended = c.execute(
            "UPDATE dreams SET status = ?, error = ?, ended_at = ? WHERE id = ? "
            "AND status IN ('pending', 'running') RETURNING output_store_id, "
            "memory_store_id",
            (status, None if error is None else json.dumps(error), utc_now(), dream_id),
        ).fetchone()
        out = None if ended is None else ended["output_store_id"]
        if (discard_output and status == "failed" and out is not None
                and out != ended["memory_store_id"]):
            with contextlib.suppress(NotFound):  # deleted meanwhile
                self.stores.delete_in(c, out)
            c.execute("UPDATE dreams SET output_store_id = NULL WHERE id = ?", (dream_id,))

    def _dream_ended(self, dream: Dream) -> None:
        """An ended dream's session is terminated, its new output store marked."""
        if dream.status not in DREAM_FINAL:
            return
        if dream.session_id is not None:
            with contextlib.suppress(NotFound):  # deleted meanwhile
                self.sessions.set_status(dream.session_id, "terminated")
        out = dream.output_store_id
        if out is not None and out != dream.memory_store_id:
            mark = {"memfs_dream_status": dream.status}
            if dream.error is not None:
                mark["memfs_dream_error"] = (dream.error["type"] + ": "
                                             + dream.error["message"])[:512]
            with contextlib.suppress(NotFound, StoreArchived, LimitExceeded):  # gone meanwhile
                self.stores.update(out, metadata=mark)

    def stale(self, *, older_than: float) -> builtins.list[tuple[str, dict[str, Any] | None]]:
        """``(dream_id, runner)`` of the dreams not ended whose runner has said nothing for
        ``older_than`` seconds."""
        cutoff = format_time(datetime.now(UTC) - timedelta(seconds=older_than))
        return [(r["id"], None if r["runner"] is None else json.loads(r["runner"]))
                for r in self.core.all(
                    "SELECT id, runner, heartbeat_at FROM dreams "
                    "WHERE status IN ('pending', 'running') ORDER BY id")
                if r["heartbeat_at"] < cutoff]

    def live(self) -> builtins.list[tuple[str, dict[str, Any] | None]]:
        """``(dream_id, runner)`` of every dream not ended."""
        return [(r["id"], None if r["runner"] is None else json.loads(r["runner"]))
                for r in self.core.all("SELECT id, runner FROM dreams "
                                   "WHERE status IN ('pending', 'running') ORDER BY id")]
