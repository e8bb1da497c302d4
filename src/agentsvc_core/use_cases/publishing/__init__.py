"""Published chats: an agent anyone may talk to, from the sites its owner allows
(docs/publishing.md). ``chats``: the owner's resource; ``visitors``: the public
routes' principal and what it may do; ``identity``: the proofs, pure functions."""

from agentsvc_core.use_cases.publishing.chats import ChatChanges, ChatDraft, ChatView, Publishing
from agentsvc_core.use_cases.publishing.visitors import Identity, PublicChats, PublicFace, Visitor

__all__ = [
    "ChatChanges",
    "ChatDraft",
    "ChatView",
    "Identity",
    "PublicChats",
    "PublicFace",
    "Publishing",
    "Visitor",
]
