"""The turn (docs/architecture.md, "The turn"): a user's message sent, the reply
streamed, the whole of it stored.

- ``conversation.py``: send, stop, sweep and shutdown (``Conversation``); a send
  checks its input (``send_input.py``), plans the reply (``reply_plan.py``), stores
  the run and starts the reply.
- ``reply.py``: the reply loop (compaction, model calls, tools, the final store);
  ``reply_tools.py`` runs one server-side tool call of it.
- ``events.py``: the events a reply streams and the ``Turn`` buffer they go to;
  ``streams.py`` re-attaches a reader to a reply, in this process or another.
- ``context.py``: what the model is given (pure); ``compaction.py``: summary-based
  compaction of a long history.
- ``heartbeats.py``: this process's running replies kept alive, dead ones found.
- ``spans.py``: the turn's OpenTelemetry spans; ``_private.py``: the plan and the
  reply's state the modules above share.
"""
