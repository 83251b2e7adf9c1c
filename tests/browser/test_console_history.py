"""The Console's history (versions, diffs, restore, redact) and sessions (list, timeline), in
chromium, against a real ``memfs serve`` seeded through the SDK and a real ``memfs run``."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import anthropic
import httpx

from memfs.fuse.toolevents import tool_pair
from tests.support.console import KEY
from tests.support.mount import require_fuse
from tests.support.session import MEMFS

V1 = "alpha\nbeta\ngamma\n"
V2 = "alpha\nBETA\ngamma\ndelta\n"
V3 = "alpha\nBETA\ngamma\ndelta\nepsilon\n"


def seeded(sdk: anthropic.Anthropic, *contents: str, path: str = "/notes.md",
           name: str = "History") -> tuple[str, str, list[str]]:
    """A new store with one memory written ``contents`` in turn: (store, memory, versions
    oldest first)."""
    store = sdk.beta.memory_stores.create(name=f"{name} {uuid.uuid4().hex[:8]}")
    mems = sdk.beta.memory_stores.memories
    m = mems.create(store.id, path=path, content=contents[0])
    versions = [m.memory_version_id]
    for content in contents[1:]:
        versions.append(mems.update(m.id, memory_store_id=store.id,
                                    content=content).memory_version_id)
    return store.id, m.id, versions


def version_link(pg: Any, version_id: str) -> Any:
    return pg.get_by_role("link", name=re.compile(f"version {version_id}$"))


def test_history_and_a_version_diff_unified_and_side_by_side(
        signed_in: Any, sdk: anthropic.Anthropic) -> None:
    pg = signed_in
    sid, mid, (v1, v2, v3) = seeded(sdk, V1, V2, V3)
    pg.goto(f"/stores/{sid}/memories/{mid}/history")
    assert pg.locator("table.history tbody tr").count() == 3
    assert pg.locator("table.history tbody tr").first.inner_text().startswith("modified")
    version_link(pg, v2).click()
    pg.wait_for_url(f"**/stores/{sid}/versions/{v2}")

    diff = pg.locator(".diff.unified")
    assert diff.locator("tr.del").all_inner_texts() == ["2\t\t-beta"]
    assert diff.locator("tr.add").all_inner_texts() == ["\t2\t+BETA", "\t4\t+delta"]
    assert pg.locator(".counts").inner_text() == "+2 −1"
    assert pg.get_by_role("link", name=v1).count() == 1  # diffed against the version before

    pg.get_by_role("link", name="Side by side").click()
    pg.wait_for_url(re.compile(r"diff=split"))
    split = pg.locator(".diff.split")
    row = split.locator("tr", has_text="BETA")
    assert row.locator("td.del").inner_text() == "beta"
    assert row.locator("td.add").inner_text() == "BETA"
    pg.get_by_role("link", name="Unified view").click()
    pg.wait_for_url(re.compile(r"diff=unified"))
    assert pg.locator(".diff.unified").count() == 1

    # The first version is diffed against nothing: every line added.
    pg.goto(f"/stores/{sid}/versions/{v1}")
    assert pg.locator(".diff tr.add").count() == 3 and pg.locator(".diff tr.del").count() == 0
    assert "against an empty memory" in pg.locator("#main").inner_text()
    # The content, rendered and raw.
    assert pg.locator(".markdown").inner_text().split() == ["alpha", "beta", "gamma"]
    pg.get_by_text("Raw text").click()
    assert pg.locator("pre.raw").inner_text() == V1


def test_restore_an_older_version(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    pg = signed_in
    sid, mid, (v1, _v2, v3) = seeded(sdk, V1, V2, V3)
    pg.goto(f"/stores/{sid}/versions/{v3}")  # the head: nothing to restore
    assert pg.get_by_role("button", name="Restore this version").count() == 0
    pg.goto(f"/stores/{sid}/versions/{v1}")
    dialogs: list[str] = []
    pg.once("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    pg.get_by_role("button", name="Restore this version").click()
    pg.wait_for_url(f"**/stores/{sid}/memories/{mid}/history")
    assert dialogs and "Restore /notes.md" in dialogs[0]
    assert "restored /notes.md" in pg.get_by_role("status").inner_text()

    m = sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid)
    assert m.content == V1 and m.memory_version_id not in (v1, v3)
    head = sdk.beta.memory_stores.memory_versions.retrieve(m.memory_version_id,
                                                           memory_store_id=sid)
    assert head.operation == "modified"
    assert head.created_by.type == "user_actor" and head.created_by.user_id.startswith("user_")
    assert pg.locator("table.history tbody tr").count() == 4
    assert "user" in pg.locator("table.history tbody tr").first.inner_text()


def test_restore_of_a_deleted_memory_keeps_it_one_memory(signed_in: Any,
                                                         sdk: anthropic.Anthropic) -> None:
    """Undelete from the Console: the memory comes back under its id, and its page shows the
    whole history (the versions before the deletion too)."""
    pg = signed_in
    sid, mid, (v1, _v2, _v3) = seeded(sdk, V1, V2, V3, path="/gone.md")
    sdk.beta.memory_stores.memories.delete(mid, memory_store_id=sid)
    pg.goto(f"/stores/{sid}/versions/{v1}")
    pg.once("dialog", lambda d: d.accept())
    pg.get_by_role("button", name="Restore this version").click()
    pg.wait_for_url(f"**/stores/{sid}/memories/{mid}/history")
    assert "restored /gone.md" in pg.get_by_role("status").inner_text()
    m = sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid)
    assert (m.path, m.content) == ("/gone.md", V1)
    assert pg.locator("table.history tbody tr").count() == 5  # 3, the deletion, the restore
    listed = sdk.beta.memory_stores.memory_versions.list(sid, memory_id=mid)
    assert [v.operation for v in listed.data] == ["created", "deleted", "modified", "modified",
                                                  "created"]


def test_redact_a_version_but_not_the_head(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    pg = signed_in
    sid, mid, (v1, v2) = seeded(sdk, "my password is hunter2\n", "no secrets here\n")
    versions = sdk.beta.memory_stores.memory_versions

    pg.goto(f"/stores/{sid}/versions/{v1}")
    pg.get_by_label(re.compile("Type redact")).fill("yes")
    pg.on("dialog", lambda d: d.accept())
    pg.get_by_role("button", name="Redact this version").click()
    assert pg.get_by_role("alert").inner_text() == "type redact to confirm"
    assert versions.retrieve(v1, memory_store_id=sid).redacted_at is None

    pg.get_by_label(re.compile("Type redact")).fill("redact")
    pg.get_by_role("button", name="Redact this version").click()
    pg.wait_for_url(f"**/stores/{sid}/memories/{mid}/history")
    assert f"redacted {v1}" in pg.get_by_role("status").inner_text()
    gone = versions.retrieve(v1, memory_store_id=sid)
    assert gone.redacted_at is not None and gone.content is None and gone.path is None
    assert gone.redacted_by.type == "user_actor"
    assert "redacted" in pg.locator("table.history tbody tr").last.inner_text()

    pg.goto(f"/stores/{sid}/versions/{v1}")  # shown as redacted: no content, no restore
    assert "hunter2" not in pg.content()
    assert "Redacted" in pg.locator(".notice").inner_text()
    assert pg.get_by_role("button", name="Restore this version").count() == 0
    cookies = {c["name"]: c["value"] for c in pg.context.cookies()}
    csrf = pg.locator("input[name=csrf]").first.get_attribute("value")
    r = httpx.post(f"{pg.url.split('/stores/')[0]}/stores/{sid}/versions/{v1}/restore",
                   data={"csrf": csrf}, cookies=cookies)
    assert r.status_code == 400 and "redacted" in r.text and "cannot be restored" in r.text

    # The head: no form, but why it cannot be redacted (the store refuses it, as a POST shows).
    pg.goto(f"/stores/{sid}/versions/{v2}")
    assert pg.get_by_role("button", name="Redact this version").count() == 0
    assert "cannot be redacted" in pg.locator("section.danger").inner_text()
    r = httpx.post(f"{pg.url.split('/stores/')[0]}/stores/{sid}/versions/{v2}/redact",
                   data={"csrf": csrf, "confirm": "redact"}, cookies=cookies)
    assert r.status_code == 400 and "is the current content of the memory at /notes.md" in r.text
    assert versions.retrieve(v2, memory_store_id=sid).redacted_at is None


def test_store_history_filtered_by_operation_and_actor(
        signed_in: Any, sdk: anthropic.Anthropic) -> None:
    pg = signed_in
    sid, mid, _ = seeded(sdk, V1, V2)
    mems = sdk.beta.memory_stores.memories
    other = mems.create(sid, path="/other.md", content="bye")
    mems.update(mid, memory_store_id=sid, path="/moved.md")
    mems.delete(other.id, memory_store_id=sid)

    pg.goto(f"/stores/{sid}/history")
    rows = pg.locator("table.history tbody tr")
    assert rows.count() == 5
    assert rows.first.inner_text().startswith("deleted")
    renamed = rows.nth(1)
    assert renamed.inner_text().startswith("renamed")
    assert renamed.locator(".old-path").inner_text() == "/notes.md"
    assert "/moved.md" in renamed.inner_text()

    pg.get_by_label("Operation").select_option("created")
    pg.get_by_role("button", name="Filter").click()
    pg.wait_for_url(re.compile(r"operation=created"))
    assert rows.count() == 2
    assert all(t.startswith("created") for t in rows.all_inner_texts())
    pg.get_by_label("Operation").select_option("deleted")
    pg.get_by_role("button", name="Filter").click()
    pg.wait_for_url(re.compile(r"operation=deleted"))
    assert rows.count() == 1 and "/other.md" in rows.first.inner_text()
    # Who: every version here was written with the test's API key.
    pg.get_by_role("link", name="Clear").click()
    pg.get_by_label(re.compile("^Who")).fill("user_nobody")
    pg.get_by_role("button", name="Filter").click()
    assert "No versions match these filters" in pg.locator("#main").inner_text()
    key_id = sdk.beta.memory_stores.memory_versions.list(sid).data[0].created_by.api_key_id
    pg.get_by_label(re.compile("^Who")).fill(key_id)
    pg.get_by_role("button", name="Filter").click()
    pg.wait_for_url(re.compile(r"actor=apikey_"))
    assert rows.count() == 5


def run_session(console_server: Any, store_id: str, script: str, tmp: Path) -> str:
    """A real ``memfs run`` (FUSE, no isolation) on the server's database; its session id."""
    require_fuse()
    root = tmp / "root"
    prelude = 'echo "$MEMFS_SESSION_ID" > "$T/sid"; d=$(echo "$R"/*); '
    done = subprocess.run(
        [*MEMFS, "--db", str(console_server.db), "run", "--store", store_id, "--root",
         str(root), "--isolation", "none", "--", "sh", "-c",
         prelude + script],
        env={**os.environ, "T": str(tmp), "R": str(root)}, capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 0, done.stderr
    return (tmp / "sid").read_text().strip()


def test_sessions_list_and_a_real_session_timeline(
        signed_in: Any, sdk: anthropic.Anthropic, console_server: Any, tmp_path: Path) -> None:
    pg = signed_in
    sid, mid, (v1,) = seeded(sdk, "first line\n", name="Timeline")
    session = run_session(console_server, sid,
                          'cat "$d/notes.md" > /dev/null; echo "added by the agent" >> '
                          '"$d/notes.md"', tmp_path)

    pg.goto("/sessions")
    pg.get_by_label("Store").select_option(sid)
    pg.get_by_role("button", name="Filter").click()
    pg.wait_for_url(re.compile(r"store=memstore_"))
    rows = pg.locator("table.sessions tbody tr")
    assert rows.count() == 1
    assert "terminated" in rows.first.inner_text() and "Timeline" in rows.first.inner_text()
    assert session in rows.first.inner_text()
    rows.first.get_by_role("link", name=re.compile("^sh -c")).click()  # titled by its command
    pg.wait_for_url(f"**/sessions/{session}")

    tools = pg.locator("ol.timeline li.tool")
    texts = tools.all_inner_texts()
    read = next(i for i, t in enumerate(texts) if "cat" in t and "read" in t)
    write = next(i for i, t in enumerate(texts) if re.search(r"\bwrite\b", t))
    assert read < write, texts
    assert "notes.md" in texts[read] and "notes.md" in texts[write]
    assert "ok" in texts[write] and tools.nth(read).locator("a.version-link").count() == 0
    head = sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid)
    link = tools.nth(write).locator("a.version-link")
    assert link.inner_text() == f"version {head.memory_version_id}"
    link.click()
    pg.wait_for_url(f"**/stores/{sid}/versions/{head.memory_version_id}")
    assert pg.locator(".diff tr.add").all_inner_texts() == ["\t2\t+added by the agent"]
    assert pg.get_by_role("link", name=v1).count() == 1
    # Who wrote it links back to the session's timeline.
    pg.get_by_role("link", name=session).click()
    pg.wait_for_url(f"**/sessions/{session}")


def test_a_session_writing_through_the_api_and_hostile_paths(
        signed_in: Any, sdk: anthropic.Anthropic, console_server: Any) -> None:
    """A remote mount's path: the session writes with the memfs write extension, the events
    built like a mount's; an agent's path with markup shows as text."""
    pg = signed_in
    store = sdk.beta.memory_stores.create(name=f"<script>window.pwned=1</script> {uuid.uuid4()}")
    s = sdk.beta.sessions.create(agent="agent_opaque", environment_id="env_opaque", resources=[
        {"type": "memory_store", "memory_store_id": store.id, "access": "read_write"}])
    mount = s.resources[0].mount_path
    evil = '/<img src=x onerror="window.pwned=2">.md'
    content = "<script>window.pwned=3</script>\n<img src=x onerror=\"window.pwned=4\">\n"
    r = httpx.post(
        f"{console_server.url}/v1/memory_stores/{store.id}/memfs/write",
        headers={"x-api-key": KEY, "x-memfs-session-id": s.id},
        json={"path": evil, "content": content,
              "events": tool_pair("vim", 42, "create", mount + evil, text="wrote")})
    assert r.status_code == 200, r.text
    vid = r.json()["memory_version_id"]
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    pg.goto(f"/sessions/{s.id}")
    tool = pg.locator("ol.timeline li.tool")
    assert tool.count() == 1 and "vim" in tool.inner_text() and "create" in tool.inner_text()
    assert mount + evil in tool.inner_text()
    tool.locator("a.version-link").click()
    pg.wait_for_url(f"**/stores/{store.id}/versions/{vid}")
    assert evil in pg.locator("h1").inner_text()
    assert "window.pwned=3" in pg.locator(".diff").inner_text()
    pg.get_by_text("Raw text").click()
    assert pg.locator("pre.raw").inner_text() == content
    assert pg.evaluate("window.pwned") is None
    for url in (f"/stores/{store.id}/history", f"/sessions?store={store.id}",
                f"/stores/{store.id}/versions/{vid}?diff=split"):
        pg.goto(url)
        assert "<script>window.pwned=1</script>" in pg.locator("#main").inner_text()
        assert pg.evaluate("window.pwned") is None
    assert pg.locator("#main img").count() == 0 and dialogs == []


HOSTILE = [
    ("/stores/{store}/versions/memver_nope", 404),
    ("/stores/memstore_nope/versions/memver_nope", 404),
    ("/stores/{store}/memories/mem_nope/history", 404),
    ("/stores/memstore_nope/history", 404),
    ("/sessions/sesn_nope", 404),
    ("/sessions/%3Cscript%3Ealert(1)%3C%2Fscript%3E", 404),
    ("/stores/{store}/history?page=garbage", 400),
    ("/stores/{store}/history?operation=exploded", 400),
    ("/sessions?store=memstore_nope", 404),
    ("/sessions?page=garbage", 400),
    ("/sessions?status=exploded", 400),
]


def test_hostile_urls_give_an_error_page(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    store = sdk.beta.memory_stores.create(name=f"Hostile {uuid.uuid4().hex[:8]}")
    for url, status in HOSTILE:
        response = signed_in.goto(url.format(store=store.id))
        assert (url, response.status) == (url, status)
        assert signed_in.get_by_role("alert").count() == 1, url
        assert "Traceback" not in signed_in.content()
