"""The Console's Keys page and a stored key's sign-in, in chromium (issue 22)."""

from __future__ import annotations

import time
from typing import Any

import anthropic

from tests.support.console import sign_in


def test_a_key_made_on_the_keys_page_signs_in_until_it_is_revoked(
        signed_in: Any, browser: Any, console_server: Any, sdk: anthropic.Anthropic) -> None:
    """An admin makes a read-only key; someone signs in with it in their own browser and sees
    no button that writes; the admin revokes it; the open page of the other goes to the sign-in
    page by itself, saying why."""
    admin = signed_in
    sid = sdk.beta.memory_stores.create(name="Team docs").id
    admin.get_by_role("link", name="Keys").click()
    admin.wait_for_url("**/keys")
    admin.get_by_text("New key").click()
    admin.get_by_label("Name", exact=True).fill("reviewer")
    admin.get_by_label("Role").select_option("read_only")
    admin.get_by_role("button", name="Make key").click()
    secret = admin.locator("[data-secret]").input_value()
    assert secret.startswith("memfs_key_")
    assert "shown this once" in admin.get_by_role("status").inner_text()

    context = browser.new_context(base_url=console_server.url)
    context.set_default_timeout(10_000)
    try:
        other = context.new_page()
        sign_in(other, secret)
        other.wait_for_url("**/stores")
        assert "reviewer" in other.locator(".who").inner_text()
        assert other.get_by_text("New store").count() == 0
        assert other.get_by_role("link", name="Keys").count() == 0
        other.goto(f"/stores/{sid}")
        assert other.get_by_role("link", name="New memory").count() == 0
        other.locator("[data-live-status].on").wait_for()  # the live feed is open

        admin.goto("/keys")
        admin.once("dialog", lambda d: d.accept())
        revoked_at = time.monotonic()
        admin.get_by_role("button", name="Revoke reviewer").click()
        assert "revoked the key reviewer" in admin.get_by_role("status").inner_text()
        other.wait_for_url("**/signin?**", timeout=5_000)
        took = time.monotonic() - revoked_at
        print(f"\nthe revoked key's open page was at the sign-in page after {took:.2f} s")
        assert "was revoked" in other.get_by_role("status").inner_text()
        other.goto(f"/stores/{sid}")
        assert "/signin" in other.url
    finally:
        context.close()
