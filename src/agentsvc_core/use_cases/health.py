"""Whether this process should receive traffic (the ``/readyz`` probe).

Ready means: not shutting down, and storage can serve (``Storage.check_ready``:
reachable through the pool, schema migrated). A process that is draining (SIGTERM
received: ``drain``) answers not ready at once, so a load balancer stops sending
it requests while its running replies finish. Liveness (``/healthz``) is not
this: a process that is alive but not ready must not be restarted for it.
"""

from __future__ import annotations

from agentsvc_core.errors import Unavailable
from agentsvc_core.ports import Storage

__all__ = ["Readiness"]


class Readiness:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.draining = False

    def drain(self) -> None:
        """From now on not ready: the process is shutting down."""
        self.draining = True

    async def check(self) -> None:
        """Returns when ready; raises ``Unavailable`` saying why not."""
        if self.draining:
            raise Unavailable("the service is shutting down")
        await self._storage.check_ready()
