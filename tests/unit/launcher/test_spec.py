"""Session spec files (memfs.launcher.spec): parsing, the checks and their messages, store
lookup."""

from __future__ import annotations

import json

import pytest

from memfs import errors
from memfs.launcher.plan import Attachment
from memfs.launcher.spec import RESOURCE_KEYS, SessionSpec, load, parse
from memfs.store import Store

FULL = """\
title: Triage bot
metadata:
  team: support
  ticket: "1234"
resources:
  - type: memory_store
    memory_store: User Preferences
    instructions: |
      Check before answering.
      Keep it short.
  - type: memory_store
    memory_store_id: memstore_01abc
    access: read_only
  - type: memory_store
    memory_store: notes
    access: null
    instructions: null
"""


def refused(text: str, *, store: Store | None = None) -> str:
    """The one-line message parsing ``text`` as ``s.yaml`` gives (InvalidRequest)."""
    with pytest.raises(errors.InvalidRequest) as e:
        parse(text, "s.yaml")
    message = e.value.message
    assert "\n" not in message and message.startswith("s.yaml: ")
    return message


def entry(body: str) -> str:
    """A spec with one resource entry made of ``body`` (YAML flow mapping items)."""
    return f"resources:\n  - {{{body}}}\n"


def test_a_full_spec_gives_what_the_flags_give():
    spec = parse(FULL, "s.yaml")
    assert spec == SessionSpec(
        "s.yaml",
        [
            Attachment("User Preferences", "read_write",
                       "Check before answering.\nKeep it short.\n"),
            Attachment("memstore_01abc", "read_only"),
            Attachment("notes", "read_write"),
        ],
        title="Triage bot",
        metadata={"team": "support", "ticket": "1234"},
    )
    # An entry without instructions is exactly what --store REF[:access] parses to.
    assert spec.attachments[1] == Attachment.parse("memstore_01abc:read_only")
    assert spec.resources()[0] == {
        "type": "memory_store", "memory_store_id": "User Preferences", "access": "read_write",
        "memfs_scope": "general", "instructions": "Check before answering.\nKeep it short.\n",
    }
    assert "instructions" not in spec.resources()[1]


def test_json_is_a_spec_too(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"title": "t", "resources": [
        {"type": "memory_store", "memory_store_id": "memstore_01x", "access": "read_only",
         "instructions": "i"}]}))
    spec = load(str(path))
    assert spec.title == "t" and spec.metadata is None
    assert spec.attachments == [Attachment("memstore_01x", "read_only", "i")]


def test_the_entries_are_the_sdks_wire_shape():
    """Every key of the SDK's memory-store resource param is accepted (and is all there is,
    but for memory_store, the name, the scope: memfs_scope, scope for short, and the budget of
    pinned memories: memfs_pinned_budget, pinned_budget for short)."""
    from anthropic.types.beta import BetaManagedAgentsMemoryStoreResourceParam as Param

    assert set(RESOURCE_KEYS) == set(Param.__annotations__) | {
        "memory_store", "scope", "memfs_scope", "pinned_budget", "memfs_pinned_budget"}


def test_an_empty_resources_list_is_a_session_without_stores():
    assert parse("resources: []", "s.yaml").attachments == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "s.yaml: the session spec is empty (it needs at least resources: [])"),
        ("- a\n- b\n", "s.yaml: a session spec must be a mapping with resources, title and "
         "metadata"),
        ("title: t\n", "s.yaml: resources is required (a list of memory_store entries; may be [])"),
        ("resources: {a: 1}\n", "s.yaml: resources must be a list"),
        ("resources: []\ntitel: t\n",
         "s.yaml: unknown key 'titel' (expected title, metadata, resources)"),
        ("resources:\n  - notes\n", "s.yaml: resources[0]: each resource must be a mapping "
         "(type: memory_store, memory_store: NAME…)"),
        (entry("type: memory_store, memory_store: a, acess: read_only"),
         "s.yaml: resources[0]: unknown key 'acess' (expected type, memory_store, "
         "memory_store_id, access, instructions, scope, memfs_scope, pinned_budget, "
         "memfs_pinned_budget)"),
        (entry("type: memory_store, memory_store: a, memory_store_id: b"),
         "s.yaml: resources[0]: give memory_store (a name or id) or memory_store_id, not both"),
        (entry("type: memory_store, memory_store: ''"),
         "s.yaml: resources[0]: memory_store must be a store's name or id"),
        (entry("type: memory_store, memory_store: 12"),
         "s.yaml: resources[0]: memory_store must be a store's name or id "
         "(YAML read 12 as int: quote it)"),
        ("title: 2024\nresources: []\n",
         "s.yaml: title must be a string (YAML read 2024 as int: quote it)"),
        ("metadata: {beta: yes}\nresources: []\n",
         "s.yaml: metadata values must be strings of at most 512 characters "
         "(YAML read True as bool: quote it)"),
        ("metadata: [a]\nresources: []\n", "s.yaml: metadata must be an object of strings"),
        ("resources: [\n", "s.yaml: not valid YAML: line 2, column 1: expected the node "
         "content, but found '<stream end>'"),
        ("resources: []\ntitle: a\ntitle: b\n",
         "s.yaml: line 3, column 1: the key 'title' is given twice"),
        (entry("type: memory_store, memory_store: a, access: read_only, access: read_write"),
         "s.yaml: line 2, column 62: the key 'access' is given twice"),
        ("x: &a {type: memory_store, memory_store: n}\nresources: [*a]\n",
         "s.yaml: line 2, column 13: aliases (*name) are not supported in a session spec"),
    ],
)
def test_shape_errors_name_the_file_and_the_entry(text, expected):
    assert refused(text) == expected


def test_the_second_entry_is_named():
    text = ("resources:\n  - {type: memory_store, memory_store: a}\n"
            "  - {type: memory_store, memory_store: b, access: readonly}\n")
    assert refused(text) == (
        "s.yaml: resources[1]: access must be 'read_write' or 'read_only'"
    )


# The store's rules, with the store's words: each bad resource is refused by the spec with
# exactly the message create_session gives for it (after "FILE: resources[0]: ").
BAD_RESOURCES = [
    {"type": "file", "memory_store_id": "memstore_01x"},
    {"memory_store_id": "memstore_01x"},
    {"type": "memory_store"},
    {"type": "memory_store", "memory_store_id": ""},
    {"type": "memory_store", "memory_store_id": "memstore_01x", "access": "ro"},
    {"type": "memory_store", "memory_store_id": "memstore_01x", "access": "write"},
    {"type": "memory_store", "memory_store_id": "memstore_01x", "instructions": ["a"]},
    {"type": "memory_store", "memory_store_id": "memstore_01x", "instructions": "x" * 4097},
]


@pytest.mark.parametrize("resource", BAD_RESOURCES)
def test_resource_rules_are_the_stores_with_its_messages(resource, store):
    with pytest.raises(errors.InvalidRequest) as by_store:
        store.sessions.create([resource])
    spec_text = json.dumps({"resources": [resource]})
    assert refused(spec_text) == f"s.yaml: resources[0]: {by_store.value.message}"


def test_metadata_rules_are_the_stores(store):
    metadata = {f"k{i}": "v" for i in range(17)}
    with pytest.raises(errors.InvalidRequest) as by_store:
        store.sessions.create([], metadata=metadata)
    spec_text = json.dumps({"resources": [], "metadata": metadata})
    assert refused(spec_text) == f"s.yaml: {by_store.value.message}"


def test_the_longest_instructions_pass():
    spec = parse(json.dumps({"resources": [
        {"type": "memory_store", "memory_store": "n", "instructions": "x" * 4096}]}))
    assert len(spec.attachments[0].instructions or "") == 4096


def test_unreadable_and_undecodable_files(tmp_path):
    with pytest.raises(errors.InvalidRequest) as e:
        load(str(tmp_path / "nope.yaml"))
    assert e.value.message == (
        f"cannot read the session spec {tmp_path}/nope.yaml: No such file or directory"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"title: \xff\nresources: []\n")
    with pytest.raises(errors.InvalidRequest) as e:
        load(str(bad))
    assert e.value.message == f"{bad}: not UTF-8 text (byte 7)"


# -- looking the stores up ----------------------------------------------------------------------


def test_resolve_names_each_store_by_id(store):
    prefs = store.stores.create("User Preferences")
    notes = store.stores.create("notes")
    spec = parse(FULL.replace("memstore_01abc", prefs.id).replace(
        "memory_store: User Preferences", "memory_store: Team Docs"), "s.yaml")
    docs = store.stores.create("Team Docs")
    resolved = spec.resolve(store)
    assert [a.ref for a in resolved.attachments] == [docs.id, prefs.id, notes.id]
    assert [a.ref for a in spec.attachments][0] == "Team Docs"  # the spec itself is unchanged
    s = store.sessions.create(resolved.resources(), title=resolved.title,
                             metadata=resolved.metadata)
    assert [(r.name, r.access, r.instructions) for r in s.resources] == [
        ("Team Docs", "read_write", "Check before answering.\nKeep it short.\n"),
        ("User Preferences", "read_only", None),
        ("notes", "read_write", None),
    ]
    assert s.title == "Triage bot" and s.metadata == {"team": "support", "ticket": "1234"}


def test_a_missing_store_is_the_stores_not_found_naming_the_entry(store):
    store.stores.create("a")
    spec = parse(entry("type: memory_store, memory_store: a") +
                 "  - {type: memory_store, memory_store: Nope}\n", "s.yaml")
    with pytest.raises(errors.NotFound) as e:
        spec.resolve(store)
    assert e.value.message == "s.yaml: resources[1]: no memory store with id or name 'Nope'"


def test_an_ambiguous_name_is_the_stores_error_naming_the_entry(store):
    one, two = store.stores.create("twin"), store.stores.create("twin")
    spec = parse(entry("type: memory_store, memory_store: twin"), "s.yaml")
    with pytest.raises(errors.InvalidRequest) as e:
        spec.resolve(store)
    assert e.value.message == (
        f"s.yaml: resources[0]: 2 memory stores are named 'twin' ({two.id}, {one.id}): use an id, "
        "or rename all but one"
    )
