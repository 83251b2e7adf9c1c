"""Typed memories in the Console (issue 41), in-process (starlette TestClient), on SQLite and
on PostgreSQL: a store's memories with their type and tag chips, an expiry badge and a
warnings marker; the filter by type and tag, kept across pages and in the live refresh; a
memory's page with what it says about itself; the describe page; hostile tags escaped and no
query value that makes a 500."""

from __future__ import annotations

import html
import re
import urllib.parse
from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.console.typed import expiry_badge, importance_label
from memfs.models import Actor

KEY = "console-typed-key"
ACTOR = Actor.user("user_1")
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def browser(store):
    with TestClient(create_app(store, [KEY]), base_url="http://console.test",
                    follow_redirects=False) as c:
        r = c.post("/signin", data={"api_key": KEY, "next": "/stores"})
        assert r.status_code == 303
        yield c


def new_store(store, memories: dict[str, str], **metadata: str) -> str:
    sid = store.stores.create(name="Typed", metadata=metadata or None).id
    for path, content in memories.items():
        store.memories.create(sid, path, content, actor=ACTOR)
    return sid


def front(body: str = "body", **keys: str) -> str:
    return "---\n" + "".join(f"{k}: {v}\n" for k, v in keys.items()) + "---\n" + body


def entries(page: str) -> dict[str, str]:
    """The memories of a store page's list, by the text of their link: each entry's text
    (tags stripped, entities decoded, spaces folded)."""
    out = {}
    for item in re.findall(r'<li class="file">(.*?)</li>', page, re.S):
        name = html.unescape(re.search(r"<a [^>]*>(.*?)</a>", item, re.S).group(1))
        out[name] = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", item))).strip()
    return out


def test_a_folder_lists_each_memory_with_chips_an_expiry_badge_and_warnings(browser, store):
    sid = new_store(store, {
        "/knowledge/soon.md": front(tags=f"[alpha, '{HOSTILE}']", expires="3d2h"),
        "/knowledge/today.md": front(expires="2h", description=f"about {HOSTILE}"),
        "/knowledge/old.md": front(expires="2020-01-01"),
        "/knowledge/bad.md": front(importance="huge", pinned="maybe"),
        "/knowledge/plain.md": "no front matter, a knowledge memory by its directory",
        "/context/today.md": "context: expires 7 days after its last change",
        "/loose.md": "no type",
    }, memfs_expiry="report")  # "report": the expired memory stays listed
    r = browser.get(f"/stores/{sid}", params={"dir": "/knowledge/"})
    assert r.status_code == 200
    shown = entries(r.text)
    assert "knowledge #alpha #" + HOSTILE + " expires in 3 days" in shown["soon.md"]
    assert "expires today" in shown["today.md"] and "about " + HOSTILE in shown["today.md"]
    assert "expired" in shown["old.md"] and "expires" not in shown["old.md"]
    assert "⚠ 2 warnings" in shown["bad.md"]
    assert shown["plain.md"].startswith("plain.md knowledge ") and "expire" not in shown[
        "plain.md"]
    # Agent-written text is escaped everywhere: in the page, in the links, in titles.
    assert HOSTILE not in r.text
    assert r.text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # chip, title, text
    tag_link = f"/stores/{sid}?" + urllib.parse.urlencode({"tag": HOSTILE})
    assert f'href="{html.escape(tag_link)}"' in r.text
    assert f'href="/stores/{sid}?type=knowledge"' in r.text
    assert f'href="/stores/{sid}?tag=alpha"' in r.text
    # The warnings marker lists them in its title.
    marker = re.search(r'<span class="tag warn" title="([^"]*)"', r.text).group(1)
    assert "importance: 'huge'" in html.unescape(marker) and "pinned" in marker
    # The exact time is in the badge's title.
    assert re.search(r'class="tag expiry expired" title="expires at 2020-01-01T00:00:00', r.text)
    context = entries(browser.get(f"/stores/{sid}", params={"dir": "/context/"}).text)
    assert "context expires in 7 days" in context["today.md"]
    loose = entries(browser.get(f"/stores/{sid}").text)["loose.md"]
    assert "expire" not in loose and "⚠" not in loose


def test_filter_by_type_and_tag_across_pages_and_in_the_live_refresh(browser, store):
    memories = {f"/knowledge/k{i:02}.md": front(tags="[bulk]") for i in range(55)}
    memories |= {"/knowledge/other.md": front(tags="[other]"),
                 "/decisions/d.md": front(tags="[bulk]"), "/notes/n.md": "untyped"}
    sid = new_store(store, memories)
    r = browser.get(f"/stores/{sid}", params={"type": "knowledge", "tag": "bulk"})
    assert r.status_code == 200
    first = entries(r.text)
    assert len(first) == 50 and all(p.startswith("/knowledge/k") for p in first)
    # The filter form shows the store's types, the one asked for selected, and the tag.
    assert re.search(r'<option value="knowledge" selected>knowledge</option>', r.text)
    for t in ("preference", "context", "decision"):
        assert f'<option value="{t}">{t}</option>' in r.text
    assert 'name="tag" value="bulk"' in r.text
    # The next page keeps the filters; the live region refreshes this same listing.
    more = html.unescape(re.search(r'<a href="([^"]+)" rel="next">', r.text).group(1))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(more).query)
    assert query["type"] == ["knowledge"] and query["tag"] == ["bulk"] and query["page"]
    assert f'data-live-refresh="/stores/{sid}?type=knowledge&amp;tag=bulk"' in r.text
    r2 = browser.get(more)
    assert r2.status_code == 200
    second = entries(r2.text)
    assert len(second) == 5 and not set(first) & set(second)
    assert 'rel="next"' not in r2.text
    refresh = html.unescape(re.search(r'data-live-refresh="([^"]+)"', r2.text).group(1))
    fragment = browser.get(refresh, headers={"x-memfs-fragment": "1"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert entries(fragment.text) == second
    # A tag alone, below a folder; a type alone.
    assert set(entries(browser.get(f"/stores/{sid}", params={"tag": "bulk",
                                                             "dir": "/decisions/"}).text)
               ) == {"/decisions/d.md"}
    assert set(entries(browser.get(f"/stores/{sid}", params={"type": "decision"}).text)
               ) == {"/decisions/d.md"}
    # Cleared: the folders again.
    top = browser.get(f"/stores/{sid}", params={"type": "", "tag": " "})
    assert top.status_code == 200 and "knowledge/</a>" in top.text


@pytest.mark.parametrize("query", [
    {"type": "nosuchtype"}, {"tag": "nosuchtag"}, {"type": "x" * 65}, {"tag": "t" * 65},
    {"type": HOSTILE}, {"tag": HOSTILE}, {"tag": "\x00"}, {"type": "\x00"}, {"type": "a\nb"},
    {"tag": "%", "type": "'; drop table memories; --"}, {"type": "knowledge", "page": "junk"},
    {"tag": "x", "dir": "../../etc"}, {"type": "(none)"},
])
def test_no_filter_value_makes_a_500_and_each_is_shown_escaped(browser, store, query):
    sid = new_store(store, {"/knowledge/a.md": front(tags="[x]")})
    r = browser.get(f"/stores/{sid}", params=query)
    assert r.status_code in (200, 400), r.text[-2000:]
    assert HOSTILE not in r.text
    if r.status_code == 400:
        assert re.search(r'class="error" role="alert">[^<]+', r.text)
    assert "/knowledge/a.md" not in entries(r.text) or query.get("tag") == "x"


def test_an_unknown_type_says_which_types_the_store_has(browser, store):
    sid = new_store(store, {"/knowledge/a.md": "k"})
    r = browser.get(f"/stores/{sid}", params={"type": "nosuchtype"})
    assert r.status_code == 200 and entries(r.text) == {}
    assert ("'nosuchtype' is not one of this store's types (preference, context, knowledge, "
            "decision)") in html.unescape(r.text)
    off = new_store(store, {"/knowledge/a.md": "k"}, memfs_types="off")
    r = browser.get(f"/stores/{off}", params={"type": "knowledge"})
    assert "its types are off" in r.text
    assert "<option value=\"knowledge\" selected>" in r.text  # what was asked, kept


def test_a_memory_page_shows_what_it_says_about_itself(browser, store):
    sid = new_store(store, {
        "/decisions/old.md": "the old decision",
        "/decisions/new.md": front(
            tags=f"[db, '{HOSTILE}']", importance="high", expires="3d2h",
            description=f"why we chose <b>PostgreSQL</b> {HOSTILE}",
            supersedes="[/decisions/old.md, /decisions/gone.md]", source="meeting 12",
            pinned="true", colour="blue"),
        "/knowledge/bad.md": front(importance="huge"),
    })
    ids = {m.path: m.id for m in store.memories.tree(sid)}
    r = browser.get(f"/stores/{sid}/memories/{ids['/decisions/new.md']}")
    assert r.status_code == 200
    facts = re.search(r'<dl class="facts typed"[^>]*>(.*?)</dl>', r.text, re.S).group(1)
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", facts)))
    for expected in ("Type decision", "Importance high (0.8)", "expires in 3 days",
                     "Tags #db #" + HOSTILE, "Pinned yes",
                     f"Description why we chose <b>PostgreSQL</b> {HOSTILE}",
                     "Supersedes /decisions/old.md , /decisions/gone.md (no memory there now)",
                     "Source meeting 12"):
        assert expected in text, (expected, text)
    assert HOSTILE not in r.text and "<b>PostgreSQL</b>" not in r.text
    assert f'href="/stores/{sid}/memories/{ids["/decisions/old.md"]}"' in facts
    assert f'href="/stores/{sid}?type=decision"' in facts
    # The live fragment of the page shows the same.
    fragment = browser.get(f"/stores/{sid}/memories/{ids['/decisions/new.md']}",
                           headers={"x-memfs-fragment": "1"})
    assert 'class="facts typed"' in fragment.text
    bad = browser.get(f"/stores/{sid}/memories/{ids['/knowledge/bad.md']}")
    assert "1 warning</strong>" in bad.text
    assert "importance: 'huge' is not low, medium, high" in html.unescape(bad.text)
    assert "Importance medium (0.5)" in html.unescape(
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", bad.text)))
    plain = browser.get(f"/stores/{sid}/memories/{ids['/decisions/old.md']}")
    assert "Expires" in plain.text and "never" in plain.text


def test_the_describe_page_counts_and_links_each_count_to_its_memories(browser, store):
    sid = new_store(store, {
        "/knowledge/a.md": front(tags=f"[alpha, '{HOSTILE}']"),
        "/knowledge/b.md": front(tags="[alpha]", importance="huge"),
        "/context/today.md": "expires in 7 days",
        "/knowledge/old.md": front(expires="2020-01-01"),
        "/loose.md": "untyped",
    }, memfs_expiry="report")
    ids = {m.path: m.id for m in store.memories.tree(sid)}
    r = browser.get(f"/stores/{sid}/describe")
    assert r.status_code == 200
    assert HOSTILE not in r.text
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.text)))
    assert "5 memories" in text
    assert "context 1" in text and "knowledge 3" in text and "no type 1" in text
    assert "/context/ 1" in text and "/knowledge/ 3" in text and "/ 1" in text
    assert "#alpha 2" in text and f"#{HOSTILE} 1" in text
    assert "Expiring within 7 days: 1" in text and "Expired: 1" in text
    assert "only reported" in text
    assert "Warnings: 1" in text and "importance: 'huge'" in text
    assert re.search(r"Oldest change /knowledge/a.md", text)
    assert re.search(r"Newest change /loose.md", text)
    assert "The default types" in text and "preference /preferences/ high (0.8) general never" \
        in text and "context /context/ low (0.2) workflow after 7d" in text
    for link in (f"/stores/{sid}?type=knowledge", f"/stores/{sid}?tag=alpha",
                 f"/stores/{sid}?dir=%2Fknowledge%2F", f"/stores/{sid}/memories/"
                 f"{ids['/knowledge/old.md']}", f"/stores/{sid}/memories/{ids['/loose.md']}"):
        assert f'href="{html.escape(link)}"' in r.text, link
    # Every link of the page answers (a count's link lists its memories).
    tag_page = browser.get(f"/stores/{sid}", params={"tag": HOSTILE})
    assert set(entries(tag_page.text)) == {"/knowledge/a.md"}
    on = new_store(store, {"/knowledge/old.md": front(expires="2020-01-01")},
                   memfs_types="off")
    r = browser.get(f"/stores/{on}/describe")
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.text)))
    assert "Expiry is on" in text and "Types are off" in text
    # The store page links to it.
    assert f'href="/stores/{sid}/describe"' in browser.get(f"/stores/{sid}").text


def test_the_expiry_badge_and_importance_words() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def badge(delta: timedelta) -> str:
        at = (now + delta).isoformat().replace("+00:00", "Z")
        return re.sub(r"<[^>]+>", "", str(expiry_badge(at, now)))

    assert badge(timedelta(days=7) - timedelta(seconds=1)) == "expires in 7 days"
    assert badge(timedelta(days=3, hours=2)) == "expires in 3 days"
    assert badge(timedelta(hours=13)) == "expires in 1 day"
    assert badge(timedelta(hours=11)) == "expires today"
    assert badge(timedelta(seconds=1)) == "expires today"
    assert badge(timedelta(0)) == badge(-timedelta(days=400)) == "expired"
    assert 'class="tag expiry later"' in str(expiry_badge("2026-04-01T00:00:00Z", now))
    assert str(expiry_badge(None, now)) == str(expiry_badge("not a time", now)) == ""
    assert [importance_label(v) for v in (0.8, 0.5, 0.2, 0.33, None)] == [
        "high (0.8)", "medium (0.5)", "low (0.2)", "0.33", ""]


def test_a_memory_the_sweep_deleted_says_so_in_its_history(browser, store):
    """SPEC §8: an expiry is a version by the expiry actor, shown as what it is."""
    sid = new_store(store, {"/a.md": front(expires="2020-01-01")})
    [m] = store.memories.tree(sid)
    assert [d["path"] for d in store.typed.sweep(sid)["deleted"]] == ["/a.md"]
    page = browser.get(f"/stores/{sid}/memories/{m.id}/history").text
    assert "the expiry sweep" in page and "svac_memfs_expiry" in page
