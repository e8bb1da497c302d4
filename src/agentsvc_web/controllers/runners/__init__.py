"""The runner routes (docs/runners.md).

- ``routes.py``: runners, their triggers, runs and reports under ``/api/runners``.
- ``public.py``: the routes a trigger's token opens, without an API key.
- ``schemas.py``: the request bodies, answers and cursors of these routes and of
  ``scheduled_tasks.py`` and ``suggestions.py``.
"""
