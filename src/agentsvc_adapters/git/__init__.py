"""Skills fetched from git repositories (smart HTTP) and plain URLs, through the
outbound guard (``source.py`` says how)."""

from agentsvc_adapters.git.source import GitSkillSource

__all__ = ["GitSkillSource"]
