"""Runners (docs/runners.md): headless agent pipelines, their triggers, budgets
and runs.

- ``definitions.py``: the runner, its budget and skills, its triggers (``Runners``);
  ``steps.py`` checks steps, ``triggers.py`` triggers and cron schedules.
- ``runs.py``: starting runs (the API, a token, a cron tick), reading, cancelling
  and resuming them (``RunnerRuns``), and ``save_run``, the compare-and-set that
  applies a state change.
- ``transitions.py``: the run's state changes, pure functions of the run, and
  what a step's attempt came to.
- ``engine.py``: what a run's job does, one step after the other (``RunnerEngine``);
  ``work.py`` a step's work by its kind, ``agent_steps.py`` an agent step's turn,
  ``budgets.py`` a runner's budget against one run.
- ``events.py``: what each state change of a run tells (stored with it by
  ``save_run``), and the feed that pages and follows a run's events.
- ``expressions.py``: JMESPath over a run's context.
- ``trace.py``: an ended run's trace record; ``analytics.py``: a runner's report.
"""
