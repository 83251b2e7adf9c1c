"""Dreams (API.md §5; :mod:`memfs.dreams` runs them in this process)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .call import Call


async def create_dream(c: Call) -> Any:
    from ..dreams.dreamer import dreamer_for
    from ..dreams.runner import identity

    b = c.body
    dream = await c.run(c.store.dreams.create, b.get("inputs"), b.get("model"),
                        instructions=b.get("instructions"),
                        output_behavior=b.get("output_behavior"), runner=identity(),
                        workspace=c.workspace)
    dreamer_for(c.store).start(dream.id)
    return dream


async def retrieve_dream(c: Call) -> Any:
    return await c.run(c.store.dreams.get, c.p["dream_id"])


async def list_dreams(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.dreams.list,
        statuses=q.texts("statuses"),
        include_archived=q.flag("include_archived", False),
        created_at_gt=q.text("created_at[gt]"),
        created_at_lt=q.text("created_at[lt]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        workspace=c.workspace,
    )


async def archive_dream(c: Call) -> Any:
    return await c.run(c.store.dreams.archive, c.p["dream_id"])


async def cancel_dream(c: Call) -> Any:
    from ..dreams.dreamer import dreamer_for

    dream = await c.run(c.store.dreams.cancel, c.p["dream_id"])
    dreamer_for(c.store).cancel(dream.id)
    return dream
