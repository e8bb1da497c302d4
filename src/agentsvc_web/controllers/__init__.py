from agentsvc_web.controllers.agents import AgentController
from agentsvc_web.controllers.keys import KeyController

__all__ = ["AgentController", "KeyController"]
