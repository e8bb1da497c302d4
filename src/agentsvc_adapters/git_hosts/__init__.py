"""Git hosts: where a code session's pushed branch becomes a pull request
(``github.py``: GitHub's REST API)."""

from agentsvc_adapters.git_hosts.github import GitHubHost, github_from_env

__all__ = ["GitHubHost", "github_from_env"]
