"""Undo a session (``memfs session revert``): the plan, computed from version rows alone.

This module is pure (no database): :meth:`memfs.store.Store.undo.revert` reads the rows inside its
write transaction, calls :func:`plan`, applies the steps and records the revert. The result is
a plain JSON object (:func:`result`), the same from the Store, the API and the client.

The rules (README "Undo a session"):

- The *target* is a set of versions: every version written by a session (``session_actor``
  with its id, in every store), or every version written by an earlier revert (its
  ``memrevert_`` record), so that a revert can itself be reverted.
- For each memory M with a target version, ``first`` is its earliest target version, and the
  *pre-state* is M's newest version strictly before ``first`` in ``(created_at, id)`` order:
  none (and ``first`` is a ``created``) or a ``deleted`` one means M did not exist; a redacted
  one, or none when ``first`` is not a ``created`` (retention pruned it), means the pre-state
  is unknown: *unrecoverable*.
- M's current state is its newest version (a live memory's head, or its ``deleted``).
  Already equal to the pre-state (path and content, or both absent): *unchanged*, nothing is
  written. Else, when a version of M after ``first`` is not a target version (someone else
  changed it during or after the session): a *changed* conflict, left alone unless ``force``.
- Otherwise M is reverted whole: ``delete`` (the target created it), ``recreate`` (the target
  deleted it: same memory id, pre-state path and content, a ``created`` version) or
  ``restore`` (content and/or path back: a ``modified`` version, same id).
- Paths are checked against the store's state after the whole revert (removals and moves
  away first, so rename chains and swaps work): a placement whose path is held by a memory
  that stays, or that the file/directory overlap rule forbids (``/a`` vs ``/a/b``), is a
  *path_taken* conflict; that memory then stays where it is, which may block another (checked
  to a fixed point); a refused memory whose path the final state leaves free after all (the
  placement that took it was refused in turn) gets it. ``force`` never frees a path and never
  recovers lost content.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: ``memfs session revert`` exits with this when conflicts or unrecoverable memories were left
#: (0: everything reverted, or nothing to do).
EXIT_LEFT = 10
#: Lines of a conflict's diff kept (the rest is summarised).
DIFF_LINES = 20
#: The id prefix of a revert record.
REVERT_PREFIX = "memrevert"


class DryRun(Exception):  # noqa: N818  (not an error: it rolls a dry run's transaction back)
    """Raised inside a dry run's write transaction to roll it back."""


@dataclass(frozen=True)
class Version:
    """What the plan needs of one version row."""

    id: str
    memory_id: str
    store_id: str
    operation: str
    created_at: str
    path: str | None
    content: str | None
    content_sha256: str | None
    redacted_at: str | None
    actor_type: str | None
    actor_id: str | None

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> Version:
        return cls(r["id"], r["memory_id"], r["store_id"], r["operation"], r["created_at"],
                   r["path"], r["content"], r["content_sha256"], r["redacted_at"],
                   r["created_by_type"], r["created_by_id"])

    def summary(self) -> dict[str, Any]:
        """The version as a conflict reports it (content as a size, not the text)."""
        actor = None
        if self.actor_type:
            from ..models import ACTOR_ID_FIELDS

            actor = {"type": self.actor_type,
                     ACTOR_ID_FIELDS.get(self.actor_type, "id"): self.actor_id}
        return {"memory_version_id": self.id, "operation": self.operation,
                "created_at": self.created_at, "created_by": actor, "path": self.path,
                "content_sha256": self.content_sha256,
                "content_size_bytes": None if self.content is None
                else len(self.content.encode("utf-8")),
                "redacted_at": self.redacted_at}


@dataclass
class Step:
    """What the revert does (or cannot do) to one memory.

    ``action``: ``delete``, ``recreate``, ``restore``, ``unchanged`` or ``conflict``;
    ``reason`` (conflicts): ``changed``, ``path_taken`` or ``unrecoverable``.
    """

    store_id: str
    memory_id: str
    action: str
    #: The path now (None: not live) and the path after the revert (None: absent).
    old_path: str | None
    path: str | None
    #: The pre-state content to write (recreate, restore).
    content: str | None = None
    content_changed: bool = False
    forced: bool = False
    reason: str | None = None
    message: str | None = None
    target_last: Version | None = None
    current: Version | None = None
    blocker: tuple[str, str] | None = None
    #: The version the revert wrote (filled in by the store).
    version_id: str | None = None

    @property
    def moves(self) -> bool:
        return self.action == "restore" and self.path != self.old_path


def plan(target_ids: Collection[str], histories: Mapping[str, Sequence[Version]],
         live_paths: Mapping[str, Mapping[str, str]], *, force: bool) -> list[Step]:
    """The steps of a revert, in memory id order.

    :param target_ids: the ids of the versions to undo.
    :param histories: for each memory with a target version, all its retained versions in
        ``(created_at, id)`` order.
    :param live_paths: for each store of those memories, ``{memory_id: path}`` of every live
        memory in it (the path check looks at the whole store).
    """
    steps = [_step(target_ids, histories[mid], force) for mid in sorted(histories)]
    by_store: dict[str, list[Step]] = {}
    for s in steps:
        by_store.setdefault(s.store_id, []).append(s)
    for store_id, group in by_store.items():
        _check_paths(group, live_paths.get(store_id, {}))
    return steps


def _step(target_ids: Collection[str], vs: Sequence[Version], force: bool) -> Step:
    marks = [i for i, v in enumerate(vs) if v.id in target_ids]
    first_i = marks[0]
    first, last, cur = vs[first_i], vs[marks[-1]], vs[-1]
    now_path = None if cur.operation == "deleted" else cur.path
    step = Step(cur.store_id, cur.memory_id, "conflict", now_path, None,
                target_last=last, current=cur)
    pre = vs[first_i - 1] if first_i > 0 else None
    if pre is None and first.operation != "created":
        step.reason = "unrecoverable"
        step.message = "its state before was pruned by version retention"
        return step
    if pre is not None and pre.operation != "deleted" and pre.redacted_at is not None:
        step.reason = "unrecoverable"
        step.message = f"its version before ({pre.id}) was redacted at {pre.redacted_at}"
        return step
    exists = pre is not None and pre.operation != "deleted"
    step.path = pre.path if exists and pre else None
    if exists and pre and cur.operation != "deleted" and cur.path == pre.path \
            and cur.content_sha256 == pre.content_sha256 and cur.content == pre.content:
        step.action = "unchanged"
        return step
    if not exists and cur.operation == "deleted":
        step.action = "unchanged"
        return step
    foreign = [v for v in vs[first_i + 1:] if v.id not in target_ids]
    if foreign and not force:
        who = _actor_text(cur if cur.id not in target_ids else foreign[-1])
        step.reason = "changed"
        step.message = f"changed by {who} after the reverted writes ({len(foreign)} version"\
            f"{'s' if len(foreign) != 1 else ''}); --force overwrites it"
        return step
    step.forced = bool(foreign)
    if not exists:
        step.action = "delete"
        return step
    assert pre is not None  # exists: the state before is live
    if cur.operation == "deleted":
        step.action, step.content, step.content_changed = "recreate", pre.content, True
    else:
        step.action, step.content = "restore", pre.content
        step.content_changed = cur.content != pre.content
    return step


def _actor_text(v: Version) -> str:
    return f"{v.actor_type}:{v.actor_id}" if v.actor_type else "an unknown actor"


def _ancestors(path: str) -> list[str]:
    segs = path[1:].split("/")
    return ["/" + "/".join(segs[:i]) for i in range(1, len(segs))]


def _check_paths(steps: list[Step], live: Mapping[str, str]) -> None:
    """Turn placements blocked in the store's final state into path_taken conflicts, to a
    fixed point (a memory left in place keeps its path, which may block another); then give
    a refused memory its path after all where the final state leaves it free (refused for a
    placement that was refused in turn)."""
    vacating = {s.memory_id for s in steps if s.action == "delete" or s.moves}
    refused: dict[str, tuple[str, str | None]] = {}  # memory id -> (action, content) planned
    while True:
        occupied = {p: m for m, p in live.items() if m not in vacating}
        dirs = Counter(a for p in occupied for a in _ancestors(p))
        rejected = False
        for s in steps:
            if not (s.action == "recreate" or s.moves):
                continue
            assert s.path is not None
            blocker = _blocker(s.path, occupied, dirs)
            if blocker is None:
                occupied[s.path] = s.memory_id
                dirs.update(_ancestors(s.path))
                continue
            refused[s.memory_id] = (s.action, s.content)
            s.action, s.reason, s.blocker = "conflict", "path_taken", blocker
            s.message = (f"{s.path} is now taken by memory {blocker[0]} at {blocker[1]}"
                         if blocker[1] == s.path else
                         f"{s.path} would overlap memory {blocker[0]} at {blocker[1]}")
            s.content = None
            vacating.discard(s.memory_id)
            rejected = True
        if not rejected:
            break
    _readmit([s for s in steps if s.memory_id in refused], refused, occupied)


def _readmit(conflicts: list[Step], planned: Mapping[str, tuple[str, str | None]],
             final: dict[str, str]) -> None:
    """Place a refused memory after all where the final state (``final``: path -> memory id)
    leaves its path free once it leaves its own, until none fits. Each one placed is checked
    against the whole final state, so the state stays valid; it frees its old path, which
    may let another in."""
    while True:
        placed = False
        for s in conflicts:
            if s.action != "conflict":
                continue
            assert s.path is not None
            others = {p: m for p, m in final.items() if m != s.memory_id}
            if _blocker(s.path, others, Counter(a for p in others for a in _ancestors(p))):
                continue
            s.action, s.content = planned[s.memory_id]
            s.reason = s.message = s.blocker = None
            others[s.path] = s.memory_id
            final.clear()
            final.update(others)
            placed = True
        if not placed:
            return


def _blocker(path: str, occupied: Mapping[str, str], dirs: Counter[str]) -> tuple[str, str] \
        | None:
    if path in occupied:
        return occupied[path], path
    for a in _ancestors(path):
        if a in occupied:
            return occupied[a], a
    if dirs[path]:
        below = min(p for p in occupied if p.startswith(path + "/"))
        return occupied[below], below
    return None


def diff(old: str | None, new: str | None, old_name: str, new_name: str) -> str | None:
    """A unified diff of two contents, cut to :data:`DIFF_LINES` lines (None: one is
    missing)."""
    if old is None or new is None:
        return None
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name,
                                      lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"... ({len(lines) - DIFF_LINES} more lines)"]
    return "\n".join(lines)


def result(steps: Sequence[Step], *, revert_id: str | None, target: dict[str, str],
           dry_run: bool, force: bool, created_at: str, actor: dict[str, str] | None
           ) -> dict[str, Any]:
    """The revert as a JSON object (README "Undo a session")."""
    actions, conflicts, unchanged = [], [], []
    for s in steps:
        base = {"memory_store_id": s.store_id, "memory_id": s.memory_id}
        if s.action == "unchanged":
            unchanged.append({**base, "path": s.old_path})
        elif s.action == "conflict":
            last, cur = s.target_last, s.current
            conflicts.append({
                **base, "reason": s.reason, "message": s.message, "path": s.old_path,
                "pre_path": s.path,
                "reverted_version": last.summary() if last else None,
                "current_version": cur.summary() if cur else None,
                "diff": diff(last.content, cur.content, "reverted", "current")
                if last and cur and last.id != cur.id else None,
                "conflicting_memory_id": s.blocker[0] if s.blocker else None,
                "conflicting_path": s.blocker[1] if s.blocker else None,
            })
        else:
            actions.append({**base, "action": s.action, "old_path": s.old_path,
                            "path": s.path, "content_changed": s.content_changed,
                            "forced": s.forced, "memory_version_id": s.version_id})
    return {
        "type": "memfs_revert", "id": revert_id, "target": target, "dry_run": dry_run,
        "force": force, "created_at": created_at, "created_by": actor,
        "complete": not conflicts, "actions": actions, "conflicts": conflicts,
        "unchanged": unchanged,
        "undo": f"memfs session revert {revert_id}" if revert_id else None,
    }


def render(r: Mapping[str, Any]) -> str:
    """The human form of :func:`result` (``memfs session revert`` without ``--json``)."""
    t = r["target"]
    head = "dry run: would revert" if r["dry_run"] else "reverted"
    what = f"session {t['id']}" if t["type"] == "session" else f"revert {t['id']}"
    n = len(r["actions"])
    lines = [f"{head} {what}: {n} memor{'y' if n == 1 else 'ies'}, "
             f"{len(r['conflicts'])} conflict{'' if len(r['conflicts']) == 1 else 's'}, "
             f"{len(r['unchanged'])} unchanged"]
    stores = {x["memory_store_id"] for k in ("actions", "conflicts", "unchanged") for x in r[k]}

    def at(x: Mapping[str, Any], path: str | None) -> str | None:
        """A path, with its store's id when the revert spans several stores."""
        return f"{x['memory_store_id']}:{path}" if len(stores) > 1 and path else path

    for a in r["actions"]:
        force = "  (forced)" if a["forced"] else ""
        old, new = at(a, a["old_path"]), at(a, a["path"])
        if a["action"] == "delete":
            lines.append(f"  delete    {old}{force}")
        elif a["action"] == "recreate":
            lines.append(f"  recreate  {new}{force}")
        elif a["old_path"] != a["path"]:
            extra = " (and content)" if a["content_changed"] else ""
            lines.append(f"  rename    {old} -> {new}{extra}{force}")
        else:
            lines.append(f"  restore   {new}{force}")
    for c in r["conflicts"]:
        where = at(c, c["path"] or c["pre_path"]) or c["memory_id"]
        lines.append(f"  CONFLICT  {where}: {c['reason']}: {c['message']}")
        for label, v in (("reverted", c["reverted_version"]), ("current ", c["current_version"])):
            if v and c["reason"] != "path_taken":
                who = v["created_by"]
                who = "-" if not who else f"{who['type']}:{list(who.values())[1]}"
                size = "redacted" if v["redacted_at"] else (
                    "-" if v["content_size_bytes"] is None else f"{v['content_size_bytes']} B")
                lines.append(f"    {label}: {v['operation']} {v['path'] or ''} by {who} at "
                             f"{v['created_at']} ({v['memory_version_id']}, {size})")
        if c["diff"]:
            lines += ["    " + d for d in c["diff"].splitlines()]
    if r["id"]:
        lines.append(f"revert id: {r['id']}  (undo it: {r['undo']})")
    elif not r["dry_run"] and not r["actions"]:
        lines.append("nothing was written")
    if r["conflicts"]:
        lines.append("left unreverted: see the conflicts above (--force overwrites the "
                     "'changed' ones)")
    return "\n".join(lines)
