"""Which adapter serves each channel type: ``channel_platforms`` builds them all
once, at the composition root (``agentsvc_web/bootstrap/channels.py``), from the
environment and the one outbound guard. A platform adapter joins with one line
in ``channel_platforms``; a type with no adapter here cannot be created (422)
and its inbound endpoint answers 404."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentsvc_adapters.channels.slack import SLACK_API_URL, SlackPlatform
from agentsvc_adapters.channels.telegram import TELEGRAM_API_URL, TelegramPlatform
from agentsvc_adapters.channels.webhook import WebhookPlatform
from agentsvc_adapters.channels.whatsapp_cloud import whatsapp_cloud_from_env
from agentsvc_adapters.channels.whatsapp_web import whatsapp_web_from_env
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.entities.channel import ChannelType
from agentsvc_core.ports.channel_platforms import ChannelPlatform

__all__ = ["Platforms", "channel_platforms"]


class Platforms:
    """The adapters by type, and their HTTP clients to close at shutdown."""

    def __init__(self) -> None:
        self.by_type: dict[ChannelType, ChannelPlatform] = {}

    def add(self, platform: ChannelPlatform) -> None:
        self.by_type[platform.type] = platform

    async def aclose(self) -> None:
        for platform in self.by_type.values():
            close = getattr(platform, "aclose", None)
            if close is not None:
                await close()


def channel_platforms(guard: OutboundGuard, env: Mapping[str, str] | None = None) -> Platforms:
    """Every channel type's adapter. ``env``: the environment the adapters read
    their settings from (their base URLs and keys; None: the process's)."""
    env = os.environ if env is None else env
    made = Platforms()
    made.add(WebhookPlatform(guard))
    made.add(TelegramPlatform(guard, _url(env, "AGENTSVC_TELEGRAM_API_URL", TELEGRAM_API_URL)))
    made.add(SlackPlatform(guard, _url(env, "AGENTSVC_SLACK_API_URL", SLACK_API_URL)))
    made.add(whatsapp_cloud_from_env(guard, env))
    made.add(whatsapp_web_from_env(guard, env))
    return made


def _url(env: Mapping[str, str], name: str, default: str) -> str:
    """A platform's base URL (``agentsvc_web.settings`` checked it at start-up)."""
    return env.get(name, "").strip() or default
