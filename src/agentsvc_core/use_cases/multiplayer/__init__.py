"""Multiplayer threads (docs/multiplayer.md): several people and one agent.

- ``config.py``: the agent's multiplayer configuration (``/api/agents/{id}/multiplayer``)
  and the pure rule that says whether a posted message calls the agent.
- ``posts.py``: what a send to a multiplayer thread does before the turn: a message
  that does not call the agent is stored on its own; the thread's followers are told.
- ``events.py``: the thread's live events (``GET /api/threads/{id}/events``): its
  messages and replies as they are stored, from any process, re-attachable.
"""
