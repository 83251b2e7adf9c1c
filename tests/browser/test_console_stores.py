"""The Console's sign-in and stores pages, in chromium."""

from __future__ import annotations

import http.server
import re
import threading
from typing import Any

import anthropic
import httpx

from tests.support.console import KEY, page_width, sign_in


def test_sign_in_refuses_a_wrong_key_and_returns_where_you_were_going(page: Any,
                                                                         console_server) -> None:
    page.goto("/stores?archived=1")
    assert "/signin" in page.url  # not signed in: sent to sign in first
    sign_in(page, "not-a-key", goto=False)
    assert page.get_by_role("alert").inner_text() == "that is not an API key of this server"
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/stores?archived=1")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/signin")
    page.goto("/stores")
    assert "/signin" in page.url


def test_a_post_without_the_csrf_token_is_refused(page: Any, console_server) -> None:
    sign_in(page)
    page.wait_for_url("**/stores")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    r = httpx.post(console_server.url + "/stores", data={"name": "forged"}, cookies=cookies)
    assert r.status_code == 403 and "CSRF" in r.text
    r = httpx.post(console_server.url + "/stores", data={"name": "forged", "csrf": "x" * 32},
                   cookies=cookies)
    assert r.status_code == 403


def test_create_edit_archive_and_delete_a_store(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    pg = signed_in
    pg.get_by_text("New store").click()
    pg.get_by_label("Name", exact=True).fill("Console Notes")
    pg.get_by_label("Description").fill("what the team knows")
    pg.get_by_label("Metadata").fill("team: support\nowner: ana")
    pg.get_by_role("button", name="Create store").click()
    pg.wait_for_url(re.compile(r"/stores/memstore_\w+$"))
    sid = pg.url.rsplit("/", 1)[1]
    made = sdk.beta.memory_stores.retrieve(sid)
    assert (made.name, made.description, made.metadata) == (
        "Console Notes", "what the team knows", {"team": "support", "owner": "ana"})

    pg.goto(f"/stores/{sid}/settings")
    pg.get_by_label("Metadata").fill("team: billing")
    pg.get_by_role("button", name="Save").click()
    assert "saved Console Notes" in pg.get_by_role("status").inner_text()
    assert sdk.beta.memory_stores.retrieve(sid).metadata == {"team": "billing"}

    # A bad value is the store's error, shown with the form as it was typed.
    pg.get_by_label("Name", exact=True).fill("")
    pg.get_by_label("Name", exact=True).evaluate("e => e.removeAttribute('required')")
    pg.get_by_role("button", name="Save").click()
    assert pg.get_by_role("alert").count() == 1

    pg.goto(f"/stores/{sid}/settings")
    pg.once("dialog", lambda d: d.accept())
    pg.get_by_role("button", name="Archive this store").click()
    assert "archived Console Notes" in pg.get_by_role("status").inner_text()
    assert sdk.beta.memory_stores.retrieve(sid).archived_at is not None
    pg.goto("/stores")  # archived stores are hidden unless asked for
    assert pg.get_by_role("link", name="Console Notes", exact=True).count() == 0
    pg.get_by_role("link", name="Show archived stores").click()
    assert pg.get_by_role("link", name="Console Notes", exact=True).count() == 1

    pg.goto(f"/stores/{sid}/settings")
    pg.get_by_label(re.compile("Type the store's name")).fill("console notes")
    pg.get_by_role("button", name="Delete this store").click()
    assert "type the store's name" in pg.get_by_role("alert").inner_text()
    pg.get_by_label(re.compile("Type the store's name")).fill("Console Notes")
    pg.get_by_role("button", name="Delete this store").click()
    pg.wait_for_url("**/stores")
    try:
        sdk.beta.memory_stores.retrieve(sid)
        raise AssertionError("the store was not deleted")
    except anthropic.NotFoundError:
        pass


def test_the_budget_bar_and_a_phone_screen(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    store = sdk.beta.memory_stores.create(name="Budgeted")
    for i in range(3):
        sdk.beta.memory_stores.memories.create(store.id, path=f"/n{i}.md", content="x")
    pg = signed_in
    pg.set_viewport_size({"width": 375, "height": 740})
    pg.goto("/stores")
    row = pg.get_by_role("row").filter(has_text="Budgeted")
    assert "3 / 2,000" in row.inner_text()
    assert row.locator("meter").get_attribute("value") == "3"
    # Readable on a phone: nothing wider than the screen.
    assert page_width(pg) <= 375
    # Keyboard: the first Tab reaches the skip link, which moves focus to the content.
    pg.keyboard.press("Tab")
    assert pg.evaluate("document.activeElement.textContent") == "Skip to content"


def test_a_name_another_live_store_has_is_said(signed_in: Any, sdk: anthropic.Anthropic) -> None:
    """Names need not be unique (the API allows it), but creating or renaming a store to the
    name of another live store is said on the result page, with the other store's id."""
    first = sdk.beta.memory_stores.create(name="Shared Name")
    pg = signed_in
    pg.get_by_text("New store").click()
    pg.get_by_label("Name", exact=True).fill("Shared Name")
    pg.get_by_role("button", name="Create store").click()
    pg.wait_for_url(re.compile(r"/stores/memstore_\w+$"))
    second = pg.url.rsplit("/", 1)[1]
    notice = pg.get_by_role("status").inner_text()
    assert "created the store Shared Name" in notice
    assert first.id in notice and second not in notice and "also named" in notice

    # A rename to it says so too; saving again without renaming does not.
    other = sdk.beta.memory_stores.create(name="Unshared")
    pg.goto(f"/stores/{other.id}/settings")
    pg.get_by_label("Name", exact=True).fill("Shared Name")
    pg.get_by_role("button", name="Save").click()
    notice = pg.get_by_role("status").inner_text()
    assert "saved Shared Name" in notice and first.id in notice and second in notice
    pg.get_by_label("Description").fill("now described")
    pg.get_by_role("button", name="Save").click()
    notice = pg.get_by_role("status").inner_text()
    assert "saved Shared Name" in notice and "also named" not in notice


def test_another_origin_cannot_frame_the_console(signed_in: Any, console_server) -> None:
    """A page on another port of the same host framed the signed-in Console (SameSite
    cookies do not tell ports apart), which let it overlay the Console's buttons (issue 19).
    The frame stays empty now; the same page opened directly works."""
    pg = signed_in
    page = f'<!doctype html><iframe name="c" src="{console_server.url}/stores"></iframe>'

    class Framer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = page.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    # A real server on 127.0.0.1 (a page Playwright made up counts as a public one, which
    # chromium never lets reach a local address at all).
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Framer) as framer:
        threading.Thread(target=framer.serve_forever, daemon=True).start()
        try:
            pg.csp_expected = True  # the refusal is reported on the page's console
            pg.goto(f"http://127.0.0.1:{framer.server_address[1]}/")
            frame = pg.frame(name="c")
            assert frame is not None
            frame.wait_for_load_state()
            pg.wait_for_timeout(500)
            assert "Sign out" not in frame.content() and "Stores" not in frame.content()
        finally:
            framer.shutdown()
    pg.csp_expected = False
    pg.goto("/stores")
    assert pg.get_by_role("button", name="Sign out").is_visible()


def test_go_back_on_an_error_page_works_under_the_content_security_policy(
        signed_in: Any) -> None:
    pg = signed_in
    pg.goto("/stores/memstore_nope/settings")
    assert pg.get_by_role("heading", name="Not found").is_visible()
    pg.get_by_role("link", name="Go back").click()
    pg.wait_for_url("**/stores")
