"""Model providers behind the core's ``ChatModel`` port, and the router between them."""

from agentsvc_adapters.llm.local import LocalModel
from agentsvc_adapters.llm.router import Families, PrefixRouter

__all__ = ["Families", "LocalModel", "PrefixRouter"]
