"""The route table, :data:`OPS`: every endpoint with its handler and its declared inputs
(:class:`Op`); the Starlette routes and ``/openapi.json`` both come from it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import errors
from ..models import ROLES
from ..rules import (
    DEFAULT_AROUND_CONTEXT,
    MAX_AROUND_CONTEXT,
    MAX_CHANGES_PAGE,
    MAX_EVENTS_PAGE,
    NAME_PATTERN,
    SHA256_PATTERN,
    Limits,
    path_pattern,
)
from . import search, spec, typed
from .agents import (
    AGENT_FIELDS,
    ENVIRONMENT_FIELDS,
    create_agent,
    create_environment,
    retrieve_agent,
    retrieve_environment,
)
from .archive import (
    export_store,
    import_store,
)
from .dreams import (
    archive_dream,
    cancel_dream,
    create_dream,
    list_dreams,
    retrieve_dream,
)
from .keys import create_key, list_keys, retrieve_key, revoke_key
from .memories import (
    create_memory,
    delete_memory,
    list_memories,
    retrieve_memory,
    update_memory,
)
from .mounts import (
    check_can_create,
    delete_path,
    delete_prefix,
    get_limits,
    get_snapshot,
    get_stats,
    get_tree,
    list_changes,
    record_store_events,
    rename_path,
    rename_prefix,
    resolve_store,
    store_namesakes,
    stream_changes,
    write_path,
)
from .sessions import (
    add_session_resource,
    archive_session,
    create_session,
    create_session_token,
    delete_session,
    delete_session_resource,
    list_session_events,
    list_session_resources,
    list_sessions,
    retrieve_session,
    retrieve_session_resource,
    revert_session,
    send_session_events,
    set_session_status,
    stream_session_events,
    update_session,
    update_session_resource,
)
from .spec import array, boolean, either, integer, obj, string, time
from .stores import (
    archive_memory_store,
    create_memory_store,
    delete_memory_store,
    list_memory_stores,
    retrieve_memory_store,
    update_memory_store,
)
from .versions import (
    list_memory_versions,
    redact_memory_version,
    restore_memory_version,
    retrieve_memory_version,
)

if TYPE_CHECKING:
    from .call import Call


@dataclass(frozen=True)
class Op:
    """One endpoint and its inputs, declared once (:mod:`memfs.api.spec`): ``query`` its query
    parameters, ``body`` its JSON body fields; requests are checked against them and
    ``/openapi.json`` is made of them. ``returns`` names its answer's component schema
    (``Page<X>`` for pages; a ``Stream``: SSE)."""

    method: str
    path: str
    handler: Callable[[Call], Awaitable[Any]]
    sdk: str
    query: tuple[spec.Param, ...] = ()
    body: tuple[spec.Param, ...] = ()
    returns: str = ""
    #: A memfs extension (not in the SDK): ``sdk`` then describes it.
    extension: bool = False
    #: The body is not JSON: the handler reads it itself (an upload).
    raw_body: bool = False
    #: What a session token may do here (:func:`.auth.authorize`): ``read`` / ``write`` the
    #: attached store in the path (read_write needed to write), ``session`` its own session
    #: in the path, ``open`` (no store or session in the path; the handler shows only the
    #: token's own); empty: refused (403), only a server key may. A store-scoped key has the
    #: same rights but ``session``.
    token: str = ""
    #: Only a key with the admin role may call it (managing keys).
    admin: bool = False


_MS = "/v1/memory_stores"
_MEM = _MS + "/{memory_store_id}/memories"
_VER = _MS + "/{memory_store_id}/memory_versions"
_SES = "/v1/sessions"
_DRM = "/v1/dreams"
_KEYS = "/v1/memfs/keys"
#: The default limits, which the store's checks read (the document is one for every server).
_LIM = Limits()


def _list(most: int | None = _LIM.max_page_size, limit: str = "") -> tuple[spec.Param, ...]:
    """A listing's ``limit`` (1 to ``most``; None: any more is read as the most) and
    ``page``."""
    return (integer("limit", minimum=1, maximum=most, description=limit),
            string("page", description="a next_page cursor of this listing"))


_LIST = _list()
_VIEW = (string("view", enum=("basic", "full")),)
#: A path, a memory's content: a value of the wrong type is the store's error for it.
_PATH: dict[str, Any] = {
    "invalid": errors.InvalidPath, "pattern": path_pattern(_LIM),
    "max_length": _LIM.max_path_bytes,
    "description": f"a memory path: at most {_LIM.max_path_bytes} bytes of UTF-8, in NFC"}
_PREFIX = {"invalid": errors.InvalidPath}
#: A store's name and description (memfs.rules.validate_name, _validate_description).
_NAME = {"min_length": 1, "max_length": _LIM.max_name_chars, "pattern": NAME_PATTERN}
_DESCRIPTION = {"max_length": _LIM.max_description_chars}
_CONTENT = {"invalid": errors.InvalidContent}
_EVENTS = array("events", description="the agent.tool_use/agent.tool_result events that report "
                "the write (a mount acting as a session)")


def _times(*ops: str) -> tuple[spec.Param, ...]:
    return tuple(time(f"created_at[{op}]") for op in ops)


OPS: list[Op] = [
    Op("POST", _MS, create_memory_store, "memory_stores.create",
       body=(string("name!", **_NAME), string("description", **_DESCRIPTION), obj("metadata")),
       returns="MemoryStore"),
    Op("GET", _MS, list_memory_stores, "memory_stores.list",
       query=(*_times("gte", "lte"), boolean("include_archived"), *_LIST),
       token="open", returns="Page<MemoryStore>"),
    Op("GET", _MS + "/{memory_store_id}", retrieve_memory_store, "memory_stores.retrieve",
       token="read", returns="MemoryStore"),
    Op("POST", _MS + "/{memory_store_id}", update_memory_store, "memory_stores.update",
       body=(string("name", **_NAME), string("description", **_DESCRIPTION), obj("metadata")),
       returns="MemoryStore"),
    Op("DELETE", _MS + "/{memory_store_id}", delete_memory_store, "memory_stores.delete",
       returns="Deleted"),
    Op("POST", _MS + "/{memory_store_id}/archive", archive_memory_store,
       "memory_stores.archive", returns="MemoryStore"),
    Op("POST", _MEM, create_memory, "memory_stores.memories.create", query=_VIEW,
       body=(string("path!", **_PATH), string("content!", **_CONTENT)), token="write",
       returns="Memory"),
    Op("GET", _MEM, list_memories, "memory_stores.memories.list",
       query=(string("path_prefix"), integer("depth", minimum=0), *_VIEW, *_LIST,
              *typed.LIST_FILTERS),
       token="read", returns="Page<MemoryListItem>"),
    Op("GET", _MEM + "/{memory_id}", retrieve_memory, "memory_stores.memories.retrieve",
       query=_VIEW, token="read", returns="Memory"),
    Op("POST", _MEM + "/{memory_id}", update_memory, "memory_stores.memories.update",
       query=_VIEW, body=(string("content", **_CONTENT), string("path", **_PATH),
                          obj("precondition")),
       token="write", returns="Memory"),
    Op("DELETE", _MEM + "/{memory_id}", delete_memory, "memory_stores.memories.delete",
       query=(string("expected_content_sha256", pattern=SHA256_PATTERN),), token="write",
       returns="Deleted"),
    Op("GET", _VER, list_memory_versions, "memory_stores.memory_versions.list",
       query=(string("memory_id"), string("operation", enum=("created", "modified", "deleted")),
              string("session_id"), string("api_key_id"), string("service_account_id"),
              string("user_id"), *_times("gte", "lte"), *_VIEW, *_LIST),
       token="read", returns="Page<MemoryVersion>"),
    Op("GET", _VER + "/{memory_version_id}", retrieve_memory_version,
       "memory_stores.memory_versions.retrieve", query=_VIEW, token="read",
       returns="MemoryVersion"),
    Op("POST", _VER + "/{memory_version_id}/redact", redact_memory_version,
       "memory_stores.memory_versions.redact", returns="MemoryVersion"),
    Op("POST", "/v1/agents", create_agent, "agents.create", body=AGENT_FIELDS,
       returns="Agent"),
    Op("GET", "/v1/agents/{agent_id}", retrieve_agent, "agents.retrieve",
       query=(integer("version"),), returns="Agent"),
    Op("POST", "/v1/environments", create_environment, "environments.create",
       body=ENVIRONMENT_FIELDS, returns="Environment"),
    Op("GET", "/v1/environments/{environment_id}", retrieve_environment,
       "environments.retrieve", returns="Environment"),
    Op("POST", _SES, create_session, "sessions.create",
       body=(either("agent", "string", "object"), string("environment_id"),
             array("resources"), obj("metadata"), string("title"), array("initial_events"),
             array("vault_ids", items="string"), obj("budget"),
             string("memfs_mount_root", description="memfs extension: the root the "
                    "launcher mounts the session's stores under")),
       returns="Session"),
    Op("GET", _SES, list_sessions, "sessions.list",
       query=(string("memory_store_id"), array("statuses[]", items="string"),
              boolean("include_archived"), string("order", enum=("asc", "desc")),
              *_times("gt", "gte", "lt", "lte"), *_LIST,
              *(string(n, description="refused: memfs cannot filter by it")
                for n in ("agent_id", "agent_version", "deployment_id"))),
       token="open", returns="Page<Session>"),
    Op("GET", _SES + "/{session_id}", retrieve_session, "sessions.retrieve",
       token="session", returns="Session"),
    Op("POST", _SES + "/{session_id}", update_session, "sessions.update",
       body=(obj("metadata"), string("title"), either("agent", "string", "object"),
             obj("budget"), array("vault_ids", items="string")), returns="Session"),
    Op("DELETE", _SES + "/{session_id}", delete_session, "sessions.delete",
       returns="Deleted"),
    Op("POST", _SES + "/{session_id}/archive", archive_session, "sessions.archive",
       returns="Session"),
    Op("GET", _SES + "/{session_id}/resources", list_session_resources,
       "sessions.resources.list", query=_list(MAX_EVENTS_PAGE), token="session",
       returns="Page<SessionResource>"),
    Op("POST", _SES + "/{session_id}/resources", add_session_resource,
       "sessions.resources.add (refused: memfs has no file resources)",
       body=(string("type"), string("file_id"), string("mount_path")), returns="Error"),
    Op("GET", _SES + "/{session_id}/resources/{resource_id}", retrieve_session_resource,
       "sessions.resources.retrieve (by sesrsc_ id or memory_store_id)",
       token="session", returns="SessionResource"),
    Op("POST", _SES + "/{session_id}/resources/{resource_id}", update_session_resource,
       "sessions.resources.update (refused for memory stores)",
       body=(string("authorization_token"),), returns="Error"),
    Op("DELETE", _SES + "/{session_id}/resources/{resource_id}", delete_session_resource,
       "sessions.resources.delete (refused for memory stores)", returns="Error"),
    Op("GET", _SES + "/{session_id}/events", list_session_events, "sessions.events.list",
       query=(array("types[]", items="string"), string("order", enum=("asc", "desc")),
              *_times("gt", "gte", "lt", "lte"),
              *_list(None, f"at most {MAX_EVENTS_PAGE} a page (more is read as "
                     f"{MAX_EVENTS_PAGE})"),
              string("memfs_around", description="memfs extension: the event with this id "
                     "and the events before and after it (types[] still applies; order, "
                     "page, limit and created_at do not)"),
              integer("memfs_context", minimum=0, maximum=MAX_AROUND_CONTEXT,
                      description="memfs extension: how many events before and after "
                      f"memfs_around (default {DEFAULT_AROUND_CONTEXT}; without memfs_around "
                      "it does nothing)")),
       token="session", returns="Page<Event>"),
    Op("POST", _SES + "/{session_id}/events", send_session_events, "sessions.events.send",
       body=(array("events!"), string("memory_store_id", description="memfs extension: the "
                                      "store of a mount's tool events")),
       token="session", returns="EventList"),
    Op("GET", _SES + "/{session_id}/events/stream", stream_session_events,
       "sessions.events.stream", query=(array("event_deltas[]", items="string"),),
       token="session", returns="EventStream"),
    Op("POST", _DRM, create_dream, "dreams.create",
       body=(array("inputs!"), either("model!", "string", "object"), string("instructions"),
             obj("output_behavior")), returns="Dream"),
    Op("GET", _DRM, list_dreams, "dreams.list",
       query=(array("statuses[]", items="string"), boolean("include_archived"),
              *_times("gt", "lt"), *_LIST),
       returns="Page<Dream>"),
    Op("GET", _DRM + "/{dream_id}", retrieve_dream, "dreams.retrieve", returns="Dream"),
    Op("POST", _DRM + "/{dream_id}/archive", archive_dream, "dreams.archive",
       returns="Dream"),
    Op("POST", _DRM + "/{dream_id}/cancel", cancel_dream, "dreams.cancel", returns="Dream"),
    # memfs extensions (README "Remote mounts")
    Op("POST", _SES + "/{session_id}/memfs/status", set_session_status,
       "set a session's status (the launcher of memfs run --url: running, terminated)",
       body=(string("status!", enum=("rescheduling", "running", "idle", "terminated")),),
       returns="Session",
       extension=True),
    Op("POST", _SES + "/{session_id}/memfs/revert", revert_session,
       "undo a session (or, with a memrevert_ id in place of the session id, an earlier "
       "revert): every memory it wrote back to its state before, one transaction; memories "
       "changed by someone else since are conflicts unless force; dry_run: the plan only",
       body=(boolean("dry_run"), boolean("force")), returns="Revert", extension=True),
    Op("POST", _SES + "/{session_id}/memfs/tokens", create_session_token,
       "make a session token (what memfs run hands its agent instead of a key): only the "
       "session's attached stores with their access, only while it runs, until ttl_seconds "
       "(default 1 day), and never longer than the stored key that makes it (refused once "
       "that key is revoked or expired); the secret is shown once",
       body=(integer("ttl_seconds", description="seconds the token lives at most"),),
       returns="SessionToken", extension=True),
    Op("POST", _VER + "/{memory_version_id}/memfs/restore", restore_memory_version,
       "bring back a version's content as a new version of its memory (a deleted memory "
       "comes back under its own id, at path or else the version's path)",
       body=(string("path", **_PATH),), token="write", returns="Memory", extension=True),
    Op("GET", "/v1/memfs/limits", get_limits, "the server store's limits", token="open",
       returns="Limits",
       extension=True),
    Op("GET", "/v1/memfs/resolve_store", resolve_store,
       "a memory store by id, else by exact name (the newest live one; two live stores of "
       "that name are ambiguous: 400)",
       query=(string("ref!", description="a memory store id or name"),),
       token="open", returns="MemoryStore", extension=True),
    # Not for a session token: it names stores beyond the session's.
    Op("GET", _MS + "/{memory_store_id}/memfs/namesakes", store_namesakes,
       "the other live memory stores with this store's exact name, newest first (at most "
       "100)", returns="MemoryStoreList", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/search", search.search_memories,
       search.SEARCH_SUMMARY, query=search.SEARCH_QUERY, token="read",
       returns="SearchResult", extension=True),
    Op("GET", _SES + "/{session_id}/memfs/search", search.search_session,
       search.SESSION_SUMMARY, query=search.SEARCH_QUERY, token="session",
       returns="SearchResult", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/search_status", search.search_status,
       search.STATUS_SUMMARY, token="read", returns="SearchStatus", extension=True),
    # typed memories (SPEC §8): describe is a read; expire is a person's (no session token)
    Op("GET", _MS + "/{memory_store_id}/memfs/describe", typed.describe_store,
       typed.DESCRIBE_SUMMARY, token="read", returns="MemfsStoreDescription", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/expire", typed.expire_store,
       typed.EXPIRE_SUMMARY, body=typed.EXPIRE_BODY, returns="MemfsExpirySweep",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/clear_type", typed.clear_type,
       typed.CLEAR_SUMMARY, body=typed.CLEAR_BODY, token="write", returns="MemfsTypeCleared",
       extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/tree", get_tree,
       "every live memory (basic view) and the change-feed position", token="read", returns="Tree",
       extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/snapshot", get_snapshot,
       "the store as it was at a time, right after a version or just before a session's "
       "first write (time travel): the boundary and the memories then live (basic view)",
       query=(string("at!", description="an RFC 3339 time, a memory version id or a session "
                     "id"),), token="read", returns="Snapshot", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/stats", get_stats,
       "live memory count and change-feed position", token="read", returns="Stats", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/check_can_create", check_can_create,
       "would a new memory be accepted now (archive, 2,000 limit, session access)?",
       token="write", returns="Ok", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/write", write_path,
       "create or replace the memory at a path, one transaction (with the tool events that "
       "report it, if given)",
       body=(string("path!", **_PATH), string("content!", **_CONTENT), _EVENTS),
       token="write", returns="Memory", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/delete", delete_path,
       "delete the memory at a path", body=(string("path!", **_PATH), _EVENTS),
       token="write", returns="Memory",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/rename", rename_path,
       "rename the memory at a path; over a memory at the target (replace), that memory "
       "takes the content and the renamed one is deleted, in one transaction (with the tool "
       "events that report it, if given)",
       body=(string("old_path!", **_PATH), string("new_path!", **_PATH), boolean("replace"),
             _EVENTS),
       token="write", returns="Memory", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/rename_prefix", rename_prefix,
       "move every memory below a prefix, one transaction (a directory rename)",
       body=(string("old_prefix!", **_PREFIX), string("new_prefix!", **_PREFIX), _EVENTS),
       token="write", returns="MemoryList",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/delete_prefix", delete_prefix,
       "delete every memory below a prefix, one transaction (a directory deleted at once, "
       "with the tool events that report it, if given); the memories as they were",
       body=(string("prefix!", **_PREFIX), _EVENTS), token="write", returns="MemoryList",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/events", record_store_events,
       "record tool events of a mount (of the session it acts as, else of the store)",
       body=(array("events!"),), token="read", returns="EventList", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/export", export_store,
       "the store as one archive (docs/EXPORT-FORMAT.md: gzip JSON Lines), streamed; "
       "history=true: every retained version", query=(boolean("history"),),
       token="read", returns="Archive", extension=True),
    Op("POST", "/v1/memfs/import", import_store,
       "import an archive (restored with its ids; name: a copy with new ids; into: add to a "
       "store) or a zip of text files (name or into); checked whole before anything is "
       "written, all or nothing unless partial=true",
       query=(string("name"), string("into"), boolean("partial")), returns="ImportSummary",
       extension=True, raw_body=True),
    Op("GET", _MS + "/{memory_store_id}/changes", list_changes, "the store's change feed",
       query=(integer("after", minimum=0),
              integer("limit", minimum=0, maximum=MAX_CHANGES_PAGE)),
       token="read", returns="ChangeList",
       extension=True),
    Op("GET", _MS + "/{memory_store_id}/changes/stream", stream_changes,
       "the store's change feed, live (SSE)", query=(integer("after", minimum=0),),
       token="read", returns="ChangeStream", extension=True),
    # API keys (issue 22): an admin key's, of its workspace.
    Op("POST", _KEYS, create_key,
       "make an API key of this workspace (a server key: of workspace_id): role admin, "
       "read_write (default) or read_only; memory_store_ids: the only stores it opens; "
       "expires_in: seconds or a duration (30d); the secret is shown once",
       body=(string("name!"), string("role", enum=ROLES), array("memory_store_ids",
             items="string"), either("expires_in", "integer", "string"),
             string("workspace_id")),
       returns="ApiKey", extension=True, admin=True),
    Op("GET", _KEYS, list_keys, "this workspace's API keys, newest first (never a secret)",
       query=(string("workspace_id", description="a server key: another workspace's"),),
       returns="ApiKeyList", extension=True, admin=True),
    Op("GET", _KEYS + "/{key_id}", retrieve_key, "an API key of this workspace",
       returns="ApiKey", extension=True, admin=True),
    Op("POST", _KEYS + "/{key_id}/revoke", revoke_key,
       "revoke an API key: its next request is refused by every server of the database, "
       "and its streams and Console sign-ins end within a second",
       returns="ApiKey", extension=True, admin=True),
]
