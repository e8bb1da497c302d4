"""Runners (docs/runners.md): headless agent pipelines, their triggers, budgets
and runs.

- ``definitions.py``: the runner, its budget and skills, its triggers (``Runners``);
  ``steps.py`` checks steps, ``triggers.py`` triggers and cron schedules.
- ``runs.py``: starting runs (the API, a token, a cron tick), reading, cancelling
  and resuming them (``RunnerRuns``).
- ``engine.py``: what a run's job does, one step after the other (``RunnerEngine``).
- ``transitions.py``: the run's state changes, pure functions of the run.
- ``budgets.py``: a runner's budget against one run.
- ``expressions.py``: JMESPath over a run's context.
- ``trace.py``: an ended run's trace record; ``analytics.py``: a runner's report.
"""
