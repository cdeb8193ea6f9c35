"""Progress lines when stderr is not a terminal: at most one every N seconds, each kind's
last step always, and an estimate of the time left from the rate so far (a fake clock)."""

from __future__ import annotations

import io
from datetime import datetime, timezone

from holdfast.cli.progress import Progress, duration
from holdfast.clock import FakeClock


def test_a_line_at_most_every_interval_with_an_estimate_and_each_kind_done():
    clock, out = FakeClock(datetime(2026, 1, 1, tzinfo=timezone.utc)), io.StringIO()
    progress = Progress(out, 30, clock)
    progress.step("list asg")                       # the first line: nothing printed before it
    for done in range(1, 121):
        clock.advance(3)                            # 3 s a group
        progress.step(f"engage asg: {done}/120")
    lines = out.getvalue().splitlines()
    # the first line, then 360 s of steps at one line per 30 s (the last step, the kind's
    # 120th, falls on a 30 s mark: one line, not two)
    assert len(lines) == 1 + 12, lines
    assert lines[0] == "holdfast: progress: list asg (0 s elapsed)"
    assert lines[1] == "holdfast: progress: engage asg: 10/120 (30 s elapsed, about 5 min 30 s left for asg)"
    assert lines[-1] == "holdfast: progress: engage asg: 120/120 (6 min elapsed, asg done)"


def test_the_last_step_of_a_kind_is_printed_even_between_intervals():
    clock, out = FakeClock(datetime(2026, 1, 1, tzinfo=timezone.utc)), io.StringIO()
    progress = Progress(out, 30, clock)
    progress.step("engage nlb: 1/2")
    clock.advance(1)
    progress.step("engage nlb: 2/2")
    progress.step("")                               # a terminal's "clear the line": nothing
    assert out.getvalue().splitlines() == [
        "holdfast: progress: engage nlb: 1/2 (0 s elapsed, about 0 s left for nlb)",
        "holdfast: progress: engage nlb: 2/2 (1 s elapsed, nlb done)",
    ]


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (0, 42, 60, 185, 3600, 4200)] == ["0 s", "42 s", "1 min", "3 min 5 s", "1 h", "1 h 10 min"]
