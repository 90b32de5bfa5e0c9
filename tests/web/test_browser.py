"""``memex serve`` in a real browser (Debian's chromium, driven by Playwright): what a person does, and what a hostile
mail and a hostile page cannot do.

One browser for the whole session (``browser`` in conftest.py); each test a fresh context. The archive: five sources,
real mails, a hostile mail, a chat with a photo, a voice note, a file, a reply, reactions, an edit and an unsend
(tests/web/archive.py); a second one holds a 100,000-message conversation. Every page visited is checked for
requests to any origin but the server and for console errors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import ROOT
from tests.web import archive as web_archive
from tests.web.conftest import Served, Watched

SHOTS = ROOT / "build" / "screenshots"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
HOSTILE_KEY = "messages/md/hostile-web%40example.com.json"
HOSTILE_URL = "/message/" + quote(HOSTILE_KEY, safe="")


def _clean(w: Watched, base: str) -> None:
    """No request left the server's origin, no console error or warning, no script error, no dialog."""
    assert w.foreign(base) == []
    assert w.console == [] and w.errors == []


def _conversation_of(served: Served, title: str) -> int:
    return next(c.key for c in served.archive.conversations(limit=100) if c.title == title)


def test_from_search_to_a_conversation_to_a_person_and_back_by_mouse(served: Served, page: Watched) -> None:
    """Typing a search shows results as you type (no submit), highlighted; a result opens its conversation scrolled to
    the message; the sender's name opens the person (every source joined, a chart); Back returns each step."""
    p = page.page
    p.goto(served.url + "/search")
    p.fill("#q", "lease")
    p.wait_for_selector("#results .hits li a")
    assert "q=lease" in p.url  # the address follows what was typed: bookmarkable
    assert p.locator("#results mark").first.inner_text().lower() == "lease"
    p.locator("#results .hits a", has_text="Anna Berg").first.click()
    p.wait_for_url(re.compile(r"/conversation/\d+\?around="))
    target = p.url.split("#", 1)[1]
    assert p.locator(f"#{target}").is_visible()
    p.locator(f"#{target} .who a, #{target} .mail-head a").first.click()
    p.wait_for_url(re.compile(r"/person/"))
    assert p.locator("h1").inner_text() == "Anna Berg"
    assert p.locator("svg.chart rect").count() >= 5  # messages per month, a bar part per source
    assert set(p.locator(".legend li").all_inner_texts()) >= {"mail", "phone", "sig", "work", "fb"}
    p.go_back()
    p.wait_for_url(re.compile(r"/conversation/"))
    p.go_back()
    p.wait_for_url(re.compile(r"/search\?q=lease"))
    assert p.input_value("#q") == "lease"
    _clean(page, served.url)


def test_the_same_by_keyboard(served: Served, page: Watched) -> None:
    """``/`` focuses the search box, Enter searches, Esc leaves the box, ``j``/``k`` move through the results, Enter
    opens one; in the conversation ``j`` and Enter open the sender; Esc goes back."""
    p = page.page
    p.goto(served.url + "/")
    p.keyboard.press("/")
    p.keyboard.type("lunch")
    p.keyboard.press("Enter")
    p.wait_for_url(re.compile(r"/search\?q=lunch"))
    p.wait_for_selector("#results .hits li")
    p.keyboard.press("Escape")
    p.keyboard.press("j")
    p.keyboard.press("j")
    p.keyboard.press("k")
    assert p.locator("#results li.current").count() == 1
    p.keyboard.press("Enter")
    p.wait_for_url(re.compile(r"/conversation/\d+\?around="))
    p.keyboard.press("j")
    assert p.locator("article.current .text").inner_text() == "lunch on sunday?"  # Anna's, the conversation's first
    p.keyboard.press("Enter")
    p.wait_for_url(re.compile(r"/person/"))
    assert p.locator("h1").inner_text() == "Anna Berg"
    p.keyboard.press("Escape")
    p.wait_for_url(re.compile(r"/conversation/"))
    p.keyboard.press("Escape")
    p.wait_for_url(re.compile(r"/search\?q=lunch"))
    _clean(page, served.url)


@pytest.mark.slow
def test_a_conversation_of_100000_messages_pages_both_ways(long_served: Served, page: Watched) -> None:
    """The latest page first; "Older messages" pages back and "Newer messages" forward, each page 50 messages in
    order without gaps; a message in the middle opens with its neighbours on both sides."""
    key = long_served.archive.conversations(limit=1)[0].key
    p = page.page

    def numbers() -> list[int]:
        return [int(t.rsplit(" ", 1)[1]) for t in p.locator("article .text").all_inner_texts()]

    def follow(link: str) -> None:
        """Click the pager link and wait until its page has loaded: a click only waits for the navigation to start,
        and reading the list before the new page is there reads an empty page."""
        before = p.url
        p.click(link)
        p.wait_for_url(lambda url: url != before)

    p.goto(f"{long_served.url}/conversation/{key}")
    assert numbers() == list(range(web_archive.LONG - 50, web_archive.LONG))
    assert p.locator("#newer").count() == 0
    follow("#older")
    follow("#older")
    assert numbers() == list(range(web_archive.LONG - 150, web_archive.LONG - 100))
    follow("#newer")
    assert numbers() == list(range(web_archive.LONG - 100, web_archive.LONG - 50))
    p.goto(f"{long_served.url}/conversation/{key}?around=messages%2Fsig%2Flong-050000.json")
    assert numbers() == list(range(50000 - 25, 50000 + 25))
    follow("#older")
    assert numbers() == list(range(50000 - 75, 50000 - 25))
    p.goto(f"{long_served.url}/conversation/{key}?after=-1")
    assert numbers()[0] == 0 and p.locator("#older").count() == 0
    _clean(page, long_served.url)


def test_an_image_displays_audio_plays_in_place_and_a_file_downloads(served: Served, page: Watched, tmp_path: Path) -> None:
    """In the chat: the photo is a thumbnail that loaded (its real size) and links to the full image; the voice note is
    the browser's audio player; the zip downloads under its name with its bytes; a reply quotes its message, the
    reactions, the edit and the unsend are shown, the edit's history one click away."""
    p = page.page
    p.goto(f"{served.url}/conversation/{_conversation_of(served, 'Photos with Anna')}")
    img = p.locator(".thumb img").first
    img.wait_for()
    assert p.evaluate("(el) => el.complete && el.naturalWidth", img.element_handle()) == 64
    assert p.locator("audio[controls]").count() == 1
    assert p.locator(".quote", has_text="look at the beach").count() == 1
    assert "❤️" in p.locator(".reaction").first.inner_text()
    assert p.locator("article.unsent").count() == 1
    with p.expect_download() as info:
        p.locator("a.file", has_text="plans.zip").click()
    download = info.value
    assert download.suggested_filename == "plans.zip"
    saved = tmp_path / "plans.zip"
    download.save_as(saved)
    assert saved.read_bytes() == b"PK\x05\x06" + bytes(18)
    p.locator("a.badge", has_text="edited").click()
    p.wait_for_url(re.compile(r"/message/.*#history"))
    history = p.locator("#history").inner_text()
    assert "thanks a lot\n" in history + "\n" and "thanks a lot!!" in history
    p.go_back()
    p.locator(".thumb").first.click()  # the thumbnail opens the image full size
    p.wait_for_url(re.compile(r"/attachment/0/"))
    assert p.evaluate("document.images.length === 1 && document.images[0].naturalWidth") == 64
    _clean(page, served.url)


def test_a_hostile_mail_runs_nothing_and_fetches_nothing(served: Served, page: Watched) -> None:
    """The hostile mail, in its conversation, alone with its HTML framed, and in search: no script runs (no dialog, no
    error, the title untouched), the browser asks nothing of any other origin (the tracking pixel and the CSS URLs
    are not even requested), terminal escapes and the bidi override are shown as escapes, the fence as text; its
    HTML, SVG and PDF attachments come only as downloads. Clicking "Load remote content" asks for the images then."""
    p = page.page
    p.goto(served.url + HOSTILE_URL)
    frame = p.frame_locator("iframe")
    frame.locator("body").wait_for()
    assert "pay now" in frame.locator("body").inner_text()
    inner = frame.locator("body").inner_html()
    assert "<script" not in inner and "javascript:" not in inner and "evil.example" not in inner and "onload" not in inner
    assert "\\u202e" in frame.locator("body").inner_text() and "\u202e" not in frame.locator("body").inner_text()
    assert p.locator("iframe").get_attribute("sandbox") == "allow-popups allow-popups-to-escape-sandbox"
    text = p.locator("main").inner_text()
    assert "\\x1b[2J" in text and "\\u202e" in text and "<<<end message-data 1>>>" in text
    assert "\x1b" not in text and "\u202e" not in text
    assert p.title().endswith("· memex") and "pwned" not in p.title()
    for name in ("page.html", "drawing.svg", "invoice.pdf"):
        link = p.locator("a.file", has_text=name)
        got = p.request.get(served.url + (link.get_attribute("href") or ""))
        assert got.headers["content-disposition"].startswith("attachment;"), name
        assert got.headers["content-type"] == "application/octet-stream"
    p.goto(f"{served.url}/search?q=customer")
    p.locator("#results .hits a").first.click()
    p.wait_for_url(re.compile(r"/conversation/"))
    _clean(page, served.url)
    # "Load remote content" is the user's choice for this message: then (and only then) the images are asked for
    p.route(f"http://{web_archive.EVIL}/**", lambda route: route.abort())
    p.goto(served.url + HOSTILE_URL)
    p.click("#load-remote")
    p.wait_for_url(re.compile(r"remote=1"))
    p.frame_locator("iframe").locator("img").first.wait_for(state="attached")
    assert f"http://{web_archive.EVIL}/pixel.gif" in page.requests
    assert p.frame_locator("iframe").locator("script").count() == 0


def test_another_origin_cannot_read_the_archive(served: Served, browser: Any) -> None:
    """A page of another origin in the same browser: its script's fetch of the archive is refused by the browser (no
    CORS header), and the same page under a rebound name (its name resolving to 127.0.0.1: DNS rebinding) gets 421
    and no data from the server."""
    context = browser.new_context()
    try:
        attacker = context.new_page()
        steal = f"""<!doctype html><title>attacker</title><script>
          fetch("{served.url}/search?q=lease").then(r => r.text()).then(t => document.title = "read " + t.length)
            .catch(e => document.title = "blocked");
        </script>"""
        attacker.route("http://attacker.test/**", lambda route: route.fulfill(status=200, content_type="text/html", body=steal))
        attacker.goto("http://attacker.test/")
        attacker.wait_for_function("document.title !== 'attacker'")
        assert attacker.title() == "blocked"
        # DNS rebinding: the attacker's name now points at the server; the request reaches it with that Host
        got = context.request.get(served.url + "/search?q=lease", headers={"Host": f"attacker.test:{served.port}"})
        assert got.status == 421 and "lease" not in got.text()
        cors = context.request.get(served.url + "/search?q=lease", headers={"Origin": "http://attacker.test"})
        assert cors.status == 200 and not any(h.startswith("access-control-") for h in cors.headers)
    finally:
        context.close()


PAGES = {
    "conversations": "/",
    "conversation": "/conversation/{photos}",
    "mail": HOSTILE_URL,
    "search": "/search?q=lease",
    "person": "/person/anna-berg",
    "timeline": "/timeline?day=2025-03-01&span=week",
    "sources": "/sources",
    "people": "/people",
}


@pytest.mark.slow
def test_every_page_at_two_sizes_light_and_dark_screenshots_and_accessibility(served: Served, browser: Any) -> None:
    """Each page at 1280x800 and 390x844, light and dark: a screenshot into build/screenshots/, nothing wider than
    the phone's screen, no foreign request or console error; axe-core finds no serious or critical violation on any
    page in either scheme."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    photos = _conversation_of(served, "Photos with Anna")
    axe = AXE.read_text()
    problems: list[str] = []
    for scheme in ("light", "dark"):
        for width, height in ((1280, 800), (390, 844)):
            context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
            try:
                w = Watched(context)
                for name, path in PAGES.items():
                    w.page.goto(served.url + path.format(photos=photos))
                    w.page.wait_for_load_state("load")
                    w.page.screenshot(path=str(SHOTS / f"{name}-{width}-{scheme}.png"))
                    if width == 390:
                        wide = w.page.evaluate("document.documentElement.scrollWidth")
                        assert wide <= width + 1, (name, wide)
                    if width == 1280:
                        found = w.page.evaluate(axe + "\n;axe.run(document, {resultTypes: ['violations']})")
                        problems += [f"{name} {scheme}: {v['id']} ({v['impact']}): {v['nodes'][0]['html'][:120]}"
                                     for v in found["violations"] if v["impact"] in ("serious", "critical")]  # fmt: skip
                _clean(w, served.url)
            finally:
                context.close()
    assert problems == [], json.dumps(problems, indent=1)
