"""The inspector's pages, through HTTP (Starlette's test client): what each shows, that every
stored text is escaped, that nothing is written, and `chatmemory inspect`'s wiring."""

from __future__ import annotations

import hashlib
import html
import re
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
import uvicorn
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.testclient import TestClient

from chatmemory import AiMessage, StoreError, ToolExecutionRequest, UserMessage
from chatmemory._cli import app as cli_app
from chatmemory._cli.inspect import sqlite_lookups
from chatmemory._tokens import OpenAiTokenCountEstimator
from chatmemory.inspector import create_app
from chatmemory.inspector._views import preview_recall
from chatmemory.stores.in_memory import InMemoryChatMemoryStore
from chatmemory.stores.sqlite import SqliteChatMemoryStore
from tests.conftest import POSTGRES_DSN, REDIS_URL
from tests.inspector.seed import ATTACK, LOCKER, TRIP
from tests.stores import backends as _backends  # noqa: F401  (loads the backend modules first)
from tests.stores.backend_postgres import isolated_schema
from tests.stores.backend_redis import isolated_prefix

GPT_4O_MINI = OpenAiTokenCountEstimator("gpt-4o-mini")


def client(app: Starlette) -> TestClient:
    return TestClient(app, raise_server_exceptions=True)


def messages(page: str) -> list[tuple[int, str, str]]:
    """(seq, classes, tokens) of each message drawn on a page section, in order."""
    found = re.findall(
        r'<div class="msg ([^"]*)" data-seq="(\d+)">.*?<span class="count">(\d+)</span>',
        page,
        flags=re.S,
    )
    return [(int(seq), classes, tokens) for classes, seq, tokens in found]


def section(page: str, name: str) -> str:
    start = page.index(f'<section class="{name}">')
    return page[start : page.index("</section>", start)]


def test_the_conversations_page_lists_ids_titles_users_and_sizes(app: Starlette) -> None:
    page = client(app).get("/").text
    rows = re.findall(r"<tr>\s*<td><a href=\"([^\"]+)\">([^<]+)</a></td>(.*?)</tr>", page, re.S)
    assert [(href, name) for href, name, _ in rows] == [
        ("/c/bob%3Achat", "bob:chat"),
        ("/c/ann%3Atrip", "ann:trip"),
    ]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[1][2], re.S)
    assert html.unescape(cells[0]) == "Ann's trip"
    assert 'href="/?user=ann">ann</a>' in cells[1]
    assert cells[2:4] == ["10", "6"]  # messages, window


def test_a_user_link_shows_that_users_conversations_only(app: Starlette) -> None:
    page = client(app).get("/", params={"user": "ann"}).text
    assert "ann:trip" in page
    assert "bob:chat" not in page
    assert "No conversations stored for carol" in client(app).get("/?user=carol").text


def test_a_conversation_shows_its_window_beside_its_history(app: Starlette, seeded: Path) -> None:
    page = client(app).get(f"/c/{TRIP}").text
    with SqliteChatMemoryStore(seeded, read_only=True, create=False) as store:
        entries = store.history(TRIP)
    window = messages(section(page, "window"))
    history = messages(section(page, "history"))
    assert [seq for seq, _, _ in window] == [e.seq for e in entries if e.in_window]
    assert [seq for seq, _, _ in history] == [e.seq for e in entries]
    # each message's exact count, as the estimator counts it
    assert [int(t) for _, _, t in history] == [
        GPT_4O_MINI.count_message(e.message) for e in entries
    ]
    evicted = {seq for seq, classes, _ in history if "evicted" in classes.split()}
    assert evicted == {e.seq for e in entries if not e.in_window}
    assert not any("evicted" in classes.split() for _, classes, _ in window)
    tokens = sum(GPT_4O_MINI.count_message(e.message) for e in entries if e.in_window)
    assert f"{tokens} tokens" in page
    assert "<h1>Ann&#39;s trip</h1>" in page


def test_tool_calls_are_folded_with_their_results_and_blocks_are_marked(app: Starlette) -> None:
    page = client(app).get(f"/c/{TRIP}").text
    window = section(page, "window")
    groups = re.findall(r"<details class=\"tool-group\">(.*?)</details>", window, re.S)
    assert len(groups) == 1
    assert "weather({&#34;city&#34;: &#34;Lisbon&#34;})" in groups[0]
    assert [seq for seq, _, _ in messages(groups[0])] == [5, 6]
    system = messages(window)[0]
    assert "mark-recalled" in system[1]
    history = section(page, "history")
    assert re.search(r'class="msg role-user evicted mark-summary" data-seq="3"', history)


def test_recall_shows_what_would_come_back_with_scores(app: Starlette, seeded: Path) -> None:
    page = client(app).get(f"/c/{TRIP}", params={"recall": "locker code", "top_k": "1"}).text
    recalled = section(page, "recalled")
    with SqliteChatMemoryStore(seeded, read_only=True, create=False) as store:
        runs = preview_recall(store, TRIP, "locker code", top_k=1)
    assert len(runs) == 1
    assert re.findall(r"score (\d\.\d{3})", recalled) == [f"{runs[0].score:.3f}"]
    assert [seq for seq, _, _ in messages(recalled)] == list(runs[0].seqs)
    assert html.escape(LOCKER) in recalled
    nothing = client(app).get("/c/bob%3Achat", params={"recall": "locker"}).text
    assert "Nothing out of the window matches." in nothing


@pytest.mark.parametrize(("given", "shown"), [("0", "1"), ("99", "20"), ("many", "3")])
def test_top_k_is_kept_in_range(app: Starlette, given: str, shown: str) -> None:
    page = client(app).get(f"/c/{TRIP}", params={"recall": "x", "top_k": given}).text
    assert f'name="top_k" min="1" max="20" value="{shown}"' in page


def test_search_finds_words_in_every_conversation(app: Starlette) -> None:
    page = client(app).get("/search", params={"q": "LISBON"}).text
    assert 'href="/c/ann%3Atrip">ann:trip</a></h2>' in page
    assert [seq for seq, _, _ in messages(page)] == [0, 3, 4, 5, 7]  # #5: a tool call's arguments
    assert "1 message found" in client(app).get("/search?q=bob").text
    assert "Type words to find" in client(app).get("/search?q=").text


def test_stored_markup_is_shown_as_text_never_as_markup(app: Starlette) -> None:
    http = client(app)
    for url in (f"/c/{TRIP}", "/search?q=script", f"/c/{TRIP}?recall=pwned"):
        page = http.get(url).text
        assert ATTACK not in page
        assert "<script>document" not in page
        assert "<img src=x" not in page
    texts = re.findall(r'<pre class="text">(.*?)</pre>', http.get(f"/c/{TRIP}").text, re.S)
    assert ATTACK in map(html.unescape, texts)


def test_pages_forbid_inline_script_and_answer_get_only(app: Starlette) -> None:
    http = client(app)
    response = http.get("/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert http.post("/").status_code == 405
    assert http.get("/static/inspector.js").status_code == 200


def test_a_request_naming_another_host_is_refused(app: Starlette) -> None:
    response = client(app).get("/", headers={"host": "evil.example"})
    assert response.status_code == 400


def test_an_unknown_page_or_conversation_says_so(app: Starlette) -> None:
    http = client(app)
    missing = http.get("/c/carol")
    assert missing.status_code == 404
    assert "no conversation &#39;carol&#39; is stored" in missing.text
    assert http.get("/nowhere").status_code == 404


def test_a_failing_store_is_a_sentence_on_the_page() -> None:
    class Down(InMemoryChatMemoryStore):
        def summaries(self) -> Any:
            raise StoreError("cannot reach the store", store=self)

    response = client(create_app(Down())).get("/", headers={"host": "127.0.0.1"})
    assert response.status_code == 500
    assert '<p class="error">cannot reach the store (Down)</p>' in response.text


def test_reading_pages_writes_nothing(app: Starlette, seeded: Path) -> None:
    def state() -> dict[str, str]:
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(seeded.parent.iterdir())
        }

    before = state()
    http = client(app)
    for url in ("/", f"/c/{TRIP}", f"/c/{TRIP}?recall=locker", "/search?q=a", "/?user=ann"):
        assert http.get(url).status_code == 200
    assert state() == before


def test_conversations_without_titles_or_users_show_neither() -> None:
    store = InMemoryChatMemoryStore()
    call = ToolExecutionRequest("c1", "f", "{}")
    store.update_messages("x", [UserMessage("hi"), AiMessage(tool_execution_requests=[call])])
    page = client(create_app(store)).get("/", headers={"host": "localhost"}).text
    assert '<a href="/c/x">x</a></td>\n    <td></td>\n    <td></td>' in page


def test_sqlite_lookups_read_nothing_from_a_file_without_their_tables(tmp_path: Path) -> None:
    with sqlite_lookups(None) as found:
        assert found == (None, None)
    with sqlite_lookups(tmp_path / "absent.db") as found:
        assert found == (None, None)
    assert not (tmp_path / "absent.db").exists()
    with SqliteChatMemoryStore(tmp_path / "plain.db"):
        pass
    with sqlite_lookups(tmp_path / "plain.db") as found:
        assert found == (None, None)


# -- the command ----------------------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, uvicorn.Config]]:
    """What `chatmemory inspect` would serve, captured instead of served."""
    seen: list[tuple[Any, uvicorn.Config]] = []

    def run(server: uvicorn.Server) -> None:
        seen.append((server.config.app, server.config))
        response = TestClient(cast(Starlette, server.config.app)).get(
            "/", headers={"host": "127.0.0.1"}
        )
        assert response.status_code == 200
        seen.append((response.text, server.config))

    monkeypatch.setattr(uvicorn.Server, "run", run)
    return seen


def test_inspect_serves_the_given_file_on_loopback(
    seeded: Path, served: list[tuple[Any, uvicorn.Config]]
) -> None:
    result = CliRunner().invoke(cli_app.cli, ["inspect", "--db", str(seeded), "--port", "0"])
    assert result.exit_code == 0, result.output
    assert f"inspecting SQLite {seeded} on http://127.0.0.1:0/" in result.output
    (_, config), (page, _) = served
    assert (config.host, config.port) == ("127.0.0.1", 0)
    assert "Ann&#39;s trip" in page
    assert f"SQLite {seeded}" in page


def test_inspect_never_creates_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[tuple[Any, uvicorn.Config]]
) -> None:
    missing = tmp_path / "missing.db"
    result = CliRunner().invoke(cli_app.cli, ["inspect", "--db", str(missing)])
    assert result.exit_code == 1
    assert f"no such file: {missing}" in result.output
    monkeypatch.setenv("CHATMEMORY_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli_app.cli, ["inspect"])  # the default file, not there yet
    assert result.exit_code == 0, result.output
    assert "No conversations stored" in served[-1][0]
    assert not missing.exists()
    assert not (tmp_path / "home").exists()


def test_inspect_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "uvicorn", None)
    result = CliRunner().invoke(cli_app.cli, ["inspect"])
    assert result.exit_code == 1
    assert "pip install 'chatmemory[inspect]'" in result.output


@pytest.mark.redis
def test_inspect_reads_a_redis_store(served: list[tuple[Any, uvicorn.Config]]) -> None:
    from chatmemory.stores import RedisChatMemoryStore

    with isolated_prefix(uuid.uuid4().hex) as prefix:
        with RedisChatMemoryStore(REDIS_URL, prefix=prefix) as store:
            store.update_messages("ann:redis", [UserMessage(ATTACK)])
        args = ["inspect", "--redis-url", REDIS_URL, "--prefix", prefix]
        result = CliRunner().invoke(cli_app.cli, args)
        assert result.exit_code == 0, result.output
    page = served[-1][0]
    assert 'href="/c/ann%3Aredis">ann:redis</a>' in page
    assert f"Redis {REDIS_URL}" in page


@pytest.mark.postgres
def test_inspect_reads_a_postgres_store(served: list[tuple[Any, uvicorn.Config]]) -> None:
    from chatmemory.stores import PostgresChatMemoryStore

    with isolated_schema(uuid.uuid4().hex) as schema:
        with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as store:
            store.update_messages("ann:pg", [UserMessage("hello")])
        args = ["inspect", "--postgres-dsn", POSTGRES_DSN, "--schema", schema]
        result = CliRunner().invoke(cli_app.cli, args)
        assert result.exit_code == 0, result.output
    assert 'href="/c/ann%3Apg">ann:pg</a>' in served[-1][0]
