"""Skills (docs/skills.md): instructions an agent loads when a task calls for them.

- ``format.py``: a ``SKILL.md`` read into its name, description, allowed tools and
  body, by the open Agent Skills format's rules, within bounds (pure).
"""
