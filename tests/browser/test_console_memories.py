"""The Console's memory pages in chromium: a store's tree, search, a memory (rendered and raw,
edit, a conflict, rename, delete), a new memory, hostile content, and live updates (from the
SDK, and from a write through a real FUSE mount of the server's database)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anthropic
from playwright.sync_api import expect

from tests.support import wait_until
from tests.support.console import new_store, no_dialogs, page_width
from tests.support.mount import Mount, require_fuse

Sdk = anthropic.Anthropic


def memory_id(sdk: Sdk, sid: str, path: str) -> str:
    return next(m.id for m in sdk.beta.memory_stores.memories.list(sid) if m.path == path)


def content_of(sdk: Sdk, sid: str, mid: str) -> str | None:
    return sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid).content


def test_browse_a_store_tree_of_nested_folders(signed_in: Any, sdk: Sdk) -> None:
    new_store(sdk, "Tree", {"/top.md": "top", "/prefs/editor.md": "vim" * 100,
                                  "/prefs/lang/python.md": "py", "/prefs/lang/rust.md": "rs"})
    pg = signed_in
    pg.goto("/stores")
    pg.get_by_role("link", name=re.compile(r"^Tree ")).click()
    tree = pg.get_by_role("region", name="Memories")
    expect(tree.locator("meter")).to_have_attribute("value", "4")
    folder = tree.get_by_role("listitem").filter(has_text="prefs/")
    expect(folder).to_contain_text("3 memories")
    expect(tree.get_by_role("listitem").filter(has_text="top.md")).to_contain_text("3 B")
    folder.get_by_role("link").click()
    expect(tree.get_by_role("link", name="editor.md")).to_be_visible()
    expect(tree.get_by_role("listitem").filter(has_text="editor.md")).to_contain_text("300 B")
    expect(tree.get_by_role("link", name="top.md")).to_have_count(0)
    tree.get_by_role("link", name="lang/").click()
    assert "dir=/prefs/lang/" in pg.url
    expect(tree.get_by_role("link", name="python.md")).to_be_visible()
    crumbs = tree.get_by_role("navigation", name="Folder")
    expect(crumbs).to_have_text(re.compile(r"/\s*prefs/lang/"))
    tree.get_by_role("link", name="rust.md").click()
    expect(pg.get_by_role("heading", level=1)).to_have_text("/prefs/lang/rust.md")
    pg.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="prefs").click()
    expect(tree.get_by_role("link", name="editor.md")).to_be_visible()
    # A phone: nothing wider than the screen.
    pg.set_viewport_size({"width": 375, "height": 740})
    assert page_width(pg) <= 375


def test_search_exact_text_by_path_and_by_content(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Search", {"/prefs/editor.md": "Use tabs; the Editor is VIM.",
                                    "/people/ana.md": "Ana likes the editor helix",
                                    "/rates.md": "a 100% rate", "/other.md": "nothing"})
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    pg.get_by_role("searchbox").fill("editor")
    pg.get_by_label("Exact text").check()
    pg.get_by_role("button", name="Search").click()
    expect(pg.get_by_role("status")).to_contain_text("2 memories")
    hits = pg.locator("ul.hits > li")
    expect(hits).to_have_count(2)
    expect(hits.nth(0)).to_contain_text("/prefs/editor.md")  # a path hit first
    expect(hits.nth(1)).to_contain_text("/people/ana.md")
    expect(hits.nth(1).locator("mark")).to_have_text("editor")
    expect(pg.get_by_label("Exact text")).to_be_checked()  # the mode stays for the next one
    pg.get_by_role("searchbox").fill("vim")  # content, case-insensitive
    pg.get_by_role("button", name="Search").click()
    expect(hits).to_have_count(1)
    expect(hits.locator("mark")).to_have_text("VIM")
    pg.get_by_role("searchbox").fill("0%")  # LIKE wildcards are literal
    pg.get_by_role("button", name="Search").click()
    expect(hits).to_have_count(1)
    expect(hits).to_contain_text("/rates.md")
    pg.get_by_role("searchbox").fill("%")
    pg.get_by_role("button", name="Search").click()
    expect(hits).to_have_count(1)
    pg.get_by_role("searchbox").fill("emacs")
    pg.get_by_role("button", name="Search").click()
    expect(pg.get_by_role("status")).to_contain_text("No memory")
    hits.first.wait_for(state="detached")
    pg.goto(f"/stores/{sid}/search?q=" + "x" * 2000)  # the store's refusal, next to the form
    expect(pg.get_by_role("alert")).to_contain_text("at most")
    expect(pg.get_by_role("searchbox")).to_be_visible()


def test_search_ranks_by_words_and_by_meaning(signed_in: Any, sdk: Sdk,
                                              console_server: Any) -> None:
    """A question with none of the memory's words finds it, once the store is indexed by
    meaning (here by this process, with the local model, as an indexer would)."""
    from memfs.store import Store

    sid = new_store(sdk, "Recall", {
        "/pets.md": "Our cat is called Miso and sleeps on the radiator.",
        "/deploy.md": "Deploys go out on Tuesdays after the standup.",
        "/food.md": "Ana is vegetarian: no meat at team dinners."})
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    status = pg.locator("[data-search-status]")
    expect(status).to_contain_text("0 of 3 memories indexed by meaning")
    expect(status).to_contain_text("no indexer is running")
    question = "which animal lives with us"
    pg.get_by_role("searchbox").fill(question)
    pg.get_by_role("button", name="Search").click()
    # Nothing passes the threshold: words share nothing with it, and meaning (which the
    # search waits for a moment: three memories are pending) finds no memory close enough in
    # three; the page says so and offers every memory ranked.
    expect(pg.get_by_role("status")).to_contain_text("No memory matches")
    expect(pg.locator("ol.hits > li")).to_have_count(0)
    expect(pg.get_by_role("link", name="Show every memory ranked")).to_be_visible()
    indexer = Store(console_server.db)
    try:
        indexer.search.use_embeddings("local")
        # The server may be indexing it already (its lease then says "another process"):
        # either way it ends with nothing pending.
        wait_until(lambda: indexer.search.index(sid).pending == 0 or None, 60, interval=0.2)
    finally:
        indexer.close()
    pg.goto(f"/stores/{sid}")
    expect(status).to_contain_text("3 of 3 memories indexed by meaning")
    expect(status).not_to_contain_text("no indexer")
    pg.get_by_role("searchbox").fill(question)
    pg.get_by_role("button", name="Search").click()
    pg.get_by_role("link", name="Show every memory ranked").click()
    hits = pg.locator("ol.hits > li")
    expect(hits).to_have_count(3)  # meaning ranks every memory: the closest first
    expect(pg.get_by_role("status")).to_have_text("3 memories, best first.")
    first = hits.first
    expect(first.get_by_role("link")).to_have_text("/pets.md")
    expect(first.locator(".tag")).to_have_text(["meaning"])  # not one word of it was asked
    expect(first.locator(".score")).to_have_text(re.compile(r"^(0\.\d\d|1\.00)$"))
    expect(first.locator(".snippet")).to_have_text(
        "Our cat is called Miso and sleeps on the radiator.")
    # Words and meaning together: both labels, the word marked.
    pg.goto(f"/stores/{sid}/search?q=what do we order for the dinners&threshold=0")
    expect(first.get_by_role("link")).to_have_text("/food.md")
    expect(first.locator(".tag")).to_have_text(["words", "meaning"])
    expect(first.locator("mark")).to_have_text("dinners")
    first.get_by_role("link").click()
    expect(pg.get_by_role("heading", level=1)).to_have_text("/food.md")


def test_a_memory_rendered_and_raw(signed_in: Any, sdk: Sdk) -> None:
    text = "# Editor\n\n- **tabs**, not spaces\n- `vim`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    sid = new_store(sdk, "View", {"/prefs/editor.md": text})
    mid = memory_id(sdk, sid, "/prefs/editor.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    rendered = pg.get_by_label("Rendered Markdown")
    expect(rendered.get_by_role("heading", name="Editor")).to_be_visible()
    expect(rendered.locator("strong")).to_have_text("tabs")
    expect(rendered.get_by_role("table")).to_be_visible()
    memory = sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid)
    facts = pg.locator("dl.facts")
    for shown in (memory.content_sha256, memory.memory_version_id, f"{len(text)} B"):
        expect(facts).to_contain_text(shown)
    expect(pg.get_by_role("link", name="History of this memory")).to_have_attribute(
        "href", f"/stores/{sid}/memories/{mid}/history")
    pg.get_by_role("link", name="Raw text").click()
    raw = pg.get_by_label("Raw text", exact=True)
    assert raw.text_content() == text  # exactly, leading and trailing newlines included
    expect(pg.get_by_role("link", name="Raw text")).to_have_attribute("aria-current", "page")


def test_edit_and_save_as_the_signed_in_user(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Edit", {"/notes.md": "line one\nline two\n"})
    mid = memory_id(sdk, sid, "/notes.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    pg.get_by_role("link", name="Edit", exact=True).click()
    editor = pg.get_by_label(re.compile("^Content"))
    expect(editor).to_be_focused()
    assert editor.input_value() == "line one\nline two\n"
    editor.fill("line one\nline 2\n\n## New *section*\n")
    pg.get_by_role("button", name="Save", exact=True).click()
    expect(pg.get_by_role("status").first).to_contain_text("saved /notes.md")
    expect(pg.get_by_label("Rendered Markdown").get_by_role("heading")).to_have_text("New section")
    assert content_of(sdk, sid, mid) == "line one\nline 2\n\n## New *section*\n"  # LF, not CRLF
    newest = list(sdk.beta.memory_stores.memory_versions.list(sid, memory_id=mid))[0]
    assert newest.operation == "modified"
    assert newest.created_by.type == "user_actor" and newest.created_by.user_id.startswith("user_")
    # Saving what is there writes nothing.
    pg.get_by_role("link", name="Edit", exact=True).click()
    pg.get_by_role("button", name="Save", exact=True).click()
    expect(pg.get_by_role("status").first).to_contain_text("no change")
    assert len(list(sdk.beta.memory_stores.memory_versions.list(sid, memory_id=mid))) == 2


def test_a_conflict_shows_both_sides_keeps_the_text_and_can_be_reapplied(
        signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Conflict", {"/plan.md": "step 1\nstep 2\n"})
    mid = memory_id(sdk, sid, "/plan.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    pg.locator("summary", has_text="Edit").click()
    editor = pg.get_by_label(re.compile("^Content"))
    editor.fill("step 1\nstep 2 (mine)\n")
    sdk.beta.memory_stores.memories.update(mid, memory_store_id=sid,
                                           content="step 1\nstep 2 (theirs)\n")
    # The open page hears of it and says so, without touching the text being edited.
    expect(pg.get_by_text("changed since you started editing")).to_be_visible()
    assert editor.input_value() == "step 1\nstep 2 (mine)\n"
    pg.get_by_role("button", name="Save", exact=True).click()
    expect(pg.get_by_role("alert")).to_contain_text("Someone else changed this memory")
    diff = pg.locator(".diff")
    expect(diff.locator("tr.del")).to_contain_text("step 2 (theirs)")
    expect(diff.locator("tr.add")).to_contain_text("step 2 (mine)")
    assert pg.get_by_label(re.compile("^Content")).input_value() == "step 1\nstep 2 (mine)\n"
    assert content_of(sdk, sid, mid) == "step 1\nstep 2 (theirs)\n"  # nothing overwritten yet
    pg.get_by_role("button", name="Save my version").click()
    expect(pg.get_by_role("status").first).to_contain_text("saved /plan.md")
    assert content_of(sdk, sid, mid) == "step 1\nstep 2 (mine)\n"
    # Discarding: another conflict, then back to what is saved.
    pg.locator("summary", has_text="Edit").click()
    pg.get_by_label(re.compile("^Content")).fill("discard me")
    sdk.beta.memory_stores.memories.update(mid, memory_store_id=sid, content="kept\n")
    pg.get_by_role("button", name="Save", exact=True).click()
    pg.get_by_role("link", name="Discard my changes").click()
    expect(pg.get_by_label("Rendered Markdown")).to_have_text("kept")
    assert content_of(sdk, sid, mid) == "kept\n"


def test_rename_with_the_stores_path_rules(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Rename", {"/a.md": "a", "/taken.md": "t"})
    mid = memory_id(sdk, sid, "/a.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    pg.locator("summary", has_text="Rename").click()
    new_path = pg.get_by_label("New path")
    for bad, says in (("no-slash.md", "start with '/'"), ("/taken.md", "taken")):
        new_path.fill(bad)
        pg.get_by_role("button", name="Rename").click()
        expect(pg.get_by_role("alert")).to_contain_text(re.compile(re.escape(says), re.I))
        expect(pg.get_by_label("New path")).to_have_value(bad)  # as typed
    pg.get_by_label("New path").fill("/docs/b.md")
    pg.get_by_role("button", name="Rename").click()
    expect(pg.get_by_role("status").first).to_contain_text("renamed /a.md to /docs/b.md")
    expect(pg.get_by_role("heading", level=1)).to_have_text("/docs/b.md")
    assert sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid).path == "/docs/b.md"


def test_delete_after_a_confirmation(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Delete", {"/old/stale.md": "stale", "/old/keep.md": "keep"})
    mid = memory_id(sdk, sid, "/old/stale.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    pg.get_by_role("link", name="Delete…").click()
    expect(pg.get_by_role("heading", level=1)).to_have_text("Delete /old/stale.md?")
    # Changed after the confirmation page was shown: refused, and shown again.
    sdk.beta.memory_stores.memories.update(mid, memory_store_id=sid, content="fresh")
    pg.get_by_role("button", name="Delete this memory").click()
    expect(pg.get_by_role("alert")).to_contain_text("changed since you asked")
    expect(pg.get_by_label("Content")).to_have_text("fresh")
    pg.get_by_role("button", name="Delete this memory").click()
    expect(pg.get_by_role("status").first).to_contain_text("deleted /old/stale.md")
    assert "dir=/old/" in pg.url
    expect(pg.get_by_role("link", name="keep.md")).to_be_visible()
    expect(pg.get_by_role("link", name="stale.md")).to_have_count(0)
    try:
        sdk.beta.memory_stores.memories.retrieve(mid, memory_store_id=sid)
        raise AssertionError("not deleted")
    except anthropic.NotFoundError:
        pass
    deleted = list(sdk.beta.memory_stores.memory_versions.list(sid, memory_id=mid))[0]
    assert deleted.operation == "deleted" and deleted.created_by.type == "user_actor"


def test_create_a_memory_with_errors_next_to_the_form(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Create", {"/exists.md": "x"})
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    pg.get_by_role("link", name="New memory").click()
    pg.get_by_label(re.compile("^Path")).fill("/exists.md")
    pg.get_by_label(re.compile("^Content")).fill("my long text\nkept")
    pg.get_by_role("button", name="Create memory").click()
    expect(pg.get_by_role("alert")).to_be_visible()
    assert pg.get_by_label(re.compile("^Content")).input_value() == "my long text\nkept"
    pg.get_by_label(re.compile("^Content")).fill("x" * 102_401)
    pg.get_by_label(re.compile("^Path")).fill("/new/note.md")
    pg.get_by_role("button", name="Create memory").click()
    expect(pg.get_by_role("alert")).to_contain_text("102400")
    pg.get_by_label(re.compile("^Content")).fill("\nstarts with a newline")
    pg.get_by_role("button", name="Create memory").click()
    expect(pg.get_by_role("status").first).to_contain_text("created /new/note.md")
    mid = memory_id(sdk, sid, "/new/note.md")
    assert content_of(sdk, sid, mid) == "\nstarts with a newline"
    # The new-memory form of a folder starts with the folder's path.
    pg.goto(f"/stores/{sid}?dir=/new/")
    pg.get_by_role("link", name="New memory").click()
    expect(pg.get_by_label(re.compile("^Path"))).to_have_value("/new/")


def test_an_archived_store_is_read_only(signed_in: Any, sdk: Sdk) -> None:
    sid = new_store(sdk, "Archived", {"/a.md": "a"})
    mid = memory_id(sdk, sid, "/a.md")
    sdk.beta.memory_stores.archive(sid)
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    expect(pg.get_by_text("read-only")).to_be_visible()
    expect(pg.get_by_role("link", name="New memory")).to_have_count(0)
    pg.get_by_role("link", name="a.md").click()
    expect(pg.get_by_label("Rendered Markdown")).to_have_text("a")
    for control in ("Edit", "Rename", "Delete…"):
        expect(pg.get_by_text(control, exact=True)).to_have_count(0)
    assert content_of(sdk, sid, mid) == "a"


XSS = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def test_hostile_content_path_and_store_name_run_nothing(signed_in: Any, sdk: Sdk) -> None:
    pg = signed_in
    dialogs = no_dialogs(pg)
    sid = new_store(sdk, XSS, {})
    path = "/<img src=x onerror=alert(3)>/<script>alert(4)</script>.md"
    body = (XSS + "\n\n[link](javascript:alert(5)) <b onmouseover=alert(6)>b</b>\n\n"
            "```\n" + XSS + "\n```\n")
    sdk.beta.memory_stores.memories.create(sid, path=path, content=body)
    mid = memory_id(sdk, sid, path)
    pg.goto(f"/stores/{sid}")
    expect(pg.get_by_role("heading", level=1)).to_contain_text("<script>alert(1)</script>")
    pg.get_by_role("link", name="<img src=x onerror=alert(3)>/").click()
    pg.get_by_role("link", name="<script>alert(4)</").click()  # "/" makes it a folder
    expect(pg.get_by_role("link", name="script>.md")).to_be_visible()
    for url in (f"/stores/{sid}/memories/{mid}", f"/stores/{sid}/memories/{mid}?view=raw",
                f"/stores/{sid}/search?q=script", f"/stores/{sid}/search?q=script&mode=exact",
                f"/stores/{sid}/search?q=" + XSS, f"/stores/{sid}/memories/{mid}/delete",
                "/stores"):
        pg.goto(url)
        pg.wait_for_load_state("load")
        assert pg.locator("main script, main img, main [onerror], main [onmouseover]").count() == 0
        assert pg.locator("a[href^='javascript:']").count() == 0
    pg.goto(f"/stores/{sid}/memories/{mid}")
    expect(pg.get_by_role("heading", level=1)).to_have_text(path)
    expect(pg.get_by_label("Rendered Markdown")).to_contain_text("<script>alert(1)</script>")
    # An edit that keeps the hostile text round-trips it exactly.
    pg.get_by_role("link", name="Edit", exact=True).click()
    pg.get_by_role("button", name="Save", exact=True).click()
    assert content_of(sdk, sid, mid) == body
    assert dialogs == []


def test_a_memory_page_follows_changes_unless_the_user_is_editing(signed_in: Any,
                                                                   sdk: Sdk) -> None:
    sid = new_store(sdk, "LiveMemory", {"/live.md": "first"})
    mid = memory_id(sdk, sid, "/live.md")
    pg = signed_in
    pg.goto(f"/stores/{sid}/memories/{mid}")
    expect(pg.locator("[data-live-status]")).to_have_text("live")
    pg.evaluate("window.notReloaded = true")
    sdk.beta.memory_stores.memories.update(mid, memory_store_id=sid, content="second")
    expect(pg.get_by_label("Rendered Markdown")).to_have_text("second")
    # The (closed, untouched) editor follows: saving from it now is no conflict.
    assert pg.get_by_label(re.compile("^Content")).input_value() == "second"
    assert pg.evaluate("window.notReloaded") is True
    sdk.beta.memory_stores.memories.update(mid, memory_store_id=sid, path="/moved.md")
    expect(pg.get_by_role("heading", level=1)).to_have_text("/moved.md")
    pg.get_by_role("link", name="Edit", exact=True).click()
    pg.get_by_label(re.compile("^Content")).fill("second, edited")
    pg.get_by_role("button", name="Save", exact=True).click()
    expect(pg.get_by_role("status").first).to_contain_text("saved /moved.md")
    sdk.beta.memory_stores.memories.delete(mid, memory_store_id=sid)
    expect(pg.get_by_text("This memory has been deleted")).to_be_visible()


def test_a_write_through_a_fuse_mount_appears_on_the_open_store_page(
        signed_in: Any, sdk: Sdk, console_server: Any, tmp_path: Path) -> None:
    require_fuse()
    sid = new_store(sdk, "LiveTree", {"/seed.md": "seed"})
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    expect(pg.locator("[data-live-status]")).to_have_text("live")
    pg.evaluate("window.notReloaded = true")
    mount = Mount(console_server.db, sid, tmp_path / "mnt", [])
    try:
        mount.wait_mounted()
        with open(mount.root / "from-the-agent.md", "w") as f:
            f.write("# Written through FUSE\n")
        written = time.monotonic()
        link = pg.get_by_role("link", name="from-the-agent.md")
        link.wait_for(timeout=5_000)
        latency = time.monotonic() - written
        print(f"\nlive update latency, close() in the mount to the link on the page: "
              f"{latency * 1000:.0f} ms")
        assert latency < 5
        expect(pg.locator("meter")).to_have_attribute("value", "2")
        (mount.root / "notes").mkdir()
        with open(mount.root / "notes" / "deep.md", "w") as f:
            f.write("deep")
        expect(pg.get_by_role("link", name="notes/")).to_be_visible()
        assert pg.evaluate("window.notReloaded") is True  # no reload: the region was updated
        link.click()
        expect(pg.get_by_label("Rendered Markdown").get_by_role("heading")).to_have_text(
            "Written through FUSE")
    finally:
        mount.stop()


def test_a_change_during_a_refresh_is_not_lost(signed_in: Any, sdk: Sdk) -> None:
    """A change that arrives while the region is being refreshed is shown too (a refresh
    follows the one in flight)."""
    sid = new_store(sdk, "Burst", {"/one.md": "1"})
    pg = signed_in
    pg.goto(f"/stores/{sid}")
    expect(pg.locator("[data-live-status]")).to_have_text("live")
    held: list[str] = []

    def stale_first_refresh(route: Any) -> None:
        if route.request.headers.get("x-memfs-fragment") != "1" or held:
            route.continue_()
            return
        response = route.fetch()  # the region as of the first change...
        held.append(route.request.url)
        sdk.beta.memory_stores.memories.create(sid, path="/three.md", content="3")
        time.sleep(0.5)  # ...answered after the second change reached the page
        route.fulfill(response=response)

    pg.route(re.compile(r"/stores/memstore_\w+(\?.*)?$"), stale_first_refresh)
    sdk.beta.memory_stores.memories.create(sid, path="/two.md", content="2")
    expect(pg.get_by_role("link", name="three.md")).to_be_visible()
    expect(pg.get_by_role("link", name="two.md")).to_be_visible()
    assert held


def test_a_full_store_of_2000_memories_on_a_phone(signed_in: Any, sdk: Sdk,
                                                 console_server: Any) -> None:
    from memfs.models import Actor
    from memfs.store import Store

    sid = new_store(sdk, "Full", {})
    seeder = Store(console_server.db)  # the server's database, from this process: faster
    try:
        for i in range(2000):
            path = f"/flat/n{i:04}.md" if i < 1000 else f"/f{i % 20}/s{i % 7}/n{i}.md"
            seeder.memories.create(sid, path, f"memory {i} " * 20, actor=Actor.api("apikey_seed"))
    finally:
        seeder.close()
    pg = signed_in
    pg.set_viewport_size({"width": 375, "height": 740})
    started = time.monotonic()
    pg.goto(f"/stores/{sid}")
    expect(pg.locator(".budget")).to_contain_text("2,000 / 2,000")
    expect(pg.get_by_role("listitem").filter(has_text="flat/")).to_contain_text("1000 memories")
    pg.get_by_role("link", name="flat/").click()
    expect(pg.locator("ul.entries > li")).to_have_count(1000)
    print(f"\n2,000 memories: store page and a folder of 1,000 in "
          f"{(time.monotonic() - started) * 1000:.0f} ms")
    assert page_width(pg) <= 375
    pg.get_by_role("link", name="n0999.md").click()
    expect(pg.get_by_role("heading", level=1)).to_have_text("/flat/n0999.md")
    assert page_width(pg) <= 375
    pg.goto(f"/stores/{sid}/search?q=memory 19&mode=exact")
    expect(pg.get_by_role("status")).to_contain_text("100+ memories with")
    assert page_width(pg) <= 375
    started = time.monotonic()
    # Ranked: by words, meaning covering none or few (the server's indexer starts on the 2,000
    # as soon as they are written: CI saw 8 embedded by then); a memory meaning has not seen is
    # judged by its words alone, so the best by words is first either way.
    pg.goto(f"/stores/{sid}/search?q=memory 19&threshold=0")
    expect(pg.locator("ol.hits > li")).to_have_count(20)
    print(f"ranked search of 2,000 memories, words only: "
          f"{(time.monotonic() - started) * 1000:.0f} ms")
    expect(pg.get_by_role("status")).to_contain_text(
        re.compile("words alone answered|the index is catching up"))
    expect(pg.locator("ol.hits > li").first.get_by_role("link")).to_have_text(
        "/flat/n0019.md")
    assert page_width(pg) <= 375
    pg.goto(f"/stores/{sid}/new")
    pg.get_by_label(re.compile("^Path")).fill("/one/too/many.md")
    pg.get_by_role("button", name="Create memory").click()
    expect(pg.get_by_role("alert")).to_contain_text("the limit is 2000")
    assert page_width(pg) <= 375


def test_a_memory_page_fits_a_phone_once_its_stylesheet_comes_late(signed_in: Any,
                                                                   sdk: Sdk) -> None:
    """CI saw a memory page 549 px wide on a 375 px phone: measured right after its heading
    appeared, before the stylesheet (revalidated at each load) had come, so its sha256 was
    not wrapped yet. The width is the styled page's: here the stylesheet is held back 0.5 s."""
    sid = new_store(sdk, "Late", {"/late.md": "held back"})
    pg = signed_in
    pg.set_viewport_size({"width": 375, "height": 740})

    def late(route: Any) -> None:
        time.sleep(0.5)
        route.continue_()

    pg.route("**/static/console.css", late)
    try:
        pg.goto(f"/stores/{sid}/memories/{memory_id(sdk, sid, '/late.md')}",
                wait_until="commit")
        expect(pg.get_by_role("heading", level=1)).to_have_text("/late.md")
        assert page_width(pg) <= 375
    finally:
        pg.unroute("**/static/console.css")
