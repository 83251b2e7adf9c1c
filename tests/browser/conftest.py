"""The Console in a real browser: Playwright driving Debian's headless ``chromium`` against a
real ``memfs serve`` subprocess, seeded through the official SDK.

Without chromium or Playwright these tests skip, except under ``CI=true``, where they fail
(``scripts/_setup.sh`` installs both). A failing test leaves a screenshot of its page in
``test-artifacts/`` (or ``$MEMFS_TEST_ARTIFACTS``) and says where.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.support import need
from tests.support.console import KEY, sign_in
from tests.support.server import Server, start_server, stop_server

ARTIFACTS = Path(os.environ.get("MEMFS_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "test-artifacts"))


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, "report_" + report.when, report)


# Package scope: the browser and Playwright's driver end with tests/browser, not at the end
# of the whole run, when later tests may have stopped stray processes of theirs.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "Playwright is not installed (pip install playwright)"
    executable = chromium_path()
    if why is None and executable is None:
        why = "no chromium on PATH (apt-get install chromium)"
    need(why is None, f"the Console's browser tests need a browser: {why}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True,
                              args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("console")
    # The local model, as a default ``memfs serve`` has (whatever $MEMFS_EMBEDDINGS says
    # here): it loads only for a store with vectors, which only the search test makes.
    server = start_server(tmp, "--api-key", KEY, env={"MEMFS_EMBEDDINGS": "local"})
    server.db = tmp / "memfs.db"  # type: ignore[attr-defined]
    yield server
    assert stop_server(server) == 0


@pytest.fixture
def sdk(console_server: Server) -> Iterator[anthropic.Anthropic]:
    """The official SDK against the same server, to seed and check what the Console shows."""
    with anthropic.Anthropic(base_url=console_server.url, api_key=KEY, max_retries=0) as client:
        yield client


@pytest.fixture
def page(browser: Any, console_server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page on the Console; JavaScript errors on the
    page fail the test."""
    context = browser.new_context(base_url=console_server.url)
    context.set_default_timeout(10_000)
    pg = context.new_page()
    js_errors: list[str] = []
    pg.on("pageerror", lambda exc: js_errors.append(str(exc)))
    # What the Console's Content-Security-Policy blocked (an inline script or style, a
    # javascript: link) is an error of the page too, unless a test expects it.
    pg.on("console", lambda msg: js_errors.append(msg.text) if (
        "Content Security Policy" in msg.text and not getattr(pg, "csp_expected", False))
        else None)
    yield pg
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / (re.sub(r"[^\w.-]+", "_", request.node.nodeid) + ".png")
        try:
            pg.screenshot(path=str(shot), full_page=True)
            print(f"\nscreenshot of the failing page: {shot}")
        except Exception as e:  # noqa: BLE001 - the test's own failure matters more
            print(f"\nno screenshot: {e}")
    context.close()
    assert js_errors == [], f"JavaScript errors on the page: {js_errors}"


@pytest.fixture
def signed_in(page: Any) -> Any:
    """``page``, signed in, on the stores list."""
    sign_in(page)
    page.wait_for_url("**/stores")
    return page
