"""The console's Manage pages for agents, MCP servers, tools, integrations,
knowledge, memories, plans and API keys, in headless Chromium against the real
service process: each test does through the page what the page is for, and
compares what the page shows with what the API stored. The fakes are loopback
ones: an MCP server over streamable HTTP, an OAuth authorization server, a
webhook tool's endpoint, and this machine's PostgreSQL as a database integration.

Screenshots go to ``test-output/console/``; with ``AGENTSVC_UPDATE_DOCS_IMAGES=1``
they also replace ``docs/images/console-<page>.png`` (docs/console.md shows them).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.e2e.console_support import ROOT, VIEWPORT, browser, new_key, screenshot, service, watch
from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client
from tests.mcp_servers.server import HttpMcpServer
from tests.oauth_server import AuthServer
from tests.pg import reader_role
from tests.web.live import serve

pytestmark = pytest.mark.e2e

SHOTS = ROOT / "test-output" / "console"
PASSWORD = "console-integration-password-8c1d"


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str]]:
    key = new_key()
    env = {"AGENTSVC_ALLOW_PRIVATE_NETWORK": "true"}  # the loopback fakes
    with service(tmp_path_factory.mktemp("console-manage-a"), key, env) as svc:
        yield svc, key


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    with browser() as launched:
        yield launched


@pytest.fixture
def api(svc: tuple[Service, str]) -> Iterator[httpx.Client]:
    svc_, key = svc
    with client(svc_, key, timeout=30) as c:
        yield c


class Console:
    """One signed-in tab of the console; its script errors and CSP reports fail the test."""

    def __init__(self, chromium_browser: Any, base: str, key: str) -> None:
        self.base = base
        self.key = key
        self.context = chromium_browser.new_context(viewport=VIEWPORT)
        self.problems: list[str] = []
        self.page = watch(self.context.new_page(), self.problems)

    def open(self, page_id: str) -> Any:
        """Signs in with ``#manage/<page_id>`` in the URL: the page opens at once."""
        page = self.page
        page.goto(f"{self.base}/playground#manage/{page_id}")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#key", self.key)
        page.click("#signin-button")
        page.wait_for_selector(f"#manage-page[data-page={page_id}] h2")
        return page

    def no_error(self) -> None:
        assert self.page.is_hidden("#error"), self.page.inner_text("#error")

    def shot(self, name: str) -> None:
        screenshot(self.page, SHOTS / f"console-{name}.png", f"console-{name}.png", full_page=True)


@pytest.fixture
def console(chromium_browser: Any, svc: tuple[Service, str]) -> Iterator[Console]:
    svc_, key = svc
    c = Console(chromium_browser, svc_.url, key)
    try:
        yield c
    finally:
        c.context.close()
    assert c.problems == []


def press_twice(page: Any, selector: str) -> None:
    """A delete: the first press arms the button, the second does it."""
    page.click(selector)
    page.wait_for_selector(f"{selector}[data-armed]")
    page.click(selector)


def new_agent(api: httpx.Client, name: str) -> dict[str, Any]:
    """An agent made last, so the side bar picks it at sign-in."""
    r = api.post("/api/agents", json={"name": name, "defaultModel": "local"})
    assert r.status_code == 201, r.text
    return dict(r.json())


# --- agents ----------------------------------------------------------------------


def test_agents_page_edits_every_setting_and_deletes(console: Console, api: httpx.Client) -> None:
    doomed = api.post("/api/agents", json={"name": "Doomed"}).json()
    agent = new_agent(api, "Settings agent")
    page = console.open("agents")
    # one made here opens at once
    page.fill("#agent-page-create input", "Made on the page")
    page.click("#agent-page-create button")
    page.wait_for_selector("#agent-settings input[value='Made on the page']")
    made = next(a for a in api.get("/api/agents").json() if a["name"] == "Made on the page")
    assert made["default_model"] == "local"
    assert page.get_attribute("#agent-page-list li.current", "data-agent-id") == made["id"]
    page.click(f"#agent-page-list li[data-agent-id='{agent['id']}'] button")
    page.wait_for_selector("#agent-settings input[value='Settings agent']")
    # the model list is GET /api/models
    models = [m["id"] for m in api.get("/api/models").json()]
    options = page.locator("#agent-settings [data-field=defaultModel] option").all_inner_texts()
    assert [o.split(" ")[0] for o in options] == models
    page.fill("#agent-settings [data-field=name]", "Support <desk>")
    page.fill("#agent-settings [data-field=description]", "Answers shoppers")
    page.fill("#agent-settings [data-field=stablePreamble]", "Be brief & kind.")
    page.fill("#agent-settings [data-field=approvalTimeoutMinutes]", "15")
    page.select_option("#agent-settings [data-field=runtimeProvider]", "native")
    page.click("#agent-settings button[type=submit]")
    page.wait_for_selector("#agent-page-list li[data-agent-id] button:has-text('Support <desk>')")
    stored = api.get(f"/api/agents/{agent['id']}").json()
    assert stored["name"] == "Support <desk>"
    # the side bar's agents follow what the page changed
    page.wait_for_selector(
        f"#agent-select option[value='{agent['id']}']:text-is('Support <desk>')", state="attached"
    )
    assert stored["description"] == "Answers shoppers"
    assert stored["stable_preamble"] == "Be brief & kind."
    assert stored["approval_timeout_minutes"] == 15
    assert stored["runtime_provider"] == "native"
    assert stored["default_model"] == "local"
    # the computer: turned on with an allow-listed network
    page.check("#agent-computer input[type=checkbox]")
    page.select_option("#agent-computer select >> nth=1", "allowlist")
    page.fill("#agent-computer input[placeholder^='pypi']", "pypi.org")
    page.click("#agent-computer button[type=submit]")
    page.wait_for_selector("#agent-computer .status-line:has-text('saved: on')")
    computer = api.get(f"/api/agents/{agent['id']}/computer").json()
    assert (computer["enabled"], computer["network"], computer["allowed_hosts"]) == (
        True,
        "allowlist",
        ["pypi.org"],
    )
    console.no_error()
    console.shot("agents")
    # the other settings, each its own form: web tools and group threads
    web = page.locator("form[data-area=web]")
    page.click("details.area > summary:has-text('Web tools')")
    web.locator("[data-field=fetch_enabled]").check()
    web.locator("[data-field=blocked_domains]").fill("ads.example.com, tracker.example.com")
    web.locator("button[type=submit]").click()
    web.locator(".status-line:text-is('saved')").wait_for()
    stored_web = api.get(f"/api/agents/{agent['id']}/web").json()
    assert stored_web["fetch_enabled"] is True
    assert stored_web["blocked_domains"] == ["ads.example.com", "tracker.example.com"]
    group = page.locator("form[data-area=multiplayer]")
    page.click("details.area > summary:has-text('Group threads')")
    group.locator("[data-field=respond_to]").select_option("mentions")
    group.locator("[data-field=display_name]").fill("Helpy")
    group.locator("button[type=submit]").click()
    group.locator(".status-line:text-is('saved')").wait_for()
    stored_group = api.get(f"/api/agents/{agent['id']}/multiplayer").json()
    assert (stored_group["respond_to"], stored_group["display_name"]) == ("mentions", "Helpy")
    # a value the API refuses: its error, and nothing stored
    page.click("details.area > summary:has-text('Compaction')")
    compaction = page.locator("form[data-area=compaction]")
    compaction.locator("[data-field=beta_compact_threshold]").fill("5")
    compaction.locator("button[type=submit]").click()
    compaction.locator(".status-line:has-text('not saved')").wait_for()
    assert "VALIDATION_ERROR" in page.inner_text("#error")
    assert (
        api.get(f"/api/agents/{agent['id']}/compaction").json()["beta_compact_threshold"] == 100000
    )
    compaction.locator("[data-field=beta_compact_threshold]").fill("60000")
    compaction.locator("button[type=submit]").click()
    compaction.locator(".status-line:text-is('saved')").wait_for()
    assert (
        api.get(f"/api/agents/{agent['id']}/compaction").json()["beta_compact_threshold"] == 60000
    )
    console.no_error()
    # another agent opened, then deleted with two presses
    page.click(f"#agent-page-list li[data-agent-id='{doomed['id']}'] button")
    page.wait_for_selector("#agent-settings input[value='Doomed']")
    press_twice(page, "#agent-delete")
    page.wait_for_selector(f"#agent-page-list li[data-agent-id='{doomed['id']}']", state="detached")
    assert api.get(f"/api/agents/{doomed['id']}").status_code == 404
    page.wait_for_selector(f"#agent-select option[value='{doomed['id']}']", state="detached")
    assert api.get(f"/api/agents/{agent['id']}").status_code == 200
    console.no_error()


# --- MCP servers -----------------------------------------------------------------


def test_mcp_page_registers_tests_attaches_and_deletes(console: Console, api: httpx.Client) -> None:
    agent = new_agent(api, "MCP agent")
    mcp = HttpMcpServer("streamable_http")
    mcp.start()
    try:
        page = console.open("mcps")
        page.fill("#mcp-register [data-field=name]", "Loopback Tools")
        page.fill("#mcp-register [data-field=url]", mcp.url)
        page.click("#mcp-register button[type=submit]")
        card = page.locator("#mcp-servers li.card", has_text="Loopback Tools")
        card.locator("ul.tools li").first.wait_for(state="attached")
        server = next(s for s in api.get("/api/mcps").json() if s["name"] == "Loopback Tools")
        listed = card.locator("ul.tools code").all_text_contents()
        assert listed == [t["name"] for t in server["toolsCache"]]
        assert {"echo", "add"} <= set(listed)
        # attached to the side bar's agent with two tools allowed
        card.locator("[data-field=attach-allowed]").fill("add, echo")
        card.locator("[data-field=attach-approval]").fill("add")
        card.locator(f"form[data-attach='{server['id']}'] button[type=submit]").click()
        page.wait_for_selector(f"li[data-mcp-id='{server['id']}'] [data-detach]")
        attached = api.get(f"/api/agents/{agent['id']}/mcps").json()
        assert [
            (a["mcpServerId"], sorted(a["allowedTools"]), a["requireApproval"]) for a in attached
        ] == [(server["id"], ["add", "echo"], ["add"])]
        card = page.locator(f"li[data-mcp-id='{server['id']}']")
        assert "loopback-tools__add" in card.inner_text()
        card.locator("details > summary:has-text('tool(s)')").click()  # its tools, unfolded
        console.shot("mcps")
        # renamed: the slug, and so the names the model sees, follow; the tools stay listed
        card.locator("details > summary:text-is('Edit')").click()
        card.locator("[data-field=edit-name]").fill("Loop Tools")
        card.locator(f"form[data-edit='{server['id']}'] button[type=submit]").click()
        page.wait_for_selector(f"li[data-mcp-id='{server['id']}'] code:text-is('loop-tools')")
        renamed = api.get(f"/api/mcps/{server['id']}").json()
        assert (renamed["name"], renamed["slug"]) == ("Loop Tools", "loop-tools")
        assert renamed["toolsCache"] == server["toolsCache"]
        card = page.locator(f"li[data-mcp-id='{server['id']}']")
        assert "loop-tools__add" in card.inner_text()
        # a test after the server went away says why, in words
        mcp.stop()
        card.locator(f"[data-test='{server['id']}']").click()
        page.wait_for_selector(f"[data-test-result='{server['id']}']:has-text('failed')")
        mcp.start()
        page.click(f"[data-detach='{server['id']}']")
        page.wait_for_selector(f"form[data-attach='{server['id']}'] p:has-text('Not attached')")
        assert api.get(f"/api/agents/{agent['id']}/mcps").json() == []
        press_twice(page, f"[data-delete='{server['id']}']")
        page.wait_for_selector(f"li[data-mcp-id='{server['id']}']", state="detached")
        assert api.get(f"/api/mcps/{server['id']}").status_code == 404
        console.no_error()
    finally:
        mcp.stop()


def test_mcp_page_connects_an_oauth_server(console: Console, api: httpx.Client) -> None:
    auth = AuthServer()
    auth.token_prefix = "console-oauth-token-secret-"  # long enough for the secret scan
    with serve(auth) as url:
        auth.base = url
        server = api.post(
            "/api/mcps",
            json={"name": "OAuth Docs", "transport": "streamable_http", "url": f"{url}/mcp"},
        ).json()
        page = console.open("mcps")
        not_yet = f"[data-oauth-status='{server['id']}'][data-connected=false]"
        assert "Not connected" in page.inner_text(not_yet)
        page.click(f"[data-oauth-start='{server['id']}']")
        link = page.locator(f"a[data-oauth-link='{server['id']}']")
        link.wait_for()
        assert (link.get_attribute("href") or "").startswith(f"{url}/")
        assert link.get_attribute("rel") == "noopener noreferrer"
        # the authorization page (it approves at once) sends the browser to the callback
        callbacks: list[Any] = []
        console.context.on(
            "response", lambda r: callbacks.append(r) if "/oauth/callback" in r.url else None
        )
        with console.context.expect_page() as opened:
            link.click()
        popup = opened.value
        popup.wait_for_url("**/oauth/callback?**")
        popup.wait_for_load_state()
        assert [(r.status, r.json()) for r in callbacks] == [
            (200, {"ok": True, "mcpServerId": server["id"]})
        ]
        assert auth.issued, "no token was issued"
        for token in auth.issued:
            SCAN.secret(token, "an OAuth access token")
            SCAN.secret(token.replace("at-", "rt-"), "an OAuth refresh token")
        popup.close()
        # the page, loaded again, says the key's grant is there; Disconnect drops it
        grant = f"[data-oauth-status='{server['id']}']"
        page.reload()
        page.wait_for_selector(f"{grant}[data-connected=true]:has-text('Connected')")
        assert "scope tools" in page.inner_text(grant)
        assert not any(t in page.content() for t in auth.issued)
        assert api.get(f"/api/mcps/{server['id']}/oauth").json()["connected"] is True
        page.click(f"[data-oauth-disconnect='{server['id']}']")
        page.wait_for_selector(f"{grant}[data-connected=false]:has-text('Not connected')")
        assert page.locator(f"[data-oauth-disconnect='{server['id']}']").count() == 0
        answer = api.get(f"/api/mcps/{server['id']}/oauth").json()
        assert answer == {"connected": False, "expiresAt": None, "scope": None}
        console.no_error()


# --- tools -----------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    calls: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # the webhook tool's endpoint
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.calls.append(body)
        answer = json.dumps(
            {"order": body["arguments"].get("orderId"), "status": "shipped"}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/orders"
    finally:
        server.shutdown()
        server.server_close()


def test_tools_page_defines_calls_delegates_and_profiles(
    console: Console, api: httpx.Client, receiver: str
) -> None:
    agent = new_agent(api, "Tools agent")
    page = console.open("tools")
    page.click("#manage-page details > summary:has-text('New webhook tool')")
    page.fill("#tool-create [data-field=name]", "lookup_order")
    page.fill("#tool-create [data-field=url]", receiver)
    page.fill("#tool-create [data-field=description]", "An order's status")
    page.click("#tool-create button[type=submit]")
    page.wait_for_selector("#tool-list li.card:has-text('lookup_order')")
    tool = next(t for t in api.get("/api/tools").json() if t["name"] == "lookup_order")
    # a call from the page reaches the endpoint, and its answer is shown
    card = page.locator(f"li[data-tool-id='{tool['id']}']")
    card.locator("summary").click()
    card.locator("[data-field=arguments]").fill('{"orderId": "A-17"}')
    card.locator(f"form[data-try='{tool['id']}'] button").click()
    page.wait_for_selector(f"[data-result='{tool['id']}']:has-text('shipped')")
    assert '"order": "A-17"' in page.inner_text(f"[data-result='{tool['id']}']")
    assert _Receiver.calls[-1]["arguments"] == {"orderId": "A-17"}
    # delegated to the side bar's agent
    page.check(f"[data-delegate='{tool['id']}']")
    page.click("#tool-delegation button[type=submit]")
    page.wait_for_selector("#agent-tools code.chip:has-text('lookup_order')")
    assert api.get(f"/api/agents/{agent['id']}/delegated").json()["tool_ids"] == [tool["id"]]
    # a profile of that tool and a built-in one
    page.click("#profile-new > summary")
    new = page.locator("form[data-profile='']")
    new.locator("[data-field=profile-name]").fill("orders")
    new.locator("[data-field=profile-description]").fill("Order questions")
    new.locator("[data-tool='lookup_order']").check()
    new.locator("[data-tool='knowledge_search']").check()
    new.locator("button[type=submit]").click()
    page.wait_for_selector("form[data-profile='orders']")
    profiles = api.get(f"/api/agents/{agent['id']}").json()["tool_profiles"]
    assert profiles == {
        "orders": {"tools": ["lookup_order", "knowledge_search"], "description": "Order questions"}
    }
    console.no_error()
    console.shot("tools")
    press_twice(page, "[data-remove-profile='orders']")
    page.wait_for_selector("form[data-profile='orders']", state="detached")
    assert api.get(f"/api/agents/{agent['id']}").json()["tool_profiles"] is None
    press_twice(page, f"[data-delete='{tool['id']}']")
    page.wait_for_selector(f"li[data-tool-id='{tool['id']}']", state="detached")
    assert api.get(f"/api/tools/{tool['id']}").status_code == 404
    console.no_error()


# --- integrations ----------------------------------------------------------------


@pytest.fixture
def reader(pg_admin_url: str) -> Iterator[str]:
    """A connection string of a login role with no power of its own (the service
    refuses a role that may act on the server)."""
    with reader_role(pg_admin_url, PASSWORD) as role:
        d = conninfo_to_dict(pg_admin_url)
        yield (
            f"postgresql://{role}:{PASSWORD}@{d.get('host', '127.0.0.1')}:"
            f"{d.get('port', '5432')}/{d['dbname']}"
        )


@pytest.mark.postgres
def test_integrations_page_registers_attaches_and_deletes(
    console: Console, api: httpx.Client, reader: str
) -> None:
    agent = new_agent(api, "Database agent")
    page = console.open("integrations")
    # a connection that fails its test is refused, with the API's reason
    page.fill("#integration-register [data-field=name]", "Nowhere")
    page.fill(
        "#integration-register [data-field=connection]", "postgresql://nobody@127.0.0.1:1/none"
    )
    page.click("#integration-register button[type=submit]")
    page.wait_for_selector("#error:not([hidden])")
    assert "VALIDATION_ERROR" in page.inner_text("#error")
    assert page.input_value("#integration-register [data-field=connection]") == ""
    page.fill("#integration-register [data-field=name]", "Warehouse")
    page.fill("#integration-register [data-field=connection]", reader)
    page.fill("#integration-register [data-field=maxRows]", "50")
    page.click("#integration-register button[type=submit]")
    page.wait_for_selector("#integration-list li.card:has-text('Warehouse')")
    stored = next(i for i in api.get("/api/integrations").json() if i["name"] == "Warehouse")
    assert stored["max_rows"] == 50
    assert PASSWORD not in page.content()
    card = page.locator(f"li[data-integration-id='{stored['id']}']")
    assert f"db_{stored['slug']}__query" in card.inner_text()
    card.locator("label:has-text('query waits') input").check()
    card.locator(f"form[data-attach='{stored['id']}'] button[type=submit]").click()
    page.wait_for_selector(f"li[data-integration-id='{stored['id']}'] [data-detach]")
    attached = api.get(f"/api/agents/{agent['id']}/integrations").json()
    assert [(a["id"], a["require_approval"]) for a in attached] == [(stored["id"], ["query"])]
    console.shot("integrations")
    page.click(f"[data-detach='{stored['id']}']")
    page.wait_for_selector(f"form[data-attach='{stored['id']}'] p:has-text('Not attached')")
    assert api.get(f"/api/agents/{agent['id']}/integrations").json() == []
    press_twice(page, f"[data-delete='{stored['id']}']")
    page.wait_for_selector(f"li[data-integration-id='{stored['id']}']", state="detached")
    assert api.get(f"/api/integrations/{stored['id']}").status_code == 404


@pytest.mark.postgres
def test_integrations_page_edits_an_integration(
    console: Console, api: httpx.Client, reader: str
) -> None:
    made = api.post(
        "/api/integrations",
        json={"name": "Ledger", "type": "postgresql", "connection": reader, "maxRows": 20},
    )
    assert made.status_code == 201, made.text
    stored = made.json()
    page = console.open("integrations")
    form = f"form[data-edit='{stored['id']}']"
    page.click(f"li[data-integration-id='{stored['id']}'] details > summary:has-text('Edit')")
    assert page.input_value(f"{form} [data-field=edit-maxRows]") == "20"
    # a connection that fails its test: refused with the API's reason, nothing changed
    page.fill(f"{form} [data-field=edit-connection]", "postgresql://nobody@127.0.0.1:1/none")
    page.fill(f"{form} [data-field=edit-maxRows]", "5")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#error:not([hidden])")
    assert "VALIDATION_ERROR" in page.inner_text("#error")
    assert "connection" in page.inner_text("#error")
    assert page.input_value(f"{form} [data-field=edit-connection]") == ""
    assert api.get(f"/api/integrations/{stored['id']}").json() == stored
    # the connection left blank keeps the stored one; only what changed is sent
    patches: list[Any] = []
    console.context.on(
        "request",
        lambda r: patches.append(r.post_data_json) if r.method == "PATCH" else None,
    )
    page.fill(f"{form} [data-field=edit-name]", "Ledger EU")
    page.fill(f"{form} [data-field=edit-allowedTables]", "orders, public.items")
    page.fill(f"{form} [data-field=edit-maxRows]", "5")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector(f"li[data-integration-id='{stored['id']}'] code:has-text('ledger-eu')")
    assert patches[-1] == {
        "name": "Ledger EU",
        "allowedTables": ["orders", "public.items"],
        "maxRows": 5,
    }
    now = api.get(f"/api/integrations/{stored['id']}").json()
    assert (now["name"], now["slug"], now["max_rows"]) == ("Ledger EU", "ledger-eu", 5)
    assert now["allowed_tables"] == ["orders", "public.items"]
    assert now["has_connection"] is True
    card = page.locator(f"li[data-integration-id='{stored['id']}']")
    assert "db_ledger-eu__query" in card.inner_text()
    # a new connection, typed: tested and kept, never shown
    page.click(f"li[data-integration-id='{stored['id']}'] details > summary:has-text('Edit')")
    page.fill(f"{form} [data-field=edit-connection]", reader)
    page.fill(f"{form} [data-field=edit-allowedTables]", "")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector(f"li[data-integration-id='{stored['id']}']:has-text('Tables: all')")
    assert patches[-1] == {"connection": reader, "allowedTables": None}
    assert PASSWORD not in page.content()
    console.shot("integrations-edit")
    console.no_error()


# --- knowledge -------------------------------------------------------------------


def test_knowledge_page_uploads_until_ready_and_finds_it(
    console: Console, api: httpx.Client, tmp_path: Path
) -> None:
    new_agent(api, "Knowledge agent")
    doc = tmp_path / "returns.md"
    filler = "\n".join(f"Line {n} of the policy's appendix." for n in range(6000))
    doc.write_text(f"# Returns\n\nShoes may be returned within 30 days, unworn.\n\n{filler}\n")
    page = console.open("knowledge")
    page.set_input_files("#knowledge-upload [data-field=file]", str(doc))
    page.fill("#knowledge-upload [data-field=title]", "Returns policy")
    page.click("#knowledge-upload button[type=submit]")
    row = page.locator("#knowledge-list li.card", has_text="Returns policy")
    row.and_(page.locator("[data-status=ready]")).wait_for()
    assert page.evaluate("document.querySelector('#knowledge-progress').value") == 1
    page.wait_for_selector("#knowledge-upload-status:has-text('Returns policy: ready')")
    stored = next(d for d in api.get("/api/knowledge").json() if d["title"] == "Returns policy")
    assert stored["status"] == "ready"
    assert row.get_attribute("data-document-id") == stored["id"]
    assert f"{stored['chunk_count']} chunk(s)" in row.inner_text()
    # opened, the document shows how it was cut: fifty chunks, then the rest on demand
    chunks = api.get(f"/api/knowledge/{stored['id']}/chunks", params={"limit": 200}).json()
    assert stored["chunk_count"] == len(chunks["chunks"]) > 50
    row.locator(f"[data-chunks='{stored['id']}'] > summary").click()
    shown = page.locator(f"[data-chunk-list='{stored['id']}'] > li.card")
    shown.nth(49).wait_for()
    assert [li.get_attribute("data-chunk-id") for li in shown.all()] == [
        c["id"] for c in chunks["chunks"][:50]
    ]
    first = chunks["chunks"][0]
    assert shown.first.locator("pre").inner_text() == first["text"]
    assert (
        f"{first['chars']} characters, about {first['tokens']} tokens" in shown.first.inner_text()
    )
    assert "Returns" in shown.first.inner_text()  # its heading
    said = page.locator(f"[data-chunks-status='{stored['id']}']")
    assert said.inner_text() == f"50 of {stored['chunk_count']} chunk(s)"
    more = page.locator(f"[data-chunks-more='{stored['id']}']")
    for page_end in range(100, len(chunks["chunks"]) + 50, 50):
        more.click()
        shown.nth(min(page_end, len(chunks["chunks"])) - 1).wait_for()
    assert [li.get_attribute("data-chunk-id") for li in shown.all()] == [
        c["id"] for c in chunks["chunks"]
    ]
    assert page.locator(f"[data-chunks-more='{stored['id']}']").is_hidden()
    # the search box shows what the model's tool would get
    page.fill("#knowledge-search [data-field=query]", "returned unworn shoes")
    page.click("#knowledge-search button[type=submit]")
    page.wait_for_selector("#knowledge-results li.card")
    answer = api.post("/api/knowledge/search", json={"query": "returned unworn shoes"}).json()
    assert [
        c.get_attribute("data-chunk-id") for c in page.locator("#knowledge-results li.card").all()
    ] == [r["chunk_id"] for r in answer["results"]]
    assert "within 30 days" in page.locator("#knowledge-results li.card").first.inner_text()
    page.click("#manage-page details > summary:has-text('The tool result')")
    tool = json.loads(page.inner_text("#knowledge-tool-result"))
    assert tool["results"][0]["document_id"] == stored["id"]
    assert set(tool["results"][0]) == {
        "document_id",
        "title",
        "chunk_id",
        "headings",
        "page",
        "score",
        "text",
    }
    console.no_error()
    console.shot("knowledge")
    press_twice(page, f"[data-delete='{stored['id']}']")
    page.wait_for_selector(f"li[data-document-id='{stored['id']}']", state="detached")
    assert api.get(f"/api/knowledge/{stored['id']}").status_code == 404


def test_knowledge_page_shows_a_refused_upload_and_a_failed_one(
    console: Console, api: httpx.Client, tmp_path: Path
) -> None:
    odd = tmp_path / "picture.bin"
    odd.write_bytes(b"\x00\x01\x02 not a document")
    page = console.open("knowledge")
    page.set_input_files("#knowledge-upload [data-field=file]", str(odd))
    page.click("#knowledge-upload button[type=submit]")
    page.wait_for_selector("#error:not([hidden])")
    refused = api.post(
        "/api/knowledge/upload", files={"file": ("picture.bin", odd.read_bytes())}
    ).json()
    assert page.inner_text("#error") == f"{refused['error']}: {refused['detail']}"
    assert page.inner_text("#knowledge-upload-status") == "not uploaded"
    # a PDF that cannot be read is taken, then fails, and says why
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nnot really a pdf\n")
    page.set_input_files("#knowledge-upload [data-field=file]", str(broken))
    page.click("#knowledge-upload button[type=submit]")
    page.wait_for_selector("#knowledge-list li.card[data-status=failed]:has-text('broken.pdf')")
    stored = next(d for d in api.get("/api/knowledge").json() if d["title"] == "broken.pdf")
    assert stored["status"] == "failed"
    row = page.locator(f"li[data-document-id='{stored['id']}']")
    assert stored["error"] in row.inner_text()
    page.wait_for_selector("#knowledge-upload-status:has-text('broken.pdf: failed')")
    console.no_error()
    api.delete(f"/api/knowledge/{stored['id']}")


# --- memories --------------------------------------------------------------------


def _say(api: httpx.Client, thread_id: str, content: str) -> None:
    r = api.post(f"/api/threads/{thread_id}/messages", json={"content": content})
    assert r.status_code == 200, r.text


def test_memories_page_browses_recalls_and_deletes(console: Console, api: httpx.Client) -> None:
    agent = new_agent(api, "Memory agent")
    page = console.open("memories")
    page.wait_for_selector("#memory-off")
    page.check("#memory-settings [data-field=enabled]")
    page.click("#memory-settings button[type=submit]")
    page.wait_for_selector("#memory-settings-saved:has-text('tools on')")
    assert api.get(f"/api/agents/{agent['id']}/memory").json()["enabled"] is True
    thread = api.post("/api/threads", json={"agentId": agent["id"]}).json()
    for fact, key in (
        ("The guest drinks green tea", "tea"),
        ("The guest is allergic to nuts", "nuts"),
    ):
        args = json.dumps({"content": fact, "key": key, "scope": "agent"})
        _say(api, thread["id"], f"call memory_save {args}")
    stored = api.get(f"/api/agents/{agent['id']}/memories").json()["memories"]
    assert len(stored) == 2
    page.reload()
    page.wait_for_selector("#memory-list li.card >> nth=1")
    assert [
        li.get_attribute("data-memory-id") for li in page.locator("#memory-list li.card").all()
    ] == [m["id"] for m in stored]
    page.fill("#memory-recall [data-field=recall]", "tea")
    page.click("#memory-recall button[type=submit]")
    page.wait_for_selector("#memory-recalled li.card")
    recalled = api.post(f"/api/agents/{agent['id']}/memory", json={"query": "tea"}).json()[
        "memories"
    ]
    assert [
        li.get_attribute("data-memory-id") for li in page.locator("#memory-recalled li.card").all()
    ] == [m["id"] for m in recalled]
    assert "green tea" in page.inner_text("#memory-recalled li.card >> nth=0")
    console.no_error()
    console.shot("memories")
    tea = recalled[0]["id"]
    # deleted from the recall's answer: gone from both lists
    press_twice(page, f"#memory-recalled [data-delete='{tea}']")
    page.wait_for_selector(f"#memory-recalled li[data-memory-id='{tea}']", state="detached")
    page.wait_for_selector(f"#memory-list li[data-memory-id='{tea}']", state="detached")
    assert page.locator("#memory-list li.card").count() == 1
    left = api.get(f"/api/agents/{agent['id']}/memories").json()["memories"]
    assert [m["content"] for m in left] == ["The guest is allergic to nuts"]


def test_memories_page_adds_and_edits_by_hand(console: Console, api: httpx.Client) -> None:
    agent = new_agent(api, "Hand-kept memory agent")
    path = f"/api/agents/{agent['id']}/memories"
    page = console.open("memories")
    page.wait_for_selector("#memory-count:has-text('No memory here yet.')")
    page.fill("#memory-add [data-field=content]", "The guest prefers a window seat")
    page.fill("#memory-add [data-field=key]", "Seat")
    page.click("#memory-add button[type=submit]")
    page.wait_for_selector("#memory-list li.card:has-text('window seat')")
    assert page.inner_text("#memory-add-status") == "kept in the agent scope"
    [seat] = api.get(path).json()["memories"]
    assert (seat["content"], seat["key"], seat["scope"], seat["scope_id"]) == (
        "The guest prefers a window seat",
        "seat",
        "agent",
        None,
    )
    assert page.input_value("#memory-add [data-field=content]") == ""
    # a user's memory names the user
    assert page.locator("#memory-add [data-field=scopeId]").is_disabled()
    page.select_option("#memory-add [data-field=scope]", "user")
    page.fill("#memory-add [data-field=scopeId]", "guest-1")
    page.fill("#memory-add [data-field=content]", "Speaks French")
    page.click("#memory-add button[type=submit]")
    page.wait_for_selector("#memory-list li.card:has-text('Speaks French')")
    french = api.get(path).json()["memories"][0]
    assert (french["scope"], french["scope_id"]) == ("user", "guest-1")
    # edited in place: recall finds the new words, not the old
    item = page.locator(f"#memory-list li[data-memory-id='{seat['id']}']")
    item.locator(f"[data-edit='{seat['id']}']").click()
    form = item.locator(f"[data-edit-form='{seat['id']}']")
    assert form.locator("[data-field=content]").input_value() == seat["content"]
    form.locator("[data-field=content]").fill("The guest prefers an aisle seat")
    form.locator("button[type=submit]").click()
    page.wait_for_selector(f"#memory-list li[data-memory-id='{seat['id']}']:has-text('aisle')")
    assert api.get(path).json()["memories"][1]["content"] == "The guest prefers an aisle seat"
    recall = f"/api/agents/{agent['id']}/memory"
    assert api.post(recall, json={"query": "window"}).json()["memories"] == []
    assert [m["id"] for m in api.post(recall, json={"query": "aisle"}).json()["memories"]] == [
        seat["id"]
    ]
    # an edit the service refuses says why, and changes nothing
    item = page.locator(f"#memory-list li[data-memory-id='{seat['id']}']")
    item.locator(f"[data-edit='{seat['id']}']").click()
    item.locator("[data-field=content]").fill(" ")
    item.locator("button[type=submit]").click()
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error") == "VALIDATION_ERROR: content: must not be empty"
    assert api.get(path).json()["memories"][1]["content"] == "The guest prefers an aisle seat"


# --- plans -----------------------------------------------------------------------


def test_plans_page_makes_a_plan_with_dependencies(console: Console, api: httpx.Client) -> None:
    agent = new_agent(api, "Planning agent")
    thread = api.post("/api/threads", json={"agentId": agent["id"], "title": "Moving"}).json()
    page = console.open("plans")
    assert page.input_value("#plan-thread") == thread["id"]
    page.fill("#plan-create [data-field=plan-title]", "Move house")
    page.click("#plan-create button[type=submit]")
    plan_card = page.locator("#plan-list li.card", has_text="Move house")
    plan_card.wait_for()
    plan_card.locator("[data-field=todos]").fill("Pack\nHire a van\nDrive")
    plan_card.locator("form[data-todo-add] button").click()
    page.wait_for_selector("#plan-list li.todo >> nth=2")
    plan = api.get("/api/plans", params={"threadId": thread["id"]}).json()[0]
    pack, van, drive = plan["todos"]
    # Drive waits on the van; the ready list says so
    page.select_option(f"[data-todo-dep='{drive['id']}']", van["id"])
    page.wait_for_selector(f"li[data-todo-id='{drive['id']}'] button.chip")
    assert api.get(f"/api/plans/{plan['id']}/todos/{drive['id']}/deps").json()[0] == {
        "todo_id": drive["id"],
        "depends_on_id": van["id"],
    }
    ready = page.locator(f"[data-ready='{plan['id']}']")
    assert "Pack, Hire a van" in ready.inner_text()
    assert "1 waiting on others" in ready.inner_text()
    page.select_option(f"[data-todo-status='{van['id']}']", "done")
    page.wait_for_selector(f"li[data-todo-id='{van['id']}'][data-status=done]")
    assert "Pack, Drive" in page.inner_text(f"[data-ready='{plan['id']}']")
    page.select_option(f"[data-plan-status='{plan['id']}']", "in_progress")
    page.wait_for_selector(
        f"[data-plan-status='{plan['id']}'] option[value=in_progress][selected]", state="attached"
    )
    stored = api.get(f"/api/plans/{plan['id']}").json()
    assert stored["status"] == "in_progress"
    assert [t["status"] for t in stored["todos"]] == ["pending", "done", "pending"]
    assert pack["content"] == "Pack"
    console.no_error()
    console.shot("plans")
    press_twice(page, f"[data-plan-delete='{plan['id']}']")
    page.wait_for_selector(f"li[data-plan-id='{plan['id']}']", state="detached")
    assert api.get("/api/plans", params={"threadId": thread["id"]}).json() == []


# --- API keys --------------------------------------------------------------------


def test_keys_page_shows_a_new_key_once_and_revokes_it(
    console: Console, api: httpx.Client, svc: tuple[Service, str]
) -> None:
    service, _ = svc
    page = console.open("keys")
    page.fill("#key-create [data-field=name]", "ci runner")
    page.click("#key-create button[type=submit]")
    page.wait_for_selector("#key-secret")
    secret = page.input_value("#key-secret")
    assert secret.startswith("ask_")
    with client(service, secret) as fresh:
        assert fresh.get("/api/agents").status_code == 200
    made = next(k for k in api.get("/api/keys").json() if k["name"] == "ci runner")
    row = page.locator(f"tr[data-key-id='{made['id']}']")
    assert made["prefix"] in row.inner_text()
    # the page's own key is marked
    assert page.locator("tr:has(.badge:has-text('this session'))").count() == 1
    console.shot("keys")
    # shown once: opened again, the page has no trace of it
    page.click("#key-hide")
    page.click("#manage-nav a[data-page=agents]")
    page.wait_for_selector("#manage-page[data-page=agents] h2")
    page.click("#manage-nav a[data-page=keys]")
    page.wait_for_selector(f"tr[data-key-id='{made['id']}']")
    assert secret not in page.content()
    # revoked from the keyboard: Enter arms the button, Escape disarms it, Enter twice revokes
    revoke = f"[data-revoke='{made['id']}']"
    page.focus(revoke)
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{revoke}[data-armed]")
    page.keyboard.press("Escape")
    page.wait_for_selector(f"{revoke}:not([data-armed])")
    assert api.get("/api/keys").json()[-1]["revoked_at"] is None
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{revoke}[data-armed]")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"tr[data-key-id='{made['id']}'][data-revoked=true]")
    with client(service, secret) as fresh:
        assert fresh.get("/api/agents").status_code == 401
    console.no_error()


def test_manage_pages_fit_a_narrow_screen(console: Console, api: httpx.Client) -> None:
    """At 420 px every page of this set lays out without a sideways scroll."""
    new_agent(api, "Narrow agent")
    page = console.open("agents")
    page.set_viewport_size({"width": 420, "height": 900})
    for page_id in (
        "agents",
        "mcps",
        "tools",
        "integrations",
        "knowledge",
        "memories",
        "plans",
        "keys",
    ):
        page.click(f"#manage-nav a[data-page={page_id}]")
        page.wait_for_selector(f"#manage-page[data-page={page_id}] h2")
        page.wait_for_load_state("networkidle")  # the page's reads are in
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 420, f"{page_id} is {width} px wide"
    console.no_error()
