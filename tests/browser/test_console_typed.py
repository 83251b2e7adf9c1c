"""Typed memories in the Console, in chromium (issue 41): the chips and the expiry badge render
on a store's list, a chip and the filter form filter it, the describe page links back, a
hostile tag runs nothing, and both fit a phone."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.support.console import Sdk, new_store, no_dialogs, page_width

HOSTILE = "<img src=x onerror=alert(7)>"


def test_chips_badge_and_the_filter(signed_in: Any, sdk: Sdk) -> None:
    pg = signed_in
    dialogs = no_dialogs(pg)
    sid = new_store(sdk, "Typed", {
        "/knowledge/soon.md": f"---\ntags: [alpha, '{HOSTILE}']\nexpires: 3d2h\n---\nsoon",
        "/knowledge/other.md": "---\ntags: [beta]\n---\nother",
        "/context/today.md": "what the work needs now",
    })
    pg.goto(f"/stores/{sid}?dir=/knowledge/")
    tree = pg.get_by_role("region", name="Memories")
    soon = tree.get_by_role("listitem").filter(has_text="soon.md")
    expect(soon.get_by_role("link", name="knowledge", exact=True)).to_be_visible()
    expect(soon.get_by_role("link", name="#alpha")).to_be_visible()
    expect(soon.get_by_role("link", name="#" + HOSTILE)).to_be_visible()
    expect(soon.locator(".tag.expiry")).to_have_text("expires in 3 days")
    # A tag's chip lists the memories with that tag, anywhere in the store.
    soon.get_by_role("link", name="#alpha").click()
    assert "tag=alpha" in pg.url
    expect(tree.get_by_role("status")).to_contain_text("tagged alpha")
    expect(tree.locator("li.file")).to_have_count(1)
    expect(tree.get_by_role("link", name="/knowledge/soon.md")).to_be_visible()
    # The form: by type (the store's types offered), the tag cleared.
    form = pg.get_by_role("form", name="Filter memories")
    form.get_by_label("Type").select_option("context")
    form.get_by_label("Tag").fill("")
    form.get_by_role("button", name="Filter").click()
    pg.wait_for_url(re.compile(r"type=context"))
    expect(tree.locator("li.file")).to_have_count(1)
    item = tree.get_by_role("listitem").filter(has_text="/context/today.md")
    expect(item.locator(".tag.expiry")).to_have_text("expires in 7 days")
    form.get_by_role("link", name="Clear").click()
    expect(tree.get_by_role("link", name="knowledge/")).to_be_visible()
    # The describe page, its counts linked to the filtered list.
    pg.get_by_role("link", name="Describe").click()
    expect(pg.get_by_role("heading", level=1)).to_contain_text("What Typed")
    pg.get_by_role("region", name="By tag").get_by_role("link", name="#beta").click()
    expect(tree.get_by_role("link", name="/knowledge/other.md")).to_be_visible()
    assert pg.locator("main img, main [onerror]").count() == 0
    # A phone: nothing wider than the screen, the chips and the describe page wrap.
    pg.set_viewport_size({"width": 375, "height": 740})
    for url in (f"/stores/{sid}?dir=/knowledge/", f"/stores/{sid}/describe"):
        pg.goto(url)
        assert page_width(pg) <= 375, url
    assert dialogs == []
