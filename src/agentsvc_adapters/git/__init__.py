"""Git over smart HTTP, through the outbound guard: skills fetched from git
repositories and plain URLs (``source.py``), and the git remote code sessions
fetch from and push to (``remote.py``)."""

from agentsvc_adapters.git.remote import GitHttpRemote
from agentsvc_adapters.git.source import GitSkillSource

__all__ = ["GitHttpRemote", "GitSkillSource"]
