"""Runtime imports point down only (docs/architecture.md, "Packages and modules"), checked
with an AST walk in the spirit of s3ql's check_imports.py. Imports under ``if TYPE_CHECKING:``
do not count."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import memfs

PACKAGE = Path(memfs.__file__).parent

#: module -> the memfs modules it may import at run time ("*": any). Every top-level module
#: and package is named (test_the_table_names_every_module_and_package).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    # The wire shapes of models declared once (to_dict, from_dict, JSON Schema): pure.
    "shapes": set(),
    "models": {"shapes"},
    "rules": {"errors", "models"},
    "protocol": {"errors", "models"},
    # The one rule for the failures of background services (said once, retried, never fatal):
    # what the mount's services, the indexer and the daemons share.
    "background": {"errors"},
    # The databases (memfs/backends/: SQLite, PostgreSQL, their watches, open_database, the
    # WAL's checkpointer thread, by the rule of background work); the schema and its
    # migrations are the store's (memfs.store.schema).
    "backends": {"background", "errors", "models"},
    # recall: the search and the indexer over the store's tables (memfs.recall), below it,
    # and its tables' SQL (memfs.recall.schema), a migration of both backends.
    "store": {"backends", "recall", "rules", "errors", "models"},
    # The mount (memfs/fuse/: the tree, the handlers, .history and .search, tool events, the
    # background services, a session's filesystem, the daemons' runtime): stores only through
    # StoreAPI; the launcher's memory prompt (memfs.launcher.prompt, over the models only) for
    # .sessions/*/prompt.md, what `memfs session prompt` prints.
    "fuse": {"protocol", "background", "launcher", "rules", "errors", "models"},
    "client": {"protocol", "rules", "errors", "models"},
    # The session launcher (memfs run, memfs/launcher/): a composition root over the store or
    # a server's client; the API and the server (memfs.daemons.server) only for a local
    # session's API; linux for namespaces, mounts and the parent-death signal; its session
    # spec files (spec.py) check their shape by the rules, and look stores up through StoreAPI.
    "launcher": {"store", "client", "api", "daemons", "backends", "protocol", "rules", "linux",
                 "errors", "models"},
    # Running dreams (memfs/dreams/): over the store, with the memory tool; a dream run by a
    # command (memfs dream -- CMD) is launched like memfs run.
    "dreams": {"store", "tools", "launcher", "errors", "models"},
    # The search index, its providers and the ranking: over the store's tables (the store
    # hands itself in), below it; its writes name their scopes (memfs.backends.scopes).
    "recall": {"background", "backends", "rules", "errors", "models"},
    # The Console (like the API): the store, its errors and models, never the
    # filesystem or the API module (the app that mounts it hands it what it needs); recall's
    # words mark a question's words in a snippet.
    # The API's watch of the live streams' credentials is handed in, imported for typing only.
    "console": {"protocol", "store", "sessions", "errors", "models", "rules", "transfer",
                "recall"},
    # The HTTP API (memfs/api/, with its declared inputs, memfs.api.spec): over the store;
    # dreams and the Console only when an app is made (create_app), never the filesystem; the
    # one watch of the live streams' credentials (memfs.api.grants: its streams', and the
    # Console's live pages', which it hands the watch) by the rule of background work.
    "api": {"store", "transfer", "backends", "dreams", "console", "background", "rules",
            "errors", "models", "shapes"},
    # The package's own names (``from memfs import Actor``), and ``python -m memfs``.
    "__init__": {"store", "rules", "errors", "models"},
    "__main__": {"cli"},
    # Helpers beside the layers: the launcher's kernel calls,
    # the SDK's memory tool (memfs/tools/, over any StoreAPI).
    "linux": set(),
    # (The launcher's pinned block, memfs.launcher.pinned over the models alone: the memory
    # tool returns the text a session's prompt holds.)
    "tools": {"toolkit", "launcher", "rules", "errors", "models"},
    # What a tool for agents needs over any StoreAPI without an agent SDK (memfs/toolkit/: a
    # store call, its drivers, a tool call's event pair): the memory tool's and the MCP
    # server's.
    "toolkit": {"rules", "errors", "models"},
    # The MCP server (memfs/mcp/: the tools, resources and instructions over any StoreAPI or
    # AsyncClient, with the official SDK): the launcher's memory prompt for its facts; and
    # /mcp on memfs serve (memfs.mcp.http), behind the API's gate, its tools calling the API
    # in process through a client.
    "mcp": {"toolkit", "launcher", "api", "client", "protocol", "rules", "errors", "models"},
    # Import and export (memfs/transfer/: the archive format, plain files, the response that
    # streams an export), over the store: what the API, the Console and the CLI share.
    "transfer": {"store", "rules", "errors", "models"},
    # The CLI, which may import everything.
    # The processes memfs runs until stopped (memfs/daemons/): their logs (the CLI's too), a
    # time-travel mount's snapshot (over any StoreAPI); the indexer process a mount daemon
    # starts (python -m memfs.daemons.indexworker): the store, the indexer and ranking of
    # recall, the parent-death signal; the mount daemon (memfs mount: one mount, over
    # fuse/runtime.py; and what every mount daemon needs of the store, the client and the
    # indexer), and a session's (python -m memfs.daemons.sessionfs: its stores in one
    # filesystem); memfs serve's server (the API's app under hypercorn, whose internals only
    # hypercorn_glue.py touches); the expiry sweep that the server and a local mount daemon
    # run, a thread by the rule of background work; the server's /mcp (memfs.mcp.http).
    "daemons": {"fuse", "client", "store", "api", "mcp", "backends", "recall", "linux",
                "protocol", "background", "rules", "errors", "models"},
    "cli": {"*"},
}


def _files(name: str) -> list[Path]:
    """The source files of ``memfs.<name>``: a module's file, or every file of a package."""
    if (PACKAGE / name).is_dir():
        return sorted((PACKAGE / name).rglob("*.py"))
    return [PACKAGE / f"{name}.py"]


def runtime_imports(name: str) -> set[str]:
    """The top-level memfs modules and packages that ``memfs.<name>`` (a module, or a
    package and all of its modules) imports at run time, itself excepted."""
    found: set[str] = set()
    for path in _files(name):
        depth = len(path.relative_to(PACKAGE).parts) - 1  # 0: memfs/x.py, 1: memfs/pkg/x.py
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                if node.level <= depth:  # within its own package
                    continue
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(a.name for a in node.names)
            elif (node.module or "").startswith("memfs."):
                found.add(node.module.split(".")[1])  # type: ignore[union-attr]
    return found - {name}


def modules() -> set[str]:
    """Every top-level module and package of memfs."""
    return {p.stem for p in PACKAGE.iterdir()
            if p.suffix == ".py" or (p / "__init__.py").exists()}


#: The modules left loose at the top of memfs/ (besides ``__init__`` and ``__main__``), each with
#: why it is not in a package (docs/architecture.md says the same). At most 8: a new module
#: belongs to a package, or says here why it cannot.
LOOSE: dict[str, str] = {
    "errors": "every layer's exceptions, and WIRE, the one table of how each leaves memfs",
    "shapes": "a model's wire shape declared once, below the models every layer imports",
    "models": "the objects of a store, which every layer passes",
    "rules": "every limit and input rule, which the store, the mount, the client and the "
             "launcher apply",
    "protocol": "StoreAPI and SearchAPI, the seam a mount is written against, which the "
                "store and the client both implement",
    "background": "the failure rule of every background service (fuse, recall, backends, "
                  "the API's grant watch), below all of them",
    "linux": "the namespaces, mounts and parent-death signal, which the PID namespace's init "
             "(launcher/pidinit.py) loads by its file path with the standard library alone",
}


def test_at_most_eight_loose_modules_each_with_its_reason() -> None:
    """A module added at the top of memfs/ fails here: it goes into a package, or into
    LOOSE with its reason (and LOOSE stays at most 8)."""
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert len(LOOSE) <= 8 and all(LOOSE.values())
    assert loose == set(LOOSE), (
        f"loose at the top of memfs/ but not in LOOSE: {sorted(loose - set(LOOSE))}; "
        f"in LOOSE but gone: {sorted(set(LOOSE) - loose)}")


def test_the_table_names_every_module_and_package() -> None:
    """A module or package added (or moved) must say what it may import."""
    missing, gone = modules() - set(ALLOWED), set(ALLOWED) - modules()
    assert not missing, f"add to ALLOWED (what each may import): {sorted(missing)}"
    assert not gone, f"ALLOWED names what memfs no longer has: {sorted(gone)}"


def test_each_layer_imports_only_what_is_below_it() -> None:
    for module, allowed in ALLOWED.items():
        if "*" in allowed:  # anything
            continue
        extra = runtime_imports(module) - allowed
        assert not extra, f"memfs.{module} imports {sorted(extra)} (allowed: {sorted(allowed)})"


def test_nothing_imports_the_cli() -> None:
    for path in PACKAGE.iterdir():  # every module and package (memfs/cli/ is the CLI's)
        is_module = path.suffix == ".py" or (path / "__init__.py").exists()
        if is_module and path.stem not in ("cli", "__main__"):
            assert "cli" not in runtime_imports(path.stem), path.name


def test_the_filesystem_knows_no_store_server_or_http() -> None:
    for path in _files("fuse"):
        text = path.read_text()
        assert "httpx" not in text and "sqlite" not in text, path.name
    assert not runtime_imports("fuse") & {"store", "api", "client", "backends"}


def test_the_backends_use_trio_only_in_the_watches() -> None:
    for path in _files("backends"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and path.stem not in ("watch",
                                                                                 "pgwatch"):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                    node.module or ""]
                assert not any(n.split(".")[0] in ("trio", "pyfuse3", "httpx") for n in names), (
                    path.name)


def test_store_and_client_implement_the_protocol_a_mount_is_written_against() -> None:
    """Store and Client have the parts StoreAPI names, each with the methods (and at least
    the parameters) of that part's protocol."""
    import inspect
    import typing

    from memfs.client import Client
    from memfs.protocol import SearchAPI, StoreAPI
    from memfs.store import Store

    store = Store(":memory:")
    client = Client("http://127.0.0.1:9")

    def methods(proto: type) -> dict[str, Any]:
        return {n: m for n, m in vars(proto).items() if not n.startswith("_") and callable(m)}

    try:
        assert isinstance(store, StoreAPI) and isinstance(client, StoreAPI)
        assert isinstance(store, SearchAPI) and isinstance(client, SearchAPI)
        checked = 0
        for protocol in (StoreAPI, SearchAPI):
            for name, member in vars(protocol).items():
                if isinstance(member, property):  # a part: its protocol's methods
                    part = typing.get_type_hints(member.fget)["return"]
                    wanted = {f"{name}.{m}": f for m, f in methods(part).items()}
                elif not name.startswith("_") and callable(member):
                    wanted = {name: member}
                else:
                    continue
                for dotted, fn in wanted.items():
                    want = set(inspect.signature(fn).parameters) - {"self"}
                    for impl in (store, client):
                        have_fn: Any = impl
                        for attr in dotted.split("."):
                            have_fn = getattr(have_fn, attr)
                        have = set(inspect.signature(have_fn).parameters)
                        assert want <= have, (type(impl).__name__, dotted, want - have)
                        checked += 1
        assert checked > 40
    finally:
        store.close()
        client.close()


#: Each package's modules, in the order they build on each other (as its __init__ says): a
#: module may import only those before it (imports for type checking alone do not count).
ORDER: dict[str, list[str]] = {
    # Plain functions first (schema: a package, the schema and both backends' migrations; the
    # plan of a revert and an archive's rows, both pure; what a memory write reads first, in
    # one statement), then the core (the database, its transactions) and the parts of the
    # Store, each handed the parts before it it calls.
    "store": ["common", "paging", "schema", "rows", "pinned", "revert", "restore", "frontmatter",
              "look", "base", "feed",
              "stores", "memories", "versions", "sessions", "agents", "events", "undo", "dreams",
              "archive", "search", "keys", "idempotency", "typed", "transcript"],
    # The plumbing (declared inputs, errors, the bounds on unfinished uploads, bodies, group
    # commit, the Call, the gate, the watch of the streams' credentials, the streams), the
    # resources, then the route table, its
    # OpenAPI document, the health probes and the app.
    "api": ["spec", "errortable", "uploads", "body", "batching", "call", "limits", "auth",
            "grants", "streams", "stores", "mounts", "memories", "versions", "agents", "sessions",
            "dreams", "archive", "search", "typed", "keys", "routes", "openapi", "health",
            "app"],
    # The typed seam, what a write serialises on, the files of an SQLite database, what a
    # --db value names, SQLite's WAL checkpointer, the two databases, a whole database copied
    # between them, then the watches (the inotify one hands a postgresql:// URL to pgwatch).
    "backends": ["protocol", "scopes", "files", "targets", "checkpoint", "sqlite", "postgresql",
                 "copy", "pgwatch", "watch"],
    # The framework (the global options, the command class, the groups and the Context, the
    # helpers of the commands on a store), then the commands (`memfs db` over dbadmin: a whole
    # database's schema checked, migrated and copied; typed: `stores describe` on the stores
    # group, and `expire`; mcp: `memfs mcp`, which reads a spec file as `memfs session` does).
    "cli": ["globals", "shared", "base", "common", "stores", "memories", "versions",
            "sessions", "archive", "typed", "launch", "mcp", "dreams", "dbadmin", "db",
            "search", "keys"],
    # What is scratch, the tree and what needs no pyfuse3, the kernel's calls, pyfuse3's
    # request reader, .history, .search, .describe and .sessions as handler objects, the parts
    # Operations holds (core: the Mount, feed, buffers) and Operations, then what runs the
    # handlers: the services, a session's filesystem, the runtime the daemons share.
    "fuse": ["scratch", "tree", "describe", "toolevents", "history", "xattrs", "sessionlog",
             "search", "spin", "kernel", "reader", "dotdirs", "sessions_dir", "core", "feed",
             "buffers", "ops", "watch", "session", "runtime"],
    # The wire (requests, encoding), its decoding into models and errors, the change stream's
    # frames, the operations written once, then the two clients that drive them.
    "client": ["wire", "decode", "feed", "ops_sessions", "ops", "sync_parts", "sync", "aio_parts",
               "aio"],
    # What needs no launcher (the init of the agent's PID namespace, a script of the standard
    # library, a resumed session's history, the prompt, the plan, what a resume attaches, the
    # session spec files, the agent, processes, the scratch
    # root, the reaping of dead launchers' sessions, the session API), then a launch's state
    # and the functions over it, one module per concern, and the runner that calls them.
    "launcher": ["pidinit", "pinned", "history", "prompt", "plan", "resume", "spec", "agent",
                 "procs", "sandbox", "reap", "sessionapi", "state", "setup", "credential",
                 "mounts", "command", "runner"],
    # What the model reads and how it is called, then one dream, a process's dreams, and a
    # dream run by a command.
    "dreams": ["prompt", "model", "runner", "dreamer", "command"],
    # The processes memfs runs until stopped: what only they need (the expiry sweep of the
    # server and the mounts among it), then each process.
    "daemons": ["logs", "expiry", "snapshot", "hypercorn_glue", "indexworker", "mount",
                "sessionfs", "server"],
    # How progress is reported, the archive format (both ways), plain files walked and
    # imported, what an upload is, then the response that streams an export.
    "transfer": ["progress", "archive", "files", "upload", "response"],
    # The tables, which memories a search considers (its scope), the words index's storage,
    # the words (stems, BM25) and their queue, the providers, a memory's passages, the
    # indexer, the ranking, then a mount daemon's indexer process (what it runs, and what
    # starts it and asks it).
    "recall": ["schema", "scope", "wordsindex", "words", "wordsqueue", "embeddings", "passages",
               "indexer", "search", "worker", "supervisor"],
}


@pytest.mark.parametrize("package", sorted(ORDER))
def test_each_module_of_a_package_builds_only_on_those_before_it(package: str) -> None:
    order = ORDER[package]
    folder = PACKAGE / package
    parts = [p.stem for p in folder.glob("*.py")] + [
        p.name for p in folder.iterdir() if (p / "__init__.py").exists()]
    assert sorted(parts) == sorted([*order, "__init__"])
    for i, name in enumerate(order):
        # A module, or a subpackage (its modules' imports of the package's modules count).
        sub = folder / name
        files = sorted(sub.rglob("*.py")) if sub.is_dir() else [folder / f"{name}.py"]
        siblings: set[str] = set()
        for path in files:
            level = len(path.relative_to(folder).parts)  # `from .` of the package's modules
            tree = ast.parse(path.read_text())
            typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                           and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
            siblings |= {node.module.split(".")[0] if node.module else a.name
                         for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                         and node.level == level and id(node) not in typing_only
                         for a in node.names}
        later = siblings - set(order[:i])
        assert not later, f"memfs.{package}.{name} imports {sorted(later)}, which build on it"


def test_the_tree_history_and_search_need_no_pyfuse3() -> None:
    for name in ("tree", "toolevents", "history", "search", "spin"):
        text = (PACKAGE / "fuse" / f"{name}.py").read_text()
        assert "import pyfuse3" not in text and "from pyfuse3" not in text, name
