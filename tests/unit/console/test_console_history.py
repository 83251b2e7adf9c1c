"""The pure parts of the Console's history and sessions pages: what a version did, the actor
filter, a timeline's rows and the store of a tool event."""

from __future__ import annotations

from dataclasses import replace

from memfs.console.history import actor_filter, label
from memfs.console.sessions import pair_events, store_of_path
from memfs.fuse.toolevents import tool_pair
from memfs.models import Event, MemoryVersion, Session, SessionResource

V = MemoryVersion("memver_1", "mem_1", "memstore_1", "modified", "2026-01-01T00:00:00Z",
                  "/a.md", None, "s1", 1, None, None, None)


def test_label_tells_renames_apart() -> None:
    assert label(V, None) == ("modified", None)
    assert label(V, replace(V, content_sha256="s0")) == ("modified", None)
    assert label(V, replace(V, path="/old.md")) == ("renamed", "/old.md")
    assert label(V, replace(V, path="/old.md", content_sha256="s0")) == (
        "modified, renamed", "/old.md")
    assert label(V, replace(V, path=None, redacted_at="x")) == ("modified", None)
    assert label(replace(V, operation="deleted"), replace(V, path="/old.md")) == (
        "deleted", None)


def test_actor_filter() -> None:
    assert actor_filter("  ") == {}
    assert actor_filter("sesn_1") == {"session_id": "sesn_1"}
    assert actor_filter(" apikey_2 ") == {"api_key_id": "apikey_2"}
    assert actor_filter("user_3") == {"user_id": "user_3"}
    assert actor_filter("robot") == {"service_account_id": "robot"}


def events(*pairs: list[dict]) -> list[Event]:
    return [Event(e["id"], "sesn_1", e["type"], e["processed_at"], e) for p in pairs for e in p]


def test_pair_events_joins_each_result_to_its_use_in_order() -> None:
    read = tool_pair("cat", 1, "read", "/m/n/a.md", text="read")
    write = tool_pair("sh", 2, "write", "/m/n/a.md", failure="No space")
    status = [{"id": "sevt_s", "type": "session.status_idle", "processed_at": "t"}]
    # Interleaved: the write's use comes before the read's result.
    items = pair_events(events([read[0]], [write[0]], [read[1]], status, [write[1]]))
    assert [(i.use and i.use.id, i.result and i.result.id, i.event and i.event.id)
            for i in items] == [(read[0]["id"], read[1]["id"], None),
                                (write[0]["id"], write[1]["id"], None),
                                (None, None, "sevt_s")]
    assert (items[0].ok, items[0].text, items[1].ok, items[1].text) == (
        True, "read", False, "No space")
    orphan = pair_events(events([read[1]]))  # its use is on the page before
    assert orphan[0].use is None and orphan[0].result is not None and orphan[0].input == {}


def test_store_of_path_takes_the_longest_mount_path() -> None:
    def res(sid: str, mount: str) -> SessionResource:
        return SessionResource("r", "sesn_1", sid, "read_write", None, sid, "", mount)

    s = Session("sesn_1", "idle", (res("a", "/mnt/memory/a"), res("b", "/mnt/memory/a/b")),
                None, None, {}, None, "t", "t", None)
    assert store_of_path(s, "/mnt/memory/a/x.md") == "a"
    assert store_of_path(s, "/mnt/memory/a/b/x.md") == "b"
    assert store_of_path(s, "/mnt/memory/ab/x.md") is None
    assert store_of_path(s, "/elsewhere") is None
