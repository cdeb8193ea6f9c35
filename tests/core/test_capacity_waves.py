"""The capacity stage's wave decision (holdfast.core.capacity.decide), pure: a table of
groups and records in, the step out."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from holdfast.core import capacity
from holdfast.core.capacity import Group, Wave, Waves
from holdfast.settings import Settings

NOW = datetime(2025, 10, 20, 21, 0, tzinfo=timezone.utc)
S = Settings.from_mapping({"capacity_wave_groups_percent": 50, "capacity_wave_instances_percent": 50,
                           "capacity_wave_minutes": 5})


def g(name, *, held=True, marked=(), healthy=(), failed_at=None):
    return Group(f"arn:{name}", name, held, tuple(marked), tuple(healthy), failed_at)


def test_a_wave_takes_the_fewest_to_replace_first_within_both_shares_and_resets_what_is_healthy_now():
    groups = [g("a", marked=("i-1", "i-2", "i-3")), g("b", marked=("i-4",), healthy=("i-4",)),
              g("c", marked=("i-5", "i-6")), g("d")]
    step = capacity.decide(groups, None, NOW, S, generation=7)
    # 5 left to replace in all (a 3, c 2): 50 % is 2; 50 % of 4 groups is 2: d (0) and b (0 after its reset)
    assert step.resume == ("arn:b", "arn:d") and step.write
    assert step.resets == {"arn:b": ("i-4",)}
    assert (step.wave.number, step.wave.marked, step.wave.reset, step.wave.to_replace) == (1, 1, 1, 0)


def test_a_wave_always_takes_one_group_even_past_the_instance_share():
    step = capacity.decide([g("a", marked=("i-1", "i-2")), g("b", marked=("i-3", "i-4", "i-5"))], None, NOW, S,
                           generation=1)
    assert step.resume == ("arn:a",)


def test_the_health_of_marked_instances_is_read_before_a_wave_is_chosen():
    step = capacity.decide([Group("arn:a", "a", True, ("i-1",), None)], None, NOW, S, generation=1)
    assert step.read_health == ("arn:a",) and not step.resume and not step.write


def test_the_next_wave_waits_the_hold_and_a_recorded_wave_not_carried_out_is_finished_first():
    record = Waves(1, 4, (Wave(1, NOW - timedelta(minutes=2), ("arn:a",), 0, 0, 0),))
    waiting = capacity.decide([g("a", held=False), g("b"), g("c")], record, NOW, S, generation=1)
    assert waiting.waiting.startswith("next wave in 3.0 min") and not waiting.resume
    unfinished = capacity.decide([g("a"), g("b"), g("c")], record, NOW, S, generation=1)
    assert unfinished.resume == ("arn:a",) and not unfinished.write
    later = capacity.decide([g("a", held=False), g("b"), g("c")], record, NOW + timedelta(minutes=3), S, generation=1)
    assert later.resume == ("arn:b", "arn:c") and later.wave.number == 2   # 50 % of the 4 groups


def test_a_resumed_group_whose_launches_fail_steps_back_and_the_next_wave_takes_one_group_after_a_hold():
    record = Waves(1, 4, (Wave(1, NOW - timedelta(minutes=10), ("arn:a", "arn:b"), 0, 0, 0),))
    failed = NOW - timedelta(minutes=1)
    groups = [g("a", held=False, failed_at=failed), g("b", held=False), g("c"), g("d")]
    step = capacity.decide(groups, record, NOW, S, generation=1)
    assert step.step_back == ("arn:a",) and step.write and not step.resume
    assert step.record.stepped_back == {"arn:a": failed}
    # held again: no wave for 5 minutes after the failure, then one group, not the share of two
    held_again = [g("a", failed_at=failed), g("b", held=False), g("c"), g("d")]
    assert capacity.decide(held_again, step.record, NOW + timedelta(minutes=3), S, generation=1).waiting
    after = capacity.decide(held_again, step.record, NOW + timedelta(minutes=5), S, generation=1)
    assert len(after.resume) == 1 and after.wave.number == 2


def test_a_group_whose_own_launches_fail_waits_and_a_stuck_group_holds_nothing_back():
    groups = [g("a", failed_at=NOW - timedelta(minutes=1))]
    assert "launch failures" in capacity.decide(groups, None, NOW, S, generation=1).waiting
    assert capacity.decide([g("a")], None, NOW, S, generation=1, stuck=frozenset({"arn:a"})).finished
    assert capacity.decide([g("a", held=False)], None, NOW, S, generation=1).finished


def test_the_record_reads_back_as_written():
    record = Waves(3, 5, (Wave(1, NOW, ("arn:a",), 2, 1, 1),), {"arn:a": NOW})
    assert Waves.from_dict(record.to_dict()) == record
    assert record.totals() == {"waves": 1, "groups": 1, "marked": 2, "reset": 1, "to_replace": 1, "stepped_back": 1}
