"""``memfs run --resume SESSION``: a new session that goes on from an old one (SPEC §9).

It gets the old session's attachments, each as it was (the store, its access, scope and
instructions, a snapshot's time) unless the launch names its own (``--store``, ``--spec``);
``--instructions`` still applies to them. Its metadata points to the old session and holds
what makes the old conversation's last messages again (:mod:`.history`), which the prompt
file ends with. The old session must be one the launcher sees: on a server, one of its key's
workspace; on a local database, the new session is of the old one's workspace, so that a
store of another is not found."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Conflict, InvalidRequest
from ..models import SNAPSHOT_KEY, Session
from .history import HistoryMark, history_metadata, mark_history
from .plan import Attachment, Resume

if TYPE_CHECKING:
    from ..client import Client
    from ..store import Store


def attachments_of(old: Session) -> list[Attachment]:
    """The old session's attachments, as ``--store`` would give them, by store id."""
    out = []
    for r in old.resources:
        snapshot = old.metadata.get(SNAPSHOT_KEY + r.memory_store_id)
        out.append(Attachment(
            r.memory_store_id, r.access, r.instructions, explicit_access=True,
            scope=r.memfs_scope,
            # The AT it resolved to is the note's first word (prompt.snapshot_note).
            at=snapshot.split()[0] if snapshot else None))
    return out


def prepare(store: Store | Client, resume: Resume,
            attachments: list[Attachment]) -> tuple[Session, list[Attachment], dict[str, str]]:
    """The old session, the attachments of the new one (``attachments`` when given, else
    the old one's) and the metadata that says what the new one resumes.

    :raises NotFound: no such session (or not one this credential sees).
    :raises Conflict: the old session is still running.
    :raises InvalidRequest: the old session attached no store and no ``--store`` is given.
    """
    old = store.sessions.get(resume.session_id)
    if old.status == "running":
        # Its mounts may still record tool events of a time before the history's mark, which
        # would change the block memfs session prompt makes again.
        raise Conflict(f"session {old.id} is still running: resume it once it has ended")
    if not attachments:
        attachments = attachments_of(old)
        if not attachments:
            raise InvalidRequest(f"session {old.id} attached no memory store: give --store")
    mark: HistoryMark | None = None
    if resume.messages > 0:
        mark = mark_history(store, old.id, resume.messages, resume.budget)
    return old, attachments, history_metadata(mark, old.id)


def workspace_of(store: Store | Client, session_id: str) -> dict[str, Any]:
    """``sessions.create``'s workspace argument for a session resuming ``session_id``: on a
    local database the old session's workspace; a server's key has but one (nothing to
    pass)."""
    from ..store import Store

    if isinstance(store, Store):
        return {"workspace": store.sessions.workspace_of(session_id)}
    return {}
