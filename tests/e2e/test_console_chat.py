"""The console's chat, traces and usage (``/playground``) in headless Chromium
against the real service process with the ``local`` model: Markdown rendered with
no way to inject HTML, tool calls folded, edit, regenerate, "2 of 3" and fork,
copy, stop, the model and parameter choice, the raw event view, the message as
curl / Python / TypeScript (the first two run here against the service), thread
rename, search and delete; a reply's trace with its spans' input and output;
usage by period and agent; the keyboard, labels, dark and light, and the 420 px
layout (the side bar a drawer). What the page shows is compared with what the
API stored.

Screenshots go to ``test-output/console-chat/``; with
``AGENTSVC_UPDATE_DOCS_IMAGES=1`` the ones docs/console.md shows are written to
``docs/images/`` too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.console_support import ROOT, VIEWPORT, browser, new_key, screenshot, service, watch
from tests.e2e.service import Service, client

pytestmark = pytest.mark.e2e

SHOTS = ROOT / "test-output" / "console-chat"

XSS = (
    'Look: <img src="x" onerror="window.__xss = 1"> and <script>window.__xss = 2</script>'
    " [a trap](javascript:window.__xss=3) ![a pixel](https://tracker.invalid/p.png)"
)
MARKDOWN = (
    "Brew it:\n\n# How to brew green tea\n\n1. Heat **water** to 80 C\n2. Steep for `2 min`\n\n"
    "```python\ndef brew(temp=80):\n    # never boiling\n    return 'tea'\n```\n\n"
    "Read [the guide](https://example.invalid/tea) first."
)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str, Any]]:
    """One service process and one Chromium for the module's tests."""
    key = new_key()
    with service(tmp_path_factory.mktemp("console-chat"), key) as svc, browser() as chromium:
        yield svc, key, chromium


class Console:
    """A signed-in page of the console, what it requested, and what went wrong."""

    def __init__(self, browser: Any, service: Service, key: str, **options: Any) -> None:
        self.base = service.url
        self.key = key
        self.api = client(service, key, timeout=30)
        self.context = browser.new_context(viewport=options.pop("viewport", VIEWPORT), **options)
        self.problems: list[str] = []
        self.requests: list[Any] = []
        self.page = watch(self.context.new_page(), self.problems)
        self.page.on("request", self._request)

    def _request(self, request: Any) -> None:
        # a method of this object: Playwright cannot wrap a builtin (list.append)
        self.requests.append(request)

    def sign_in(self) -> None:
        page = self.page
        page.goto(f"{self.base}/playground")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#key", self.key)
        page.click("#signin-button")
        page.wait_for_selector("#app:not([hidden])")

    def agent_and_thread(self, name: str) -> tuple[str, str]:
        """A new agent with a thread, both made through the API, opened on the page."""
        agent = self.api.post("/api/agents", json={"name": name, "defaultModel": "local"}).json()
        thread = self.api.post("/api/threads", json={"agentId": agent["id"]}).json()
        self.sign_in()  # the agents list is read at sign-in
        self.show_side()
        self.page.select_option("#agent-select", agent["id"])
        self.open_thread(thread["id"])
        return agent["id"], thread["id"]

    def show_side(self) -> None:
        """The side bar: a drawer on a narrow screen, opened."""
        if self.page.is_visible("#drawer-toggle") and not self.page.is_visible("#side"):
            self.page.click("#drawer-toggle")
            self.page.wait_for_selector("#side", state="visible")

    def open_thread(self, thread_id: str) -> None:
        page = self.page
        self.show_side()
        page.click(f"#thread-list button[data-thread-id='{thread_id}']")
        page.wait_for_selector("#status:has-text('message(s)')")

    def send(self, text: str) -> None:
        before = self.replies()
        self.page.fill("#message", text)
        self.page.click("#send")
        self.wait_replies(before + 1)

    def replies(self) -> int:
        return int(self.page.locator("#messages .message.assistant[data-status=complete]").count())

    def wait_replies(self, n: int) -> None:
        """Until the list, drawn again from the API after the reply, holds ``n`` replies."""
        self.page.wait_for_function(
            "n => document.querySelectorAll("
            "'#messages .message.assistant[data-status=complete][data-message-id]').length === n"
            " && !document.querySelector('#messages .streaming')"
            " && document.querySelector('#send').disabled === false",
            arg=n,
        )

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        return list(self.api.get(f"/api/threads/{thread_id}/messages").json()["messages"])

    def shot(self, name: str, *, docs: bool = False, full_page: bool = True) -> None:
        docs_name = f"console-{name}.png" if docs else None
        screenshot(self.page, SHOTS / f"{name}.png", docs_name, full_page=full_page)

    def sent_bodies(self, path_end: str) -> list[dict[str, Any]]:
        return [
            json.loads(r.post_data)
            for r in self.requests
            if r.method == "POST" and r.url.split("?")[0].endswith(path_end)
        ]

    def close(self) -> None:
        self.context.close()
        self.api.close()
        assert not self.problems, self.problems
        assert not [r.url for r in self.requests if self.key in r.url]
        # nothing was fetched from anywhere but the service (no image, no link)
        assert not [r.url for r in self.requests if not r.url.startswith(self.base)]


@pytest.fixture
def con(console: tuple[Service, str, Any]) -> Iterator[Console]:
    service, key, browser = console
    page = Console(browser, service, key)
    try:
        yield page
    finally:
        page.close()


def test_markdown_renders_and_html_stays_inert(con: Console) -> None:
    _, thread_id = con.agent_and_thread("Markdown")
    page = con.page
    con.send(MARKDOWN)
    reply = page.locator("#messages .message.assistant").last
    assert reply.locator(".text h3").inner_text() == "How to brew green tea"
    assert reply.locator(".text ol li strong").inner_text() == "water"
    assert reply.locator(".text code").first.inner_text() == "2 min"
    code = reply.locator(".text pre.md-code code.language-python")
    assert "def brew(temp=80):" in code.inner_text()
    assert code.locator("span.tok-kw").first.inner_text() == "def"
    assert code.locator("span.tok-com").inner_text() == "# never boiling"
    assert code.locator("span.tok-str").inner_text() == "'tea'"
    link = reply.locator(".text a.md-link")
    assert link.get_attribute("href") == "https://example.invalid/tea"
    assert link.get_attribute("target") == "_blank"
    assert set(str(link.get_attribute("rel")).split()) >= {"noopener", "noreferrer"}
    stored = con.history(thread_id)[-1]
    assert reply.get_attribute("data-message-id") == stored["id"]
    assert reply.locator(".text h3").count() == stored["content"].count("# How to brew")
    con.shot("chat", docs=True)
    page.click("#theme-toggle")  # auto -> light
    page.click("#theme-toggle")  # light -> dark
    page.evaluate("document.querySelector('#messages').scrollTop = 0")
    con.shot("chat-dark", docs=True)
    page.click("#theme-toggle")  # dark -> auto (the system's: light here)

    # HTML in a message is text: no element is made, no script runs, no image loads
    con.send(XSS)
    for who in ("user", "assistant"):
        text = page.locator(f"#messages .message.{who} .text").last
        assert '<img src="x" onerror="window.__xss = 1">' in text.inner_text()
        assert "<script>window.__xss = 2</script>" in text.inner_text()
        assert text.locator("img, script").count() == 0
        assert text.locator("a[href^='javascript']").count() == 0
        assert "[a trap](javascript:window.__xss=3)" in text.inner_text()
        pixel = text.locator("a.md-image-link")
        assert pixel.inner_text() == "image: a pixel"  # a link to it, never loaded
    assert page.locator("#messages img, #messages script").count() == 0
    assert page.evaluate("window.__xss") is None
    assert con.history(thread_id)[-2]["content"] == XSS


def test_model_parameters_raw_events_and_stop(con: Console) -> None:
    _, thread_id = con.agent_and_thread("Parameters")
    page = con.page
    con.send("Plain first.")
    plain = con.sent_bodies(f"/api/threads/{thread_id}/messages")[-1]
    assert plain == {"content": "Plain first."}  # nothing the user did not set

    # the models are GET /api/models's; the parameters go with the send as set
    page.click("#settings summary")
    models = con.api.get("/api/models").json()
    offered = page.eval_on_selector_all("#model-choice option", "os => os.map(o => o.value)")
    assert offered == ["", *[m["example"] for m in models]]
    page.select_option("#model-choice", "local")
    page.fill("#param-temperature", "0.3")
    page.fill("#param-max-output-tokens", "256")
    page.fill("#param-stop", "zzz\nSTOP HERE")
    con.send("With parameters.")
    sent = con.sent_bodies(f"/api/threads/{thread_id}/messages")[-1]
    assert sent == {
        "content": "With parameters.",
        "modelOverride": "local",
        "temperature": 0.3,
        "maxOutputTokens": 256,
        "stop": ["zzz", "STOP HERE"],
    }
    for field in ("#param-temperature", "#param-max-output-tokens", "#param-stop"):
        page.fill(field, "")
    page.select_option("#model-choice", "")
    page.click("#settings summary")

    # the raw event view: every event of the last reply, as received
    page.click("#raw-view summary")
    raw = page.inner_text("#raw-events")
    blocks = [b for b in raw.strip().split("\n\n") if b]
    events = [dict(line.split(": ", 1) for line in b.split("\n")) for b in blocks]
    assert [e["id"] for e in events] == [str(i) for i in range(1, len(events) + 1)]
    assert events[0]["event"] == "meta"
    assert {e["event"] for e in events[1:-1]} == {"token"}
    assert events[-1]["event"] == "done"
    done = json.loads(events[-1]["data"])
    assert done["content"] == con.history(thread_id)[-1]["content"]
    tokens = "".join(json.loads(e["data"])["delta"] for e in events[1:-1])
    assert tokens == done["content"]
    assert page.inner_text("#raw-count") == f"{len(events)} event(s)"
    con.shot("raw-events")

    # stop: the stopped reply says so, and never "0 tokens"
    page.fill("#message", "Answer slowly, please.")
    page.click("#send")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages .streaming .text')]"
        ".some(t => t.textContent.includes('word2'))"
    )
    page.click("#stop")
    page.wait_for_selector("#messages .message.assistant[data-status=stopped][data-message-id]")
    stopped = page.locator("#messages .message.assistant[data-status=stopped]").last
    assert "stopped" in stopped.inner_text()
    assert "0 tokens" not in stopped.inner_text()
    stored = con.history(thread_id)[-1]
    assert stored["status"] == "stopped"
    assert stopped.locator(".text").inner_text() == stored["content"]


def test_client_tool_call_is_folded_with_its_result(con: Console) -> None:
    _, thread_id = con.agent_and_thread("Tools")
    page = con.page
    page.click("#client-tool summary")
    page.check("#tool-enabled")
    page.fill("#message", 'call get_weather {"city": "Paris"}')
    page.click("#send")
    page.wait_for_selector("#tool-answers:not([hidden])")
    fold = page.locator("#messages details.note.tool-call").last
    assert fold.get_attribute("open") is not None  # yours to answer: shown open
    assert "your tool get_weather" in fold.locator("summary").inner_text()
    assert '"city": "Paris"' in fold.locator("pre.tool-args").inner_text()
    page.locator("#tool-answer-fields textarea").fill("sunny, 21 C")
    page.click("#tool-answers-send")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.message.assistant[data-status=complete] .text')]"
        ".some(t => t.textContent.includes('returned: sunny, 21 C'))"
    )
    # the call's fold is kept when the list is drawn again from the API
    assert page.locator("#messages details.note.tool-call summary").first.inner_text() == (
        "your tool get_weather · returned"
    )
    assert '"city": "Paris"' in str(page.locator("#messages pre.tool-args").first.text_content())
    result = page.locator("#messages details.note.tool-call .tool-result").first
    assert "sunny, 21 C" in str(result.text_content())

    # read again from the API (a new page): the call and its result come from the
    # thread's context, under the reply that went on after them
    page.reload()
    page.wait_for_selector("#app:not([hidden])")  # the tab kept its key
    con.open_thread(thread_id)
    final = con.history(thread_id)[-1]
    fold = page.locator(f"#messages li[data-message-id='{final['id']}'] details.note.tool-call")
    assert fold.locator("summary").inner_text() == "tool call get_weather · returned"
    fold.locator("summary").click()
    assert '"city": "Paris"' in fold.locator("pre.tool-args").inner_text()
    assert "sunny, 21 C" in fold.locator(".tool-result").inner_text()


def test_edit_regenerate_branches_fork_and_copy(con: Console) -> None:
    agent_id, thread_id = con.agent_and_thread("Branches")
    page = con.page
    con.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=con.base)
    con.send("Plan a trip to Rome")
    con.send("Three days, please")
    second = page.locator("#messages .message.user").nth(1)

    # edit the second message: a new branch, "2 of 2" on it
    second.locator("button[data-action=edit]").click()
    page.fill("#messages form.edit textarea", "Five days, please")
    page.click("#messages form.edit button.edit-save")
    page.wait_for_function(
        "() => document.querySelectorAll('#messages .message.user')[1]"
        "?.querySelector('.branch-pos')?.textContent === '2 of 2'"
    )
    con.wait_replies(2)
    history = con.history(thread_id)
    assert [m["content"] for m in history][2] == "Five days, please"
    assert page.locator("#messages .message .text").all_inner_texts() == [
        m["content"] for m in history
    ]
    edited = page.locator("#messages .message.user").nth(1)
    assert edited.locator(".branch-pos").inner_text() == "2 of 2"
    con.shot("branches", docs=True)

    # back to the first version: the API's current branch is the old one
    edited.get_by_role("button", name="previous version").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#messages .message.user')[1]"
        "?.querySelector('.branch-pos')?.textContent === '1 of 2'"
    )
    history = con.history(thread_id)
    assert history[2]["content"] == "Three days, please"
    assert page.locator("#messages .message .text").all_inner_texts() == [
        m["content"] for m in history
    ]

    # regenerate the last reply: a second version of it
    old_reply = history[3]["id"]
    page.locator("#messages .message.assistant").last.locator(
        "button[data-action=regenerate]"
    ).click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages .message.assistant')].at(-1)"
        "?.querySelector('.branch-pos')?.textContent === '2 of 2'"
    )
    con.wait_replies(2)
    last = con.history(thread_id)[-1]
    assert last["id"] != old_reply
    assert last["prev_sibling_id"] == old_reply
    assert (
        page.locator("#messages .message.assistant").last.get_attribute("data-message-id")
        == (last["id"])
    )

    # copy a message: the clipboard holds its Markdown source
    page.locator("#messages .message.user").first.locator("button[data-action=copy]").click()
    page.wait_for_selector("#status:has-text('copied')")
    assert page.evaluate("navigator.clipboard.readText()") == "Plan a trip to Rome"

    # fork from the first reply: a new thread with the branch up to it, opened
    first_reply = con.history(thread_id)[1]
    page.locator(
        f"#messages [data-message-id='{first_reply['id']}'] button[data-action=fork]"
    ).click()
    page.wait_for_function(
        "old => document.querySelector('#thread-list button.thread.active')"
        "?.dataset.threadId !== old",
        arg=thread_id,
    )
    fork_id = page.get_attribute("#thread-list button.thread.active", "data-thread-id")
    assert fork_id
    forked = con.history(fork_id)
    assert [m["content"] for m in forked] == ["Plan a trip to Rome", first_reply["content"]]
    page.wait_for_selector("#status:has-text('2 message(s)')")
    assert page.locator("#messages .message .text").all_inner_texts() == [
        m["content"] for m in forked
    ]
    threads = con.api.get("/api/threads", params={"agentId": agent_id}).json()["threads"]
    assert {t["id"] for t in threads} == {thread_id, fork_id}


def test_copy_as_code_runs(con: Console, tmp_path: Path) -> None:
    _, thread_id = con.agent_and_thread("Snippets")
    page = con.page
    page.click("#code-view summary")

    con.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=con.base)
    page.fill("#message", "Hello from curl")
    page.click("button[data-snippet=curl]")
    page.wait_for_selector("#snippet-status:has-text('copied: curl')")
    curl = page.inner_text("#snippet")
    assert page.evaluate("navigator.clipboard.readText()") == curl
    assert f"{con.base}/api/threads/{thread_id}/messages" in curl
    assert "$AGENTSVC_API_KEY" in curl
    assert con.key not in curl
    env = {**os.environ, "AGENTSVC_API_KEY": con.key}
    out = subprocess.run(
        ["/bin/sh", "-c", curl], capture_output=True, text=True, env=env, timeout=60, check=True
    ).stdout
    assert "event: done" in out
    assert con.history(thread_id)[-2]["content"] == "Hello from curl"

    page.fill("#message", 'Hello from "Python"')
    page.click("button[data-snippet=python]")
    python = page.inner_text("#snippet")
    assert "from agentsvc_client import Client" in python
    assert con.key not in python
    script = tmp_path / "snippet.py"
    script.write_text(python)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert 'You said: "Hello from "Python""' in out
    assert con.history(thread_id)[-2]["content"] == 'Hello from "Python"'

    # the thread opened again shows what the two snippets sent
    con.open_thread(thread_id)
    page.wait_for_selector("#status:has-text('4 message(s)')")
    assert page.input_value("#message") == 'Hello from "Python"'  # still composed

    # structured output goes with the message as a JSON Schema (shown here only:
    # the local model cannot follow one)
    page.click("#settings summary")
    page.fill("#param-schema", '{"type": "object", "properties": {"city": {"type": "string"}}}')
    page.click("button[data-snippet=curl]")
    page.wait_for_selector("#snippet:has-text('responseFormat')")
    body = json.loads(page.inner_text("#snippet").split(" -d '", 1)[1].rstrip("'"))
    assert body["responseFormat"] == {
        "type": "json_schema",
        "jsonSchema": {
            "name": "reply",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    page.fill("#param-schema", "")
    page.click("#settings summary")

    page.click("button[data-snippet=typescript]")
    ts = page.inner_text("#snippet")
    assert 'import { AgentsvcClient } from "agentsvc-client";' in ts
    assert f'client.threads.messages.send("{thread_id}"' in ts
    assert "process.env.AGENTSVC_API_KEY" in ts
    assert con.key not in ts
    assert page.input_value("#message") == 'Hello from "Python"'  # still composed, not sent
    con.shot("copy-as-code", docs=True)


def test_rename_search_and_delete_threads(con: Console) -> None:
    agent_id, thread_id = con.agent_and_thread("Threads")
    page = con.page
    con.send("Green tea, please.")
    other = con.api.post("/api/threads", json={"agentId": agent_id}).json()["id"]

    page.click("#thread-rename")
    page.fill("#thread-title-input", "Tea <b>notes</b>")
    page.press("#thread-title-input", "Enter")
    page.wait_for_selector("#thread-title .thread-name:has-text('Tea <b>notes</b>')")
    assert con.api.get(f"/api/threads/{thread_id}").json()["title"] == "Tea <b>notes</b>"
    assert page.locator("#thread-title b").count() == 0
    row = page.locator(f"#thread-list button[data-thread-id='{thread_id}']")
    row.wait_for()
    assert row.inner_text().startswith("Tea <b>notes</b>")

    # the search box sends q and shows what the API answers
    page.fill("#thread-q", "tea")
    page.click("#thread-search button[type=submit]")
    page.wait_for_selector("#thread-count:has-text('for \"tea\"')")
    searched = [r for r in con.requests if "/api/threads?" in r.url and "q=tea" in r.url]
    assert searched
    answer = con.api.get("/api/threads", params={"agentId": agent_id, "q": "tea", "limit": 100})
    shown = page.eval_on_selector_all(
        "#thread-list button.thread", "bs => bs.map(b => b.dataset.threadId)"
    )
    assert shown == [t["id"] for t in answer.json()["threads"]]
    page.fill("#thread-q", "")
    page.click("#thread-search button[type=submit]")

    # delete asks first; then the thread is gone from the API and the list
    page.click("#thread-delete")
    page.wait_for_selector("#thread-delete-confirm:not([hidden])")
    page.click("#thread-delete-no")
    assert con.api.get(f"/api/threads/{thread_id}").status_code == 200
    page.click("#thread-delete")
    page.click("#thread-delete-yes")
    page.wait_for_selector("#thread-note:has-text('deleted')")
    assert con.api.get(f"/api/threads/{thread_id}").status_code == 404
    page.wait_for_selector(f"#thread-list button[data-thread-id='{other}']")
    assert page.locator(f"#thread-list button[data-thread-id='{thread_id}']").count() == 0
    assert page.is_hidden("#composer")


def test_a_reply_links_to_its_trace(con: Console) -> None:
    _, thread_id = con.agent_and_thread("Traced")
    page = con.page
    con.send("Trace me.")
    reply = con.history(thread_id)[-1]
    page.locator(f"#messages [data-message-id='{reply['id']}'] button[data-action=trace]").click()
    page.wait_for_selector("#panel-traces:not([hidden]) #trace-detail .span-tree li.span")
    traces = con.api.get("/api/logs", params={"threadId": thread_id}).json()["traces"]
    trace = next(t for t in traces if t["message_id"] == reply["id"])
    assert page.get_attribute("#trace-detail", "data-trace-id") == trace["id"]
    detail = con.api.get(f"/api/logs/{trace['id']}").json()
    assert page.locator("#trace-detail li.span").count() == len(detail["spans"])
    assert page.locator("#trace-detail svg.waterfall rect.span-bar").count() == len(detail["spans"])
    assert "$0.000000" in page.inner_text("#trace-detail .facts")  # local's price is zero
    llm = next(s for s in detail["spans"] if s["kind"] == "llm")
    row = page.locator(f"#trace-detail li.span[data-span-id='{llm['span_id']}']")
    row.locator("details.span-io summary").click()
    shown_in = row.locator(".span-input pre").inner_text()
    assert json.loads(shown_in) == llm["input"]
    shown_out = row.locator(".span-output pre").inner_text()
    output = llm["output"]
    assert (shown_out if isinstance(output, str) else json.loads(shown_out)) == output
    assert page.locator("#trace-detail h4:has-text('Evaluations')").count() == 1
    # the list beside it is the open thread's, this trace marked
    page.wait_for_selector(f"#trace-list button[data-trace-id='{trace['id']}'][aria-current=true]")
    con.shot("trace", docs=True)


def test_usage_by_period_and_agent(con: Console) -> None:
    agent_id, _ = con.agent_and_thread("Counted")
    page = con.page
    con.send("Count me.")
    con.send("And me.")
    page.click("#tab-usage")
    page.wait_for_selector("#usage figure.chart-box svg.chart")
    page.select_option("#usage-agent", agent_id)
    page.wait_for_selector(f"#usage[data-agent-id='{agent_id}']")
    page.select_option("#usage-period", "7d")
    page.wait_for_selector("#usage[data-period='7d']")
    mine = con.api.get("/api/analytics", params={"period": "7d", "agentId": agent_id}).json()
    assert mine["totals"]["model_calls"] == 2
    assert page.inner_text("[data-total=model_calls]") == "2"
    asked = [r.url for r in con.requests if "/api/analytics?" in r.url]
    assert f"agentId={agent_id}" in asked[-1]
    assert "period=7d" in asked[-1]
    bars = page.locator("#usage figure.chart-box >> nth=0").locator("rect.bar")
    assert bars.count() == len(mine["series"])
    con.shot("usage", docs=True)
    page.select_option("#usage-agent", "")
    page.wait_for_selector("#usage[data-agent-id='']")
    everyone = con.api.get("/api/analytics", params={"period": "7d"}).json()
    assert page.inner_text("[data-total=model_calls]") == str(everyone["totals"]["model_calls"])
    assert page.locator("#usage table.by-agent").count() == 1


def test_keyboard_and_labels(con: Console) -> None:
    con.agent_and_thread("Keys")
    page = con.page
    con.send("Hello.")
    # every field of the chat has a name a screen reader reads
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll(
              '#panel-chat input, #panel-chat select, #panel-chat textarea, #side input,'
              + ' #side select, #side textarea, #panel-usage select')]
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
            .map(e => e.id)"""
    )
    assert unnamed == []
    assert page.get_attribute("#status", "aria-live") == "polite"
    last = con.history(
        page.get_attribute("#thread-list button.thread.active", "data-thread-id") or ""
    )
    assert page.inner_text("#announce") == f"The reply: {last[-1]['content']}"
    # the tabs: arrow keys move between them, one tab stop
    page.focus("#tab-chat")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#tab-traces[aria-selected=true]")
    assert page.evaluate("document.activeElement.id") == "tab-traces"
    assert page.is_visible("#panel-traces")
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("#tab-chat[aria-selected=true]")
    # Ctrl+Enter sends; Escape leaves an edit
    page.focus("#message")
    page.keyboard.type("Sent from the keyboard.")
    page.keyboard.press("Control+Enter")
    con.wait_replies(2)
    page.locator("#messages .message.user").first.locator("button[data-action=edit]").click()
    assert page.evaluate("document.activeElement.classList.contains('edit-text')")
    page.keyboard.press("Escape")
    assert page.locator("#messages form.edit").count() == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_narrow_screen_and_themes(console: tuple[Service, str, Any], scheme: str) -> None:
    service, key, browser = console
    con = Console(
        browser, service, key, viewport={"width": 420, "height": 860}, color_scheme=scheme
    )
    try:
        _narrow(con, scheme)
    finally:
        con.close()


def _narrow(con: Console, scheme: str) -> None:
    page = con.page
    agent_id, _ = con.agent_and_thread(f"Narrow {scheme}")  # opening a thread closes the drawer
    assert page.get_attribute("#drawer-toggle", "aria-expanded") == "false"
    assert not page.is_visible("#side")  # not stacked above the chat: a drawer
    chat = page.locator("section.chat").bounding_box()
    assert chat is not None
    assert chat["x"] < 20
    assert chat["width"] > 380
    con.send(MARKDOWN)
    page.evaluate("document.querySelector('#messages').scrollTop = 0")
    body = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    dark = page.evaluate("getComputedStyle(document.documentElement).colorScheme")
    assert dark == scheme
    assert (body == "rgb(21, 22, 26)") == (scheme == "dark")
    assert page.evaluate("document.documentElement.scrollWidth") <= 420  # no sideways scroll
    con.shot(f"chat-420-{scheme}", docs=True)
    page.click("#drawer-toggle")
    page.wait_for_selector("#side", state="visible")
    assert page.get_attribute("#drawer-toggle", "aria-expanded") == "true"
    # in place over the chat (its slide has ended)
    page.wait_for_function(
        "() => document.querySelector('#side').getBoundingClientRect().left === 0"
    )
    con.shot(f"drawer-420-{scheme}", docs=scheme == "light", full_page=False)
    page.keyboard.press("Escape")
    page.wait_for_selector("#side", state="hidden")
    # the traces and the usage fit the narrow screen too
    page.click("#tab-traces")
    page.click("#trace-list button.trace >> nth=0")
    page.wait_for_selector("#trace-detail .span-tree li.span")
    con.shot(f"trace-420-{scheme}")
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    page.click("#tab-usage")
    page.wait_for_selector("#usage figure.chart-box svg.chart")
    con.shot(f"usage-420-{scheme}")
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    page.click("#tab-chat")
    # the toggle overrides the system's choice, and is kept
    page.click("#theme-toggle")  # auto -> light
    page.click("#theme-toggle")  # light -> dark
    assert page.get_attribute("html", "data-theme") == "dark"
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.get_attribute("html", "data-theme") == "dark"
    page.evaluate("localStorage.removeItem('agentsvc.playground.theme')")
    # reloaded, still signed in, no thread open: the chat itself offers a new one
    # for the agent (the side bar's button is behind the menu)
    page.wait_for_selector("#thread-new-here", state="visible")
    assert not page.is_visible("#side")
    page.click("#thread-new-here")
    page.wait_for_selector("#thread-title .thread-name")
    assert page.is_hidden("#thread-new-here")
    made = con.api.get(f"/api/threads/{page.inner_text('#thread-title code')}")
    assert made.status_code == 200, made.text
    assert made.json()["agent_id"] == agent_id
