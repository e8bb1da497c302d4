from agentsvc_web.controllers.agents import AgentController
from agentsvc_web.controllers.analytics import AnalyticsController
from agentsvc_web.controllers.keys import KeyController
from agentsvc_web.controllers.threads import ThreadController
from agentsvc_web.controllers.traces import TracesController

__all__ = [
    "AgentController",
    "AnalyticsController",
    "KeyController",
    "ThreadController",
    "TracesController",
]
