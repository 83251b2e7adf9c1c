"""Undoing a session (:mod:`memfs.store.revert` plans it; this applies the plan)."""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from ..backends import Connection
from ..backends.scopes import store_scope
from ..errors import Busy, InvalidRequest, MemfsError, NotFound, StorageError, WouldBlock
from ..models import Actor
from ..rules import encode_content, new_id, validate_path
from .base import Core, Part
from .common import utc_now

if TYPE_CHECKING:
    from .memories import Memories
    from .sessions import Sessions
log = logging.getLogger(__name__)


class Undo(Part):
    """The store's undo (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, memories: Memories, sessions: Sessions) -> None:
        super().__init__(core)
        self.memories = memories
        self.sessions = sessions

    # -- undo a session (memfs.store.revert: the plan; README "Undo a session") -------------------

    def revert(self, target: str, *, actor: Actor | None, dry_run: bool = False,
               force: bool = False) -> dict[str, Any]:
        """Undo a session (``target``: its ``sesn_`` id; every version its ``session_actor``
        wrote, in every store) or an earlier revert (its ``memrevert_`` id: the versions it
        wrote). Each memory they touched goes back to its state before them, as new versions
        by ``actor``, all in ONE transaction, and the revert is recorded under a new
        ``memrevert_`` id (none when nothing was written). The rules, conflicts and the
        result object: :mod:`memfs.store.revert`. With ``dry_run`` the same transaction runs and is
        rolled back: the same plan, conflicts and errors, nothing written.

        :raises NotFound: unknown session or revert. :raises InvalidRequest: a bad argument.
        :raises StoreArchived, LimitExceeded, PathConflict, InvalidPath, ContentTooLarge: the
            store refused a step; nothing was changed.
        """
        from . import revert as rv

        if not isinstance(target, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,100}", target):
            raise InvalidRequest("the target must be a session id (sesn_…) or a revert id "
                                 f"({rv.REVERT_PREFIX}_…)")
        if not isinstance(dry_run, bool) or not isinstance(force, bool):
            raise InvalidRequest("dry_run and force must be true or false")
        out: dict[str, Any] = {}
        try:
            def run(c: Connection) -> None:
                out.update(self._revert_in(c, target, actor, dry_run, force))
                if dry_run:  # the plan kept, the transaction rolled back
                    raise rv.DryRun

            self.core.write_holding(lambda c: self._scopes_in(c, target), run)
        except rv.DryRun:
            pass
        except MemfsError as e:
            if not isinstance(e, StorageError | Busy | NotFound | WouldBlock):
                e.args = (f"the revert was refused and nothing was changed: {e.message}",
                          *e.args[1:])
            raise
        return out

    @staticmethod
    def _scopes_in(c: Connection, target: str) -> set[str]:
        """What reverting ``target`` holds: the scope of each store its versions are in (a
        memory's versions are all in its store: it changes no other), and the revert's own
        (two reverts of one target are serialised even when it wrote nothing)."""
        from . import revert as rv

        if target.startswith(rv.REVERT_PREFIX + "_"):
            rec = c.execute("SELECT version_ids FROM reverts WHERE id = ?", (target,)).fetchone()
            ids = json.loads(rec["version_ids"]) if rec is not None else []
            stores = {r[0] for i in range(0, len(ids), 500) for r in c.execute(
                "SELECT DISTINCT store_id FROM versions WHERE id IN "
                f"({','.join('?' * len(ids[i:i + 500]))})", ids[i:i + 500]).fetchall()}
        else:
            stores = {r[0] for r in c.execute(
                "SELECT DISTINCT store_id FROM versions WHERE created_by_type = "
                "'session_actor' AND created_by_id = ?", (target,)).fetchall()}
        return {f"revert:{target}", *map(store_scope, stores)}

    def _revert_in(self, c: Connection, target: str, actor: Actor | None,
                   dry_run: bool, force: bool) -> dict[str, Any]:
        from . import revert as rv

        kind = "revert" if target.startswith(rv.REVERT_PREFIX + "_") else "session"
        if kind == "revert":
            rec = c.execute("SELECT version_ids FROM reverts WHERE id = ?", (target,)).fetchone()
            if rec is None:
                raise NotFound(f"revert {target!r} not found")
            ids = json.loads(rec["version_ids"])
            rows = [r for i in range(0, len(ids), 500) for r in c.execute(
                "SELECT id, memory_id FROM versions WHERE id IN "
                f"({','.join('?' * len(ids[i:i + 500]))})", ids[i:i + 500]).fetchall()]
        else:
            rows = c.execute(
                "SELECT v.id, v.memory_id, v.store_id FROM stores s JOIN versions v ON "
                "v.store_id = s.id AND v.created_by_id = ? "
                "WHERE v.created_by_type = 'session_actor'", (target,)
            ).fetchall()
            if not rows:
                self.sessions.session_in(c, target)  # NotFound for an unknown session
            # Only the stores attached to the session (fixed at its creation; it can write
            # nowhere else): a copy of a store (memfs import --name) keeps its versions'
            # authors. A deleted session's attachments are gone: then every store.
            if c.execute("SELECT 1 FROM sessions WHERE id = ?", (target,)).fetchone():
                attached = {r["memory_store_id"] for r in c.execute(
                    "SELECT memory_store_id FROM session_resources WHERE session_id = ?",
                    (target,)).fetchall()}
                rows = [r for r in rows if r["store_id"] in attached]
        target_ids = {r["id"] for r in rows}
        mids = sorted({r["memory_id"] for r in rows})
        histories: dict[str, list[Any]] = {}
        for i in range(0, len(mids), 500):
            part = mids[i:i + 500]
            marks = ",".join("?" * len(part))
            for r in c.execute(f"SELECT * FROM versions WHERE memory_id IN ({marks}) "
                               "ORDER BY created_at, id", part).fetchall():
                histories.setdefault(r["memory_id"], []).append(rv.Version.from_row(r))
        live = {sid: {r["id"]: r["path"] for r in c.execute(
                    "SELECT id, path FROM memories WHERE store_id = ?", (sid,)).fetchall()}
                for sid in {vs[0].store_id for vs in histories.values()}}
        steps = rv.plan(target_ids, histories, live, force=force)
        now = utc_now()
        todo = [s for s in steps if s.action in ("delete", "recreate", "restore")]
        heads = {s.memory_id: self.memories.memory_in(c, s.store_id, "id", s.memory_id)
                 for s in todo if s.action != "recreate"}
        # Removals and moves away first (a move to a placeholder outside the path space, in
        # this transaction only), then every placement: rename chains and swaps work.
        for s in todo:
            if s.action == "delete":
                self.core.writable_store_in(c, s.store_id)  # StoreArchived, as for the others
                row = heads[s.memory_id]
                s.version_id = self.memories.insert_version(
                    c, s.store_id, s.memory_id, "deleted", row["path"], None, None, None, actor,
                    now)
                c.execute("DELETE FROM memories WHERE id = ?", (s.memory_id,))
                self.core.change(c, s.store_id, "delete", s.memory_id, row["path"])
                self.memories.prune_memory(c, s.memory_id)
            elif s.moves:
                c.execute("UPDATE memories SET path = ? WHERE id = ?",
                          ("revert:" + s.memory_id, s.memory_id))
        for s in todo:
            if s.action == "delete":
                continue
            path = validate_path(s.path, self.limits)
            text, data = encode_content(s.content, self.limits)
            if s.action == "restore":
                m = self.memories.modify_in(c, heads[s.memory_id], (text, data), path, False,
                                            actor, now)
                s.version_id = m.memory_version_id
                continue
            s.version_id = self.memories.create_in(c, s.store_id, path, text, data, actor,
                                           memory_id=s.memory_id, now=now).memory_version_id
        revert_id = None
        if todo:
            revert_id = new_id(rv.REVERT_PREFIX)
            c.execute(
                "INSERT INTO reverts (id, target_type, target_id, forced, created_at, "
                "created_by_type, created_by_id, version_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (revert_id, kind, target, int(force), now, actor.type if actor else None,
                 actor.id if actor else None, json.dumps([s.version_id for s in todo])),
            )
        if dry_run:  # the versions of a rolled-back transaction do not exist
            for s in todo:
                s.version_id = None
        return rv.result(steps, revert_id=None if dry_run else revert_id,
                         target={"type": kind, "id": target}, dry_run=dry_run, force=force,
                         created_at=now, actor=actor.to_dict() if actor else None)
