"""In-memory storage: real code, used by unit and web tests and ``AGENTSVC_STORAGE=memory``.

All state lives in one process. Each method runs without awaiting between its
read and its write, so on one event loop every operation is atomic.
"""

from agentsvc_adapters.memory.storage import MemoryStorage

__all__ = ["MemoryStorage"]
