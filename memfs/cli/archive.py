"""``memfs export`` and ``memfs import``: a store to one portable archive and back (the format
and the walks: :mod:`memfs.transfer`), with a progress bar on a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import click

from .. import errors
from ..store import Store
from .base import Context, cli, fail, pass_ctx
from .common import actor
from .stores import warn_namesakes


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _progress(ctx: Context, length: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal (and not --json); else nothing."""
    if not _stderr_is_tty() or ctx.as_json or not length:
        yield lambda n: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar.update
        bar.update(max(0, length - bar.pos))  # entries that were not counted (ignored ones)


@cli.command("export")
@click.argument("store_ref", metavar="STORE")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the archive here (default: stdout, when it is not a terminal).")
@click.option("--history", is_flag=True,
              help="Every retained version (with ids, times, actors, redactions), not only "
              "the live memories.")
@pass_ctx
def export_cmd(ctx: Context, store_ref: str, output: str | None, history: bool) -> None:
    """Write a store to one portable archive (gzip JSON Lines, docs/EXPORT-FORMAT.md).

    Example:

    \b
        memfs export Notes --history -o notes.memfs.gz
    """
    from .. import transfer

    store = ctx.store
    s = store.stores.resolve(store_ref)
    if output is None and sys.stdout.isatty():
        fail("the archive is binary: give -o FILE or redirect stdout", 2)
    length = store.archive.count_export(s.id, history=history) if isinstance(store, Store) else None
    stats: dict[str, Any] = {}
    tmp = None
    with _progress(ctx, length, "exporting") as bar:
        chunks = (transfer.export_archive(store, s.id, history=history, progress=bar,
                                          stats=stats) if isinstance(store, Store)
                  else store.archive.export_archive(s.id, history=history))
        if output is None:
            out = sys.stdout.buffer
        else:
            # A file appears whole or not at all: written aside, renamed when complete.
            tmp = f"{output}.partial-{os.getpid()}"
            try:
                out = open(tmp, "wb")  # noqa: SIM115 (closed below)
            except OSError as e:
                fail(f"cannot write {output}: {e.strerror or e}")
        size = 0
        try:
            for chunk in chunks:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            if tmp is not None:
                os.fsync(out.fileno())
                out.close()
                os.replace(tmp, output)  # type: ignore[arg-type]
        except OSError as e:
            fail(f"cannot write {output or 'stdout'}: {e.strerror or e}")
        finally:
            if tmp is not None:
                out.close()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
    summary: dict[str, object] = {
        "store": s.to_dict(), "file": output, "bytes": size, "history": history,
        **{k: stats[k] for k in ("memories", "versions", "redacted") if k in stats}}
    what = (f"{stats['memories']} memories, {stats['versions']} versions"
            if stats else "the store")
    human = f"exported {what} of {s.name} ({s.id}) to {output or 'stdout'} ({size} bytes)"
    if output is None:  # stdout holds the archive: the summary goes to stderr
        click.echo(json.dumps(summary) if ctx.as_json else human, err=True)
    else:
        ctx.output(summary, human)


def _import_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"  skipped {e['path']}: {e['reason']}" for e in summary.get("skipped", [])]
    lines += [f"  ignored {e['path']}: {e['reason']}" for e in summary.get("ignored", [])]
    return lines


def _count_files(root: str) -> int:
    """The files an import of ``root`` will look at (hidden directories are not walked)."""
    n = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        n += sum(not f.startswith(".") for f in files)
    return n


@cli.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option("--into", "into_ref", metavar="STORE", default=None,
              help="Add the memories to this existing store (new ids).")
@click.option("--name", default=None,
              help="Import as a new store of this name (from an archive: a copy, new ids).")
@click.option("--partial", is_flag=True,
              help="Import what is valid and list the rest (default: all or nothing).")
@pass_ctx
def import_cmd(ctx: Context, source: str, into_ref: str | None, name: str | None,
               partial: bool) -> None:
    """Import an archive (from `memfs export`), a directory of text files, or a zip of them.

    An archive is restored exactly (same ids) into a new store; if an id is taken, nothing
    is imported unless --name (a copy with new ids) or --into says otherwise. A directory or
    zip becomes a new store named after it (or --name, --into); hidden files and directories
    (.git) are ignored; every file that breaks a rule is listed and, without --partial,
    nothing is imported.

    Example:

    \b
        memfs import notes.memfs.gz
        memfs import ~/notes --name Notes
    """
    from .. import transfer

    if into_ref is not None and name is not None:
        raise click.UsageError("give --into or --name, not both")
    # A restore into a new database is what an import without --into is: it makes a missing
    # database (the fourth command that does); --into names a store of an existing one.
    store = ctx.open(create=into_ref is None)
    into = store.stores.resolve(into_ref).id if into_ref is not None else None
    try:
        if os.path.isdir(source):
            if not isinstance(store, Store):
                fail("a directory imports into a local database only; zip it and import the "
                     "zip (`cd DIR && zip -r ../notes.zip .`)", 2)
            if into is None and name is None:
                name = os.path.basename(os.path.abspath(source))
            count = _count_files(source) if _stderr_is_tty() else None
            with _progress(ctx, count, "importing") as bar:
                summary = transfer.import_files(
                    store, lambda ignored: transfer.walk_directory(source, store.limits,
                                                                   ignored),
                    name=name, into=into, partial=partial, actor=actor(), progress=bar)
        else:
            try:
                raw = open(source, "rb")  # noqa: SIM115 (closed below)
            except OSError as e:
                fail(f"cannot read {source}: {e.strerror or e}")
            with raw:
                kind = transfer.sniff(raw.read(4))
                raw.seek(0)
                if kind == "zip" and into is None and name is None:
                    name = os.path.splitext(os.path.basename(source))[0]
                if not isinstance(store, Store):  # a server's client: the server imports
                    summary = store.archive.import_upload(raw, name=name, into=into,
                                                          partial=partial)
                else:
                    size = os.fstat(raw.fileno()).st_size if kind == "archive" else None
                    if kind == "zip":
                        with contextlib.suppress(Exception):
                            size = len(zipfile.ZipFile(raw).infolist())
                        raw.seek(0)
                    with _progress(ctx, size, "importing") as bar:
                        summary = transfer.import_upload(
                            store, raw, name=name, into=into, partial=partial,
                            actor=actor(), progress=bar)
    except errors.ImportRejected as e:
        if ctx.as_json:
            click.echo(json.dumps({"imported": False, "error": e.message,
                                   "skipped": e.entries}, indent=2, ensure_ascii=False))
        else:
            click.echo("\n".join(_import_lines({"skipped": e.entries})))
        raise
    s = summary["store"]
    ids = ("ids kept" if summary["ids"] == "kept" else "new ids")
    human = [f"imported {summary['memories']} memories ({summary['versions']} versions, "
             f"{summary['redacted']} redacted) into {s['name']} ({s['id']}), {ids}"]
    ctx.output(summary, "\n".join(human + _import_lines(summary)))
    if summary.get("created_store"):
        warn_namesakes(store, s["id"], s["name"])
