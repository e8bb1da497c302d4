"""Model providers behind the core's ``ChatModel`` port, and the router between them."""

from agentsvc_adapters.llm.alpha import AlphaModel
from agentsvc_adapters.llm.beta import BetaModel
from agentsvc_adapters.llm.local import LocalModel
from agentsvc_adapters.llm.router import Families, PrefixRouter

__all__ = ["AlphaModel", "BetaModel", "Families", "LocalModel", "PrefixRouter"]
