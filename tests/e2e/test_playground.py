"""The playground (/playground) in headless Chromium against the real service
process: sign in, an agent, a two-turn conversation with the ``local`` model, a
stopped reply, a client-side tool call answered from the page, an MCP server
attached and its tool called, detached, a trace and the usage charts, sign out,
sign in again and answer a tool call (the first sign-in's handlers are gone), and a
send from a non-secure context (a host name other than localhost over plain HTTP,
mapped to loopback by Chromium's resolver). What the page shows is compared with
what the API stored; the key is in no request's URL.

The browser is Debian's ``chromium`` driven by Playwright (no browser download):
``make test`` installs it when missing; without it this test fails and says so.
A PNG of each step goes to ``test-output/playground/`` at the repository root.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.console_support import ROOT, VIEWPORT, WAIT_MS, browser, new_key, service, watch
from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client

pytestmark = pytest.mark.e2e

SHOTS = ROOT / "test-output" / "playground"
# a name Chromium resolves to 127.0.0.1 (--host-resolver-rules): plain HTTP on a
# host other than localhost is not a secure context, as on a LAN address
INSECURE_HOST = "playground.test"


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[tuple[Service, str]]:
    key = new_key()
    with service(tmp_path, key, {"AGENTSVC_ALLOW_STDIO_MCP": "true"}) as running_svc:
        yield running_svc, key


class Steps:
    """Numbered screenshots, one a step."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.n = 0
        SHOTS.mkdir(parents=True, exist_ok=True)
        for old in SHOTS.glob("*.png"):
            old.unlink()

    def shot(self, name: str) -> None:
        self.n += 1
        self.page.screenshot(path=str(SHOTS / f"{self.n:02d}-{name}.png"), full_page=True)


def texts(page: Any, selector: str) -> list[str]:
    return [str(t) for t in page.locator(selector).all_text_contents()]


def finished_replies(page: Any) -> int:
    return int(page.locator(".message.assistant[data-status=complete]").count())


def wait_replies(page: Any, n: int) -> None:
    """Until ``n`` replies of the page have ended with ``done``."""
    page.wait_for_function(
        "n => document.querySelectorAll('.message.assistant[data-status=complete]').length === n",
        arg=n,
    )


def test_the_playground_in_a_browser(
    svc: tuple[Service, str], capsys: pytest.CaptureFixture[str]
) -> None:
    svc_, key = svc
    api = client(svc_, key, timeout=30)
    # an MCP server of the organization (the suite's own, over stdio) to attach
    SCAN.not_secret(str(ROOT))
    mcp = api.post(
        "/api/mcps",
        json={
            "name": "Local Tools",
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-m", "tests.mcp_servers.server"],
            "credentials": {"env": {"PYTHONPATH": str(ROOT)}},
        },
    ).json()
    assert api.post(f"/api/mcps/{mcp['id']}/test").json()["ok"] is True

    problems: list[str] = []  # CSP violations, script errors
    urls: list[str] = []  # every request's URL, of every page

    def watched(page: Any) -> Any:
        page.on("request", lambda r: urls.append(r.url))
        return watch(page, problems)

    # a name Chromium resolves to loopback, for the non-secure context
    with browser(f"--host-resolver-rules=MAP {INSECURE_HOST} 127.0.0.1") as chromium:
        try:
            page = watched(chromium.new_page(viewport=VIEWPORT))
            steps = Steps(page)
            thread_id = _walk(page, steps, api, svc_.url, key, mcp)
            insecure = watched(chromium.new_page(viewport=VIEWPORT))
            _insecure_send(insecure, api, svc_.port, key, thread_id)
        finally:
            api.close()
    assert not problems, problems
    assert any("/api/threads/" in u for u in urls)  # the API's calls are recorded
    assert not [u for u in urls if key in u]  # a header only, never a URL
    with capsys.disabled():
        print(f"\nplayground screenshots: {SHOTS} ({steps.n} steps)")


def _walk(page: Any, steps: Steps, api: httpx.Client, base: str, key: str, mcp: Any) -> str:
    # 1. the page loads with no credentials; a wrong key shows the API's error
    page.goto(f"{base}/playground")
    page.wait_for_selector("body[data-ready=true]")
    steps.shot("page")
    page.fill("#key", "ask_wrong_0000000000000000000000000000")
    page.click("#signin-button")
    page.wait_for_selector("#error:not([hidden])")
    error = page.inner_text("#error")
    assert "UNAUTHORIZED" in error, error
    assert "ask_wrong" not in error  # the key is not repeated
    steps.shot("wrong-key")

    # 2. sign in: the key is in sessionStorage, never in the URL or the page
    page.fill("#key", key)
    page.click("#signin-button")
    page.wait_for_selector("#app:not([hidden])")
    assert page.url == f"{base}/playground"
    assert page.evaluate("sessionStorage.getItem('agentsvc.playground.key')") == key
    assert key not in page.content()
    assert page.is_hidden("#error")

    # 3. an agent: created, its system prompt and model saved
    page.fill("#agent-name", "Playground agent")
    page.click("#agent-create button")
    page.wait_for_selector("#agent-edit:not([hidden])")
    agent_id = page.input_value("#agent-select")
    page.fill("#agent-preamble", "You are <b>terse</b>.")
    page.fill("#agent-model", "local")
    page.click("#agent-save")
    page.wait_for_selector("#agent-saved:has-text('saved')")
    stored = api.get(f"/api/agents/{agent_id}").json()
    assert (stored["stable_preamble"], stored["default_model"]) == (
        "You are <b>terse</b>.",
        "local",
    )
    steps.shot("agent")

    # 4. a thread and a two-turn conversation; the page shows what the API stored
    page.click("#thread-new")
    page.wait_for_selector("#composer:not([hidden])")
    thread_id = page.get_attribute("#thread-list button.thread.active", "data-thread-id")
    assert isinstance(thread_id, str), "no thread is active"
    said = ["Hello <i>playground</i> & co.", "And a second turn."]
    for n, text in enumerate(said, start=1):
        page.fill("#message", text)
        page.click("#send")
        wait_replies(page, n)
    history = api.get(f"/api/threads/{thread_id}/messages").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert texts(page, "#messages .message .text") == [m["content"] for m in history]
    assert history[0]["content"] == said[0]
    assert f'Before that you said: "{said[0]}"' in history[3]["content"]
    ids = [
        page.get_attribute(f"#messages .message.assistant >> nth={i}", "data-message-id")
        for i in (0, 1)
    ]
    assert ids == [history[1]["id"], history[3]["id"]]
    steps.shot("conversation")

    # 4b. a send the API refuses before its stream (a model no provider serves here):
    #     the page shows the API's error as the API gave it, and stores nothing
    page.fill("#agent-model", "claude-unserved")
    page.click("#agent-save")
    page.wait_for_function(
        "() => document.querySelector('#agent-saved').textContent.startsWith('saved')"
    )
    page.fill("#message", "Refused?")
    page.click("#send")
    page.wait_for_selector("#error:not([hidden])")
    refused = api.post(f"/api/threads/{thread_id}/messages", json={"content": "Refused?"})
    assert refused.status_code == 422, refused.text
    assert page.inner_text("#error") == f"{refused.json()['error']}: {refused.json()['detail']}"
    assert page.input_value("#message") == "Refused?"
    assert page.locator("#messages .message").count() == 4
    assert api.get(f"/api/threads/{thread_id}/messages").json()["total"] == 4
    steps.shot("refused")
    page.fill("#agent-model", "local")
    page.click("#agent-save")
    page.wait_for_function(
        "() => document.querySelector('#agent-saved').textContent.startsWith('saved')"
    )

    # 5. a slow reply; the thread opened again while it runs follows it (re-attach);
    #    stopped from the page once tokens stream in
    page.fill("#message", "Answer slowly, please.")
    page.click("#send")
    streamed = (
        "w => [...document.querySelectorAll('.message.assistant.streaming .text')]"
        ".some(t => t.textContent.includes(w))"
    )
    page.wait_for_function(streamed, arg="word1")
    page.click(f"#thread-list button[data-thread-id='{thread_id}']")
    page.wait_for_selector("#status:has-text('following it')")
    page.wait_for_function(streamed, arg="word2")
    reply = page.locator("#messages .message.assistant").last
    assert (
        reply.get_attribute("data-run-id")
        == api.get(f"/api/threads/{thread_id}").json()["active_run_id"]
    )
    page.click("#stop")
    page.wait_for_selector(".message.assistant[data-status=stopped]")
    assert "stopped" in page.inner_text("#status")
    last = api.get(f"/api/threads/{thread_id}/messages").json()["messages"][-1]
    assert last["status"] == "stopped"
    assert "word2" in last["content"]
    assert "word50" not in last["content"]
    assert reply.locator(".text").text_content() == last["content"]
    assert page.locator("#messages .message").count() == 6  # history, then the followed reply
    steps.shot("stopped")

    # 6. a client-side tool: declared with the message, called, answered in a form
    page.click("#client-tool summary")
    page.check("#tool-enabled")
    page.fill("#message", 'call get_weather {"city": "Paris"}')
    page.click("#send")
    page.wait_for_selector("#tool-answers:not([hidden])")
    call = page.locator(".note.tool-call").last
    assert "your tool get_weather" in call.inner_text()
    assert '"city": "Paris"' in call.inner_text()
    steps.shot("client-tool-call")
    page.locator("#tool-answer-fields textarea").fill("sunny, 21 C")
    page.click("#tool-answers-send")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.message.assistant[data-status=complete] .text')]"
        ".some(t => t.textContent.includes('returned: sunny, 21 C'))"
    )
    page.uncheck("#tool-enabled")
    page.click("#client-tool summary")  # folded again
    last = api.get(f"/api/threads/{thread_id}/messages").json()["messages"][-1]
    assert page.locator(".message.assistant .text").last.text_content() == last["content"]
    steps.shot("client-tool-answered")

    # 7. the organization's MCP server attached from the page, its tool called, detached
    box = f"#mcp-list input[data-mcp-id='{mcp['id']}']"
    # the box is checked at the click; the attachment is stored when its POST answers
    with page.expect_response(
        lambda r: r.url.endswith(f"/api/agents/{agent_id}/mcps") and r.request.method == "POST"
    ):
        page.check(box)
    page.wait_for_function(f'() => document.querySelector("{box}").checked')
    attached = api.get(f"/api/agents/{agent_id}/mcps").json()
    assert [a["mcpServerId"] for a in attached] == [mcp["id"]]
    before = finished_replies(page)
    page.fill("#message", 'call local-tools__add {"a": 2, "b": 40}')
    page.click("#send")
    wait_replies(page, before + 1)
    last = api.get(f"/api/threads/{thread_id}/messages").json()["messages"][-1]
    # the list drawn again from the API (the stored reply has its actions), the
    # call folded in it with its result
    shown = page.locator(f"#messages li[data-message-id='{last['id']}']:has(.actions)")
    fold = shown.locator("details.note.tool-call").last
    assert fold.locator("summary").inner_text() == "tool call local-tools__add · returned"
    fold.locator("summary").click()
    call = fold.inner_text()
    assert '"b": 40' in call
    result = fold.locator(".note.tool-result").inner_text()
    assert "tool result local-tools__add" in result
    assert "42" in result
    assert page.locator(".message.assistant .text").last.text_content() == last["content"]
    page.wait_for_selector(f"#thread-list button[data-thread-id='{thread_id}']:not(:has(span))")
    steps.shot("mcp-tool")
    page.uncheck(box)
    page.wait_for_function(
        f'() => document.querySelector("{box}") && !document.querySelector("{box}").checked'
    )
    # the box is unchecked at the click; the page's DELETE may still be on its way
    deadline = time.monotonic() + WAIT_MS / 1000
    while (attached := api.get(f"/api/agents/{agent_id}/mcps").json()) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert attached == []

    # 8. the thread's traces: the newest opened, its spans with durations and tokens
    page.click("#tab-traces")
    page.wait_for_selector("#trace-list button.trace")
    traces = api.get("/api/logs", params={"threadId": thread_id}).json()["traces"]
    page.click("#traces-refresh")  # the list as of the API's answer above
    page.wait_for_function(
        "n => document.querySelectorAll('#trace-list button.trace').length === n", arg=len(traces)
    )
    shown = page.locator("#trace-list button.trace")
    assert shown.first.get_attribute("data-trace-id") == traces[0]["id"]
    newest = traces[0]
    shown.first.click()
    page.wait_for_selector("#trace-detail .span-tree li.span")
    detail = api.get(f"/api/logs/{newest['id']}").json()
    assert page.locator("#trace-detail .span-tree li.span").count() == len(detail["spans"])
    assert newest["id"] in page.inner_text("#trace-detail")
    kinds = texts(page, "#trace-detail .span-kind")
    assert "llm" in kinds
    assert "mcp" in kinds or "tool" in kinds
    llm = next(s for s in detail["spans"] if s["kind"] == "llm")
    row = page.locator(f"#trace-detail li.span[data-span-id='{llm['span_id']}']")
    assert f"{llm['input_tokens']} in / {llm['output_tokens']} out tokens" in row.inner_text()
    assert f"{llm['duration_ms']:.1f} ms" in row.inner_text()
    assert page.locator("#trace-detail svg.waterfall rect.span-bar").count() == len(detail["spans"])
    steps.shot("trace")

    # 9. the organization's usage as charts, its totals those of the API
    page.click("#tab-usage")
    page.wait_for_selector("#usage figure.chart-box svg.chart")
    usage = api.get("/api/analytics", params={"period": "24h"}).json()
    assert page.inner_text("[data-total=model_calls]") == str(usage["totals"]["model_calls"])
    assert usage["totals"]["model_calls"] >= 6
    charts = page.locator("#usage figure.chart-box")
    assert charts.count() == 3
    bars = page.locator("#usage figure.chart-box >> nth=0").locator("rect.bar")
    values = [
        int(v) for v in (bars.nth(i).get_attribute("data-value") for i in range(bars.count()))
    ]
    # the same bars as the API's series (compared as a sum: an hour may turn in between)
    assert len(values) == len(usage["series"])
    assert sum(values) == usage["totals"]["model_calls"]
    steps.shot("usage")

    # 10. back on the chat, then sign out: the key is gone from the tab
    page.click("#tab-chat")
    page.click("#signout")
    page.wait_for_selector("#signin:not([hidden])")
    assert page.is_hidden("#app")
    assert page.evaluate("sessionStorage.getItem('agentsvc.playground.key')") is None
    steps.shot("signed-out")

    # 11. sign in again: the first sign-in's handlers are gone, so answering a tool
    #     call is handled once, by the new sign-in's chat, with no error
    page.fill("#key", key)
    page.click("#signin-button")
    page.wait_for_selector("#app:not([hidden])")
    page.wait_for_selector(f"#thread-list button[data-thread-id='{thread_id}']")
    page.click(f"#thread-list button[data-thread-id='{thread_id}']")
    page.wait_for_selector("#composer:not([hidden])")
    page.wait_for_selector("#status:has-text('message(s)')")  # the history is shown
    page.click("#client-tool summary")
    page.check("#tool-enabled")
    page.fill("#message", 'call get_weather {"city": "Oslo"}')
    page.click("#send")
    page.wait_for_selector("#tool-answers:not([hidden])")
    page.locator("#tool-answer-fields textarea").fill("snow, -3 C")
    page.click("#tool-answers-send")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.message.assistant[data-status=complete] .text')]"
        ".some(t => t.textContent.includes('returned: snow, -3 C'))"
    )
    assert page.is_hidden("#error"), page.inner_text("#error")
    assert page.locator(".message.assistant.streaming").count() == 0
    last = api.get(f"/api/threads/{thread_id}/messages").json()["messages"][-1]
    assert page.locator(".message.assistant .text").last.text_content() == last["content"]
    steps.shot("signed-in-again")
    return thread_id


def _insecure_send(page: Any, api: httpx.Client, port: int, key: str, thread_id: str) -> None:
    """A send from a non-secure context (crypto.randomUUID is missing there)."""
    base = f"http://{INSECURE_HOST}:{port}"
    page.goto(f"{base}/playground")
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate("isSecureContext") is False
    assert page.evaluate("typeof crypto.randomUUID") == "undefined"
    page.fill("#key", key)
    page.click("#signin-button")
    page.wait_for_selector("#app:not([hidden])")
    page.click(f"#thread-list button[data-thread-id='{thread_id}']")
    page.wait_for_selector("#composer:not([hidden])")
    page.wait_for_selector("#status:has-text('message(s)')")  # the history is shown
    before = finished_replies(page)
    page.fill("#message", "Sent over plain HTTP.")
    page.click("#send")
    page.wait_for_function(  # the reply, or the error bar saying why not
        "n => document.querySelectorAll('.message.assistant[data-status=complete]').length === n"
        " || !document.querySelector('#error').hidden",
        arg=before + 1,
    )
    assert page.is_hidden("#error"), page.inner_text("#error")
    assert finished_replies(page) == before + 1
    last = api.get(f"/api/threads/{thread_id}/messages").json()["messages"][-2:]
    assert [m["role"] for m in last] == ["user", "assistant"]
    assert last[0]["content"] == "Sent over plain HTTP."
    assert page.locator(".message.assistant .text").last.text_content() == last[1]["content"]
