"""A runner's public routes: the inbound webhook, the button page and its
``embed.js`` (docs/runners.md). The trigger's token authenticates them: it starts
runs of one runner and nothing else."""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import quote
from uuid import UUID

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from agentsvc_core.entities.runner import (
    Runner,
)
from agentsvc_core.errors import PermissionDenied
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.runners.definitions import Runners
from agentsvc_core.use_cases.runners.runs import RunnerRuns
from agentsvc_web.controllers.runners.schemas import (
    Req,
    RunStarted,
)
from agentsvc_web.embed_domains import embedder_allowed
from agentsvc_web.limits import TOKEN_IN_URL
from agentsvc_web.openapi import errors
from agentsvc_web.runner_button import button_headers, button_page, embed_script


class RunnerWebhookController(Controller):
    """``POST /api/runners/webhooks/{token}``: public; the token authenticates."""

    path = "/api/runners/webhooks"
    tags = ["runners"]

    @post(
        "/{token:str}",
        operation_id="runnerWebhook",
        status_code=202,
        security=[],
        opt=TOKEN_IN_URL,
        responses=errors(400, 404, 413, 422, 429),
        summary="Start a run of the token's runner; the body (a JSON object) is its input",
    )
    async def inbound(
        self, request: Req, runner_runs: NamedDependency[RunnerRuns], token: FromPath[str]
    ) -> Response[RunStarted]:
        body = await request.body()
        key = request.headers.get("idempotency-key") or request.headers.get("webhook-id")
        run, created = await runner_runs.from_token(token, body, key, kinds=("webhook", "button"))
        return Response(RunStarted(run_id=run.id), status_code=202 if created else 200)


Token = Annotated[str, QueryParameter(name="token", min_length=1, max_length=200)]


class RunnerButtonController(Controller):
    """A runner's button page and ``embed.js``: public (the button trigger's token,
    which can start runs of this runner and nothing else, is the credential),
    served only to the organization's allowed embed domains (docs/runners.md)."""

    path = "/api/runners/{runner_id:uuid}"
    tags = ["runners"]

    @staticmethod
    async def _allowed(
        request: Req, runners: Runners, org_settings: OrgSettings, runner_id: UUID, token: str
    ) -> tuple[Runner, tuple[str, ...]]:
        runner = await runners.button(runner_id, token)
        domains = await org_settings.embed_domains(runner.org_id)
        if not embedder_allowed(
            origin=request.headers.get("origin"),
            referer=request.headers.get("referer"),
            domains=domains,
        ):
            raise PermissionDenied("this site may not embed the organization's buttons")
        return runner, domains

    @get(
        "/button",
        operation_id="getRunnerButton",
        security=[],
        opt=TOKEN_IN_URL,
        media_type="text/html",
        responses=errors(403, 404, 422),
        summary="The runner's button: an HTML form built from its input schema",
    )
    async def button(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        org_settings: NamedDependency[OrgSettings],
        runner_id: FromPath[UUID],
        token: Token,
    ) -> Response[str]:
        runner, domains = await self._allowed(request, runners, org_settings, runner_id, token)
        nonce = secrets.token_urlsafe(16)
        page = button_page(
            name=runner.name,
            description=runner.description,
            input_schema=runner.input_schema,
            submit_url=f"/api/runners/webhooks/{token}",
            nonce=nonce,
        )
        return Response(
            page,
            media_type="text/html",
            headers=button_headers(domains=domains, nonce=nonce),
        )

    @get(
        "/embed.js",
        operation_id="getRunnerEmbedScript",
        security=[],
        opt=TOKEN_IN_URL,
        media_type="text/javascript",
        responses=errors(403, 404, 422),
        summary="A script that mounts the runner's button on a page of an allowed site",
    )
    async def embed(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        org_settings: NamedDependency[OrgSettings],
        runner_id: FromPath[UUID],
        token: Token,
    ) -> Response[str]:
        runner, _ = await self._allowed(request, runners, org_settings, runner_id, token)
        script = embed_script(
            button_url=f"/api/runners/{runner_id}/button?token={quote(token, safe='')}",
            title=runner.name,
        )
        return Response(
            script,
            media_type="text/javascript",
            headers={"Cross-Origin-Resource-Policy": "cross-origin"},
        )
