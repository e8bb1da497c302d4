"""Runner triggers (docs/runners.md, "Triggers"): a cron trigger ticks in its own
time zone, daylight saving time included, and a disabled trigger's token starts
nothing. Over the memory storage and the test's clock: the schedule is read from
``next_fire_at`` and from the runs ``fire_due`` makes as the clock moves (no
every-second cron, where the zone would make no difference)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from agentsvc_core.entities.runner import Runner, Trigger
from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases.runners.triggers import TriggerChanges, TriggerDraft
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.turn_world import ORG, WHO


def utc(year: int, month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


async def _cron(
    rw: RunnerWorld, at: datetime, cron: str, timezone: str | None = None
) -> tuple[Runner, Trigger]:
    """A runner with a cron trigger added when the clock reads ``at`` (its runs
    queue: nothing runs them here, and a tick while one is active would be skipped)."""
    rw.turn.clock.at = at
    runner = await rw.runner("condition")
    zone: dict[str, Any] = {} if timezone is None else {"timezone": timezone}
    draft = TriggerDraft(kind="cron", cron=cron, overlap="queue", **zone)
    trigger, token = await rw.runners.add_trigger(WHO, runner.id, draft)
    assert token is None
    return runner, trigger


async def _ticks(rw: RunnerWorld, trigger_id: UUID, count: int) -> list[datetime]:
    """Move the clock to each next tick in turn and fire it: the ticks the runs were
    made for (each run's ``scheduled_for``)."""
    ticks: list[datetime] = []
    for _ in range(count):
        t = await rw.turn.storage.runners.get_trigger(ORG, trigger_id)
        assert t.next_fire_at is not None, t
        rw.turn.clock.at = t.next_fire_at
        [run] = await rw.runs.fire_due()
        assert (run.trigger_id, run.trigger_kind) == (trigger_id, "cron")
        assert run.scheduled_for is not None
        ticks.append(run.scheduled_for)
    return ticks


# --- the time zone ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("timezone", "at", "first"),
    [
        # 09:00 in Paris is 08:00 UTC in winter (CET, +01:00), 07:00 in summer (CEST)
        ("Europe/Paris", utc(2026, 1, 15, 12), utc(2026, 1, 16, 8)),
        ("Europe/Paris", utc(2026, 7, 15, 12), utc(2026, 7, 16, 7)),
        # a little before 09:00 in Paris: today's tick, not tomorrow's
        ("Europe/Paris", utc(2026, 1, 15, 7, 59), utc(2026, 1, 15, 8)),
        ("America/New_York", utc(2026, 1, 15, 12), utc(2026, 1, 15, 14)),
        ("Asia/Tokyo", utc(2026, 1, 15, 12), utc(2026, 1, 16, 0)),
        ("UTC", utc(2026, 1, 15, 12), utc(2026, 1, 16, 9)),
    ],
)
async def test_a_cron_trigger_ticks_at_its_hour_in_its_time_zone(
    timezone: str, at: datetime, first: datetime
) -> None:
    rw = await runner_world()
    _, trigger = await _cron(rw, at, "0 9 * * *", timezone)
    assert trigger.next_fire_at == first
    assert (await rw.turn.storage.runners.get_trigger(ORG, trigger.id)).next_fire_at == first


async def test_the_time_zone_is_utc_unless_one_is_given() -> None:
    rw = await runner_world()
    _, trigger = await _cron(rw, utc(2026, 1, 15, 12), "0 9 * * *")
    assert trigger.timezone == "UTC"
    assert trigger.next_fire_at == utc(2026, 1, 16, 9)


async def test_a_schedule_keeps_its_local_hour_across_the_spring_change() -> None:
    """Paris moves to summer time on 29 March 2026: 09:00 is then 07:00 UTC."""
    rw = await runner_world()
    _, trigger = await _cron(rw, utc(2026, 3, 27, 12), "0 9 * * *", "Europe/Paris")
    assert await _ticks(rw, trigger.id, 3) == [
        utc(2026, 3, 28, 8),
        utc(2026, 3, 29, 7),
        utc(2026, 3, 30, 7),
    ]
    after = await rw.turn.storage.runners.get_trigger(ORG, trigger.id)
    assert (after.last_fired_at, after.next_fire_at) == (utc(2026, 3, 30, 7), utc(2026, 3, 31, 7))


async def test_a_schedule_keeps_its_local_hour_across_the_autumn_change() -> None:
    """Paris goes back to winter time on 25 October 2026: 09:00 is then 08:00 UTC."""
    rw = await runner_world()
    _, trigger = await _cron(rw, utc(2026, 10, 23, 12), "0 9 * * *", "Europe/Paris")
    assert await _ticks(rw, trigger.id, 3) == [
        utc(2026, 10, 24, 7),
        utc(2026, 10, 25, 8),
        utc(2026, 10, 26, 8),
    ]


async def test_a_tick_in_the_skipped_hour_runs_just_after_it_and_a_repeated_hour_once() -> None:
    """02:30 does not exist in Paris on 29 March 2026 (02:00 CET is 03:00 CEST), and
    happens twice on 25 October (CEST, then CET): docs/runners.md says what runs."""
    rw = await runner_world()
    _, spring = await _cron(rw, utc(2026, 3, 28, 12), "30 2 * * *", "Europe/Paris")
    # 03:00 CEST, the first moment after the gap; then 02:30 CEST again
    assert await _ticks(rw, spring.id, 2) == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]
    rw = await runner_world()
    _, autumn = await _cron(rw, utc(2026, 10, 24, 12), "30 2 * * *", "Europe/Paris")
    # 02:30 CEST (00:30 UTC) runs; 02:30 CET (01:30 UTC) an hour later does not
    assert await _ticks(rw, autumn.id, 2) == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


async def test_changing_the_time_zone_moves_the_next_tick() -> None:
    rw = await runner_world()
    runner, trigger = await _cron(rw, utc(2026, 1, 15, 12), "0 9 * * *")
    changed = await rw.runners.update_trigger(
        WHO, runner.id, trigger.id, TriggerChanges(timezone="Europe/Paris")
    )
    assert changed.next_fire_at == utc(2026, 1, 16, 8)


# --- enabled ----------------------------------------------------------------------


async def _token_trigger(
    rw: RunnerWorld, kind: str, enabled: bool = True
) -> tuple[Runner, Trigger, str]:
    runner = await rw.runner("condition")
    trigger, token = await rw.runners.add_trigger(
        WHO,
        runner.id,
        TriggerDraft(kind=kind, enabled=enabled),  # type: ignore[arg-type]
    )
    assert token is not None
    return runner, trigger, token


async def _runs_of(rw: RunnerWorld, runner: Runner) -> int:
    return len(await rw.turn.storage.runners.runs(ORG, runner_id=runner.id))


async def test_a_disabled_webhook_triggers_token_starts_no_run_until_enabled_again() -> None:
    rw = await runner_world()
    runner, trigger, token = await _token_trigger(rw, "webhook")
    run, created = await rw.runs.from_token(token, b'{"n": 1}', None, kinds=("webhook",))
    assert created
    assert (run.trigger_id, run.trigger_kind, run.input) == (trigger.id, "webhook", {"n": 1})
    await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=False))
    with pytest.raises(NotFound, match=r"^no such trigger$"):
        await rw.runs.from_token(token, b'{"n": 2}', None, kinds=("webhook",))
    assert await _runs_of(rw, runner) == 1
    assert len(rw.jobs.queued) == 1  # only the first run's job
    # enabled again, the same token starts runs again
    await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=True))
    _, created = await rw.runs.from_token(token, b'{"n": 3}', None, kinds=("webhook",))
    assert created
    assert await _runs_of(rw, runner) == 2


async def test_a_trigger_created_disabled_has_a_token_that_starts_nothing() -> None:
    rw = await runner_world()
    runner, _, token = await _token_trigger(rw, "webhook", enabled=False)
    with pytest.raises(NotFound):
        await rw.runs.from_token(token, b"", None, kinds=("webhook",))
    assert await _runs_of(rw, runner) == 0
    assert rw.jobs.queued == []


async def test_a_disabled_buttons_token_opens_neither_its_page_nor_a_run() -> None:
    rw = await runner_world()
    runner, trigger, token = await _token_trigger(rw, "button")
    assert (await rw.runners.button(runner.id, token)).id == runner.id
    await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=False))
    with pytest.raises(NotFound):
        await rw.runners.button(runner.id, token)
    with pytest.raises(NotFound):
        await rw.runs.from_token(token, b"", None, kinds=("button",))
    assert await _runs_of(rw, runner) == 0


async def test_a_disabled_cron_trigger_has_no_next_tick_and_fires_nothing() -> None:
    rw = await runner_world()
    runner, trigger = await _cron(rw, utc(2026, 1, 15, 12), "0 9 * * *", "Europe/Paris")
    off = await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=False))
    assert off.next_fire_at is None
    rw.turn.clock.at = utc(2026, 1, 16, 8)
    assert await rw.runs.fire_due() == []
    on = await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=True))
    assert on.next_fire_at == utc(2026, 1, 17, 8)
