from agentsvc_web.controllers.agents import AgentController
from agentsvc_web.controllers.keys import KeyController
from agentsvc_web.controllers.threads import ThreadController

__all__ = ["AgentController", "KeyController", "ThreadController"]
