"""Which adapter serves each channel type: ``channel_platforms`` builds them all
once, at the composition root (``agentsvc_web/bootstrap/channels.py``), from the
environment and the one outbound guard. A platform adapter joins with one line
in ``channel_platforms``; a type with no adapter here cannot be created (422)
and its inbound endpoint answers 404."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentsvc_adapters.channels.webhook import WebhookPlatform
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
    # one line per platform adapter, e.g. made.add(TelegramPlatform(guard, env))
    return made
