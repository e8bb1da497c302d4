"""The git adapters' one failure, ``GitFailure``: raised by the pieces they share
(``wire.py``, ``objects.py``, ``http.py``) and turned into the port's own error
at each adapter's edge (``SkillSourceError`` in ``source.py``,
``GitRemoteError`` in ``remote.py``). Its text names a host, never a URL nor a
credential; ``permanent`` is False only where trying again may help (the
network, a time bound, a server's own trouble)."""

from __future__ import annotations

__all__ = ["GitFailure", "ServerRefused"]


class GitFailure(Exception):
    def __init__(self, detail: str, *, permanent: bool = True) -> None:
        super().__init__(detail)
        self.detail = detail
        self.permanent = permanent


class ServerRefused(GitFailure):
    """The server answered the fetch with an error (its HTTP status or its own
    reason): for a commit it did not advertise, most often one it will not serve."""
