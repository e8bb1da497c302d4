from agentsvc_web.controllers.agents import AgentController
from agentsvc_web.controllers.keys import KeyController
from agentsvc_web.controllers.logs import AnalyticsController, LogsController
from agentsvc_web.controllers.threads import ThreadController

__all__ = [
    "AgentController",
    "AnalyticsController",
    "KeyController",
    "LogsController",
    "ThreadController",
]
