"""Channels: an agent's doors onto messaging platforms (docs/channels.md).

- ``manage``: the owner's routes (channels, contacts, QR pairing);
- ``inbound``: the public endpoint: a request read by the channel's platform,
  answered at once, its messages stored once and queued;
- ``answer``: the job that answers one message (policies, the turn, delivery);
- ``transitions``: the pure rules the other three apply.
"""

from agentsvc_core.use_cases.channels.answer import ChannelAnswers
from agentsvc_core.use_cases.channels.inbound import ANSWER_JOB, ChannelInbound
from agentsvc_core.use_cases.channels.manage import (
    ChannelChanges,
    ChannelDraft,
    Channels,
    ChannelView,
    PairingView,
)

__all__ = [
    "ANSWER_JOB",
    "ChannelAnswers",
    "ChannelChanges",
    "ChannelDraft",
    "ChannelInbound",
    "ChannelView",
    "Channels",
    "PairingView",
]
