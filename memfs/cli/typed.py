"""Typed memories (SPEC §8) on the command line: ``memfs stores describe`` (what a store holds)
and ``memfs expire`` (its expired memories swept by hand, as the server and a mount daemon do
in the background). Both print what the store's ``typed`` part answers
(:class:`memfs.store.typed.Typed`, or a server's through its client): ``--json`` the object
itself, else a text for people that says what to do next (turn a store's expiry on, undo a
sweep)."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import Any

import click

from .base import Context, cli, pass_ctx
from .common import expires_text, typed, when
from .shared import table as _table
from .stores import stores

#: How a person turns a store's expiry on (``memfs_expiry``, a store metadata key).
TURN_ON = "memfs stores update {store} --metadata memfs_expiry=on"


@stores.command("describe")
@click.argument("store_ref", metavar="STORE")
@pass_ctx
def stores_describe(ctx: Context, store_ref: str) -> None:
    """Describe what a store holds: its memories counted by type, top directory and tag;
    those that expire within 7 days and those that have expired (and whether the store
    deletes them or only reports them); the oldest and newest change; the memories whose
    front matter memfs could not fully use (warnings); and the store's types.

    --json prints the description object (memfs_store_description), as the API and a
    mount's .describe file give it.

    Example:

    \b
        memfs stores describe notes
        memfs stores describe notes --json | jq .by_type
    """
    s = ctx.store.stores.resolve(store_ref)
    d = typed(ctx.store).describe(s.id)
    ctx.output(d, describe_text(d, shlex.quote(store_ref)))


def describe_text(d: dict[str, Any], ref: str) -> str:
    """The human form of a description; ``ref`` names the store in the commands it suggests."""
    now = datetime.now(UTC)
    lines = [f"{d['name']} ({d['memory_store_id']}): {_count(d['memories'])}, "
             f"{d['content_size_bytes']} bytes, {d['pinned']} pinned"]
    if d["expiry"] == "on":
        lines.append("expiry: on (expired memories leave search and counts, and are deleted "
                     f"as versions: by the server or a mount, or by hand with memfs expire {ref})")
    else:
        lines.append("expiry: report (expired memories are only reported, never deleted; "
                     "turn it on with: " + TURN_ON.format(store=ref) + ")")
    for title, key in (("by type", "by_type"), ("by directory", "by_directory"),
                       ("by tag", "by_tag")):
        counts = ", ".join(f"{k} {v}" for k, v in d[key].items()) or "-"
        lines.append(f"{title + ':':14}{counts}")
    soon, expired = d["expiring_soon"], d["expired"]
    lines.append(f"expiring within {soon['within_days']} days: {soon['count']}")
    lines += _listed(soon["memories"], soon["count"],
                     lambda m: f"{m['memory_type'] or '-'}  {expires_text(m['expires_at'], now)}")
    lines.append(f"expired: {expired['count']}"
                 + (" (only reported: expiry is report)" if expired["count"]
                    and d["expiry"] != "on" else ""))
    lines += _listed(expired["memories"], expired["count"],
                     lambda m: f"{m['memory_type'] or '-'}  since {when(m['expires_at'])}")
    for title, key in (("oldest change", "oldest_change"), ("newest change", "newest_change")):
        change = d[key]
        lines.append(f"{title}: " + ("-" if change is None
                                     else f"{change['path']}  {when(change['updated_at'])}"))
    warned = d["warnings"]
    lines.append(f"warnings: {warned['count']}")
    lines += [f"  {m['path']}: {w}" for m in warned["memories"] for w in m["warnings"]]
    if warned["count"] > len(warned["memories"]):
        lines.append(f"  … and {warned['count'] - len(warned['memories'])} more memories")
    types = d["types"]
    if types["source"] == "off":
        lines.append("types: off (store metadata memfs_types=off)")
    else:
        lines.append(f"types ({types['source']}):")
        rows = [(t["name"], t["directory"], f"{t['importance']:g}", t["scope"], t["expires"])
                for t in types["types"]]
        table = _table(("NAME", "DIRECTORY", "IMPORTANCE", "SCOPE", "EXPIRES"), rows)
        lines += ["  " + line for line in table.splitlines()]
    return "\n".join(lines)


def _listed(memories: list[dict[str, Any]], count: int, say: Any) -> list[str]:
    out = [f"  {m['path']}  {say(m)}" for m in memories]
    if count > len(memories):
        out.append(f"  … and {count - len(memories)} more")
    return out


def _count(n: int) -> str:
    return f"{n} memor{'y' if n == 1 else 'ies'}"


@cli.command("expire")
@click.argument("store_ref", metavar="STORE")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted, delete nothing.")
@pass_ctx
def expire(ctx: Context, store_ref: str, dry_run: bool) -> None:
    """Delete a store's expired memories now, as the server and a mount daemon do every
    minute: each as a `deleted` version by the expiry actor (svac_memfs_expiry), which `memfs
    versions restore` brings back, or all at once with the `memfs session revert` printed.

    A store made before typed memories only reports them (its expiry is `report`) until
    expiry is turned on: memfs stores update STORE --metadata memfs_expiry=on. A memory
    rewritten while the sweep ran is left alone (skipped).

    --json prints the sweep object (memfs_expiry_sweep).

    Example:

    \b
        memfs expire notes --dry-run
        memfs expire notes
    """
    s = ctx.store.stores.resolve(store_ref)
    r = typed(ctx.store).sweep(s.id, dry_run=dry_run)
    ctx.output(r, sweep_text(r, f"{s.name} ({s.id})", shlex.quote(store_ref)))


def sweep_text(r: dict[str, Any], store: str, ref: str) -> str:
    """The human form of a sweep of ``store``; ``ref`` names it in the commands it suggests."""
    lines: list[str] = []

    def each(items: list[dict[str, Any]]) -> None:
        lines.extend(f"  {m['path']}  ({m['memory_type'] or '-'}, expired {when(m['expires_at'])})"
                     for m in items)

    deleted, reported, skipped = r["deleted"], r["reported"], r["skipped"]
    if deleted:
        verb = "would delete" if r["dry_run"] else "deleted"
        lines.append(f"{verb} {_expired(len(deleted))} of {store}:")
        each(deleted)
        lines += [f"undo with: memfs session revert {rid}" for rid in r["reverts"]]
    if reported:
        lines.append(f"{_expired(len(reported))} of {store} only reported: the store's expiry "
                     "is report (a store made before typed memories, or memfs_expiry=report)")
        each(reported)
        lines.append("turn expiry on with: " + TURN_ON.format(store=ref))
    if skipped:
        lines.append(f"skipped {_count(len(skipped))} rewritten while the sweep ran "
                     "(no longer expired, or changed since it was read):")
        each(skipped)
    return "\n".join(lines) or f"nothing has expired in {store}"


def _expired(n: int) -> str:
    return f"{n} expired memor{'y' if n == 1 else 'ies'}"
