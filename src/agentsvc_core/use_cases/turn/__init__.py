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
  reply's state the modules above share; ``queued.py``: sends that wait for a busy
  thread.

Round trips to storage per turn, always: ``turn_inputs`` (the thread, its agent,
the latest run, the agent's MCP servers and sealed settings, the history, read
together), ``begin_turn`` (the run and the user's message, checking that the
history read is still whole) and ``finish_turn`` (the run, the assistant messages,
the usage records and the reply's events, kept for re-attach: use_cases/turn/streams.py).
Nothing is written per token. A send with an idempotency key (``send_once``) reads
the key first and claims it in ``begin_turn``'s transaction; a reply followed from
another process writes its events in batches while it runs. Beyond these, by the
agent's settings (use_cases/turn/reply.py): with its credential resolver on, one read
of the organization's signing secret per turn, before the signed webhook call;
with summary compaction on (beta family), a read of the thread's checkpoint and a
write of it after the reply (two when it summarises); per server tool call, what
the tool reads (an MCP tool: the agent's attached servers). A multiplayer thread's
send (only there) reads the sender's participation, and the agent's multiplayer
configuration when a person posts, and tells the thread's followers (a NOTIFY) when
the message is stored and when the reply is (use_cases/multiplayer/posts.py). Heartbeats are one
write per beat for all of a process's running replies. The model call starts
while ``begin_turn`` is on its way, so the first token does not wait for it;
nothing the reply produces is shown, stored or acted on before the run is stored.
A thread with branches (use_cases/branches.py) moves its head with
``begin_turn``'s and ``finish_turn``'s writes, in the same statements.
"""
