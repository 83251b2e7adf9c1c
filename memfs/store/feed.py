"""The change feed of a store: what mounts, streams and the indexer follow."""

from __future__ import annotations

from ..errors import FeedGap
from ..models import Change
from .base import Part


class Feed(Part):
    """A store's change feed (a part of :class:`memfs.store.Store`)."""

    def last(self, store_id: str) -> int:
        """The newest change sequence number of the store (0 if none)."""
        row = self.core.one("SELECT max(seq) FROM changes WHERE store_id = ?", (store_id,))
        return int(row[0] or 0) if row else 0

    def since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        """The store's changes after ``seq``, oldest first (at most ``limit``).

        :raises FeedGap: changes after ``seq`` were pruned (:attr:`feed_keep`): the follower
            must reload the whole tree and go on from :meth:`last`.
        """
        with self.core.read() as c:
            rows = c.execute(
                "SELECT * FROM changes WHERE store_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (store_id, seq, limit),
            ).fetchall()
            horizon = c.execute(
                "SELECT changes_pruned_seq FROM stores WHERE id = ?", (store_id,)
            ).fetchone()
        if horizon is not None and seq < horizon[0]:
            raise FeedGap(
                f"the change feed of {store_id} no longer holds the changes after {seq} (pruned "
                f"up to {horizon[0]}): reload the whole tree"
            )
        return [
            Change(r["seq"], r["store_id"], r["op"], r["memory_id"], r["path"], r["old_path"])
            for r in rows
        ]
