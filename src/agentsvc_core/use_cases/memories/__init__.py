"""Memories (docs/memory.md): what an agent keeps about a user or a thread.

- ``memories.py``: the agent's memory configuration, the list, recall and delete of
  its memories, and the save and search the tools use (``Memories``).
- ``tools.py``: the ``memory_save`` and ``memory_search`` tools the model calls.
- ``collect.py``: automatic collection after a completed turn, as a background job.
"""
