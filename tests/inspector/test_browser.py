"""The inspector in a real browser: Debian's headless Chromium driven by Playwright (the browser
found on the machine, never downloaded), a screenshot of each view.

Skipped, with the reason, where no Chromium is installed; required under CI=true, whose
`.ci/run` installs it. `python -m tests.inspector.test_browser docs/inspector.png` remakes the
README's screenshot.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from chatmemory._cli.inspect import sqlite_lookups
from chatmemory.inspector import create_app
from chatmemory.stores.sqlite import SqliteChatMemoryStore
from tests.conftest import IN_CI
from tests.inspector.seed import ATTACK, TRIP, seed

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require_browser() -> Any:
    """Playwright's sync API, or a skip (a failure under CI=true) saying what is missing."""
    missing = None
    if not Path(CHROMIUM).exists():
        missing = "no Chromium at /usr/bin/chromium (apt-get install chromium)"
    try:
        from playwright import sync_api
    except ImportError:
        missing = "the playwright package is not installed (pip install playwright)"
    if missing is not None:
        if IN_CI:
            pytest.fail(f"the browser tests are required under CI=true: {missing}")
        pytest.skip(missing)
    return sync_api


@contextmanager
def serving(path: Path) -> Iterator[str]:
    """The inspector of the SQLite file at `path` on a free loopback port, as `chatmemory
    inspect` serves it; its base URL."""
    with (
        SqliteChatMemoryStore(path, read_only=True, create=False) as store,
        sqlite_lookups(path) as (titles, users),
    ):
        app = create_app(store, titles=titles, users=users, source=f"SQLite {path.name}")
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            assert time.monotonic() < deadline, "the server did not start in 20 s"
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(10)


@contextmanager
def browser_page(sync_api: Any) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    sync_api = _require_browser()
    path = tmp_path_factory.mktemp("inspect") / "chat.db"
    seed(path)
    with serving(path) as url, browser_page(sync_api) as page:
        yield page, url


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path


def test_the_conversations_view(site: tuple[Any, str], shots: Path) -> None:
    page, url = site
    page.goto(url + "/")
    rows = page.locator("table.conversations tbody tr")
    assert rows.count() == 2
    assert rows.nth(1).inner_text().split("\t")[:3] == ["ann:trip", "Ann's trip", "ann"]
    page.screenshot(path=shots / "conversations.png", full_page=True)
    assert (shots / "conversations.png").stat().st_size > 5_000


def test_the_conversation_view_draws_bars_folds_and_shows_attacks_as_text(
    site: tuple[Any, str], shots: Path
) -> None:
    page, url = site
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(url + "/")
    page.click("text=ann:trip")
    assert page.title() == f"{TRIP} · chatmemory inspect"  # the stored <script> did not run
    window = page.locator("section.window")
    attack = window.locator(".msg.role-user").last.locator("pre.text")
    assert attack.inner_text() == ATTACK  # shown as the text it is
    assert page.locator("section.history img").count() == 0
    # token bars: drawn by the page's script, widths in proportion to the counts
    bars = page.locator("section.history > .msg .bar")
    widths = [bars.nth(i).bounding_box()["width"] for i in range(bars.count())]
    counts = [int(c) for c in page.locator("section.history > .msg .count").all_inner_texts()]
    biggest = counts.index(max(counts))
    assert widths[biggest] == max(widths) > 0
    assert widths[counts.index(min(counts))] < widths[biggest]
    # the tool call is folded with its result until opened
    result = window.locator("details.tool-group .msg.role-tool")
    assert not result.is_visible()
    window.locator("details.tool-group summary").click()
    assert result.is_visible()
    # evicted messages are greyed
    opacity = page.locator("section.history .msg.evicted").first.evaluate(
        "el => getComputedStyle(el).opacity"
    )
    assert float(opacity) < 1
    page.screenshot(path=shots / "conversation.png", full_page=True)
    assert not dialogs


def test_the_recall_and_search_views(site: tuple[Any, str], shots: Path) -> None:
    page, url = site
    page.goto(f"{url}/c/ann%3Atrip")
    page.fill("form.recall input[name=recall]", "locker code")
    page.click("form.recall button")
    # a relevance score on recall's one scale, 0 to 1 (hybrid: 1.000 is first in both rankings)
    shown = page.locator("section.recalled .score").first.inner_text()
    assert re.fullmatch(r"score (0\.\d{3}|1\.000)", shown), shown
    assert "4711" in page.locator("section.recalled").inner_text()
    page.screenshot(path=shots / "recall.png", full_page=True)
    page.fill("header input[name=q]", "lisbon")
    page.press("header input[name=q]", "Enter")
    page.wait_for_url("**/search?q=lisbon")
    assert page.locator("main h2").all_inner_texts() == ["ann:trip"]
    assert page.locator("main .msg").count() == 5
    page.screenshot(path=shots / "search.png", full_page=True)


def _screenshot(target: Path) -> None:  # pragma: no cover - run by hand for the README
    from playwright import sync_api

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chat.db"
        seed(path)
        with serving(path) as url, browser_page(sync_api) as page:
            page.set_viewport_size({"width": 1280, "height": 760})
            page.goto(f"{url}/c/ann%3Atrip?recall=locker+code&top_k=1")
            page.locator("section.window details.tool-group summary").click()
            page.screenshot(path=target)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("CHATMEMORY_HOME", tempfile.mkdtemp())
    _screenshot(Path(sys.argv[1]))
