"""The engage walk's order as pure decisions (holdfast.core.order): a resource's place in
its kind (most harm first, ties by ARN, a string that sorts in that order), and the steps of
one service's lane (each kind's engage, then the deferred record tags, last)."""

from __future__ import annotations

import pytest

from holdfast.core.order import ENGAGE, HARM_CEILING, TAGS, Step, lane_steps, position

ESM = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:"

# (harm of each mapping by its UUID's last digit) -> the order the walk writes them in
ORDERS = [
    # uncapped (2 * 1001 + 1 enabled), a cap of 500 enabled, a cap of 500 disabled, a cap of 50
    ({"1": 2 * 50 + 1, "2": 2 * 1001 + 1, "3": 2 * 500, "4": 2 * 500 + 1}, ["2", "4", "3", "1"]),
    # equal harm: by ARN
    ({"9": 7, "5": 7, "7": 7}, ["5", "7", "9"]),
    # harm beyond the ceiling and below zero are clamped, never wrap around
    ({"1": HARM_CEILING * 5, "2": HARM_CEILING - 1, "3": -40, "4": 0}, ["1", "2", "3", "4"]),
    # a harm of 10 sorts after 9 and before 11 (fixed width, not text order of numbers)
    ({"1": 9, "2": 10, "3": 11, "4": 100}, ["4", "3", "2", "1"]),
]


@pytest.mark.parametrize("harms, written", ORDERS)
def test_positions_sort_most_harm_first_then_by_arn(harms, written):
    arns = {k: ESM + "0000000" + k for k in harms}
    ordered = sorted(harms, key=lambda k: position(harms[k], arns[k]))
    assert ordered == written


def test_a_position_is_fixed_width_and_ends_with_its_arn():
    assert position(2003, ESM + "a") == f"{HARM_CEILING - 2003:013d} {ESM}a"
    assert len(position(0, "x").split(" ")[0]) == len(position(HARM_CEILING - 1, "x").split(" ")[0]) == 13


LANES = [
    # Lambda's lane, mappings deferring their tags: both kinds engaged, then the mappings' tags
    (("esm", "async"), {"esm"}, [Step("esm", ENGAGE), Step("async", ENGAGE), Step("esm", TAGS)]),
    # nothing deferred (a dry run, or kinds that tag first): no tag step
    (("esm", "async"), set(), [Step("esm", ENGAGE), Step("async", ENGAGE)]),
    # a lane of one kind that tags first
    (("asg",), {"esm"}, [Step("asg", ENGAGE)]),
    # several kinds deferring: their tags in the lane's order, after every engage
    (("esm", "async"), {"async", "esm"},
     [Step("esm", ENGAGE), Step("async", ENGAGE), Step("esm", TAGS), Step("async", TAGS)]),
    ((), {"esm"}, []),
]


@pytest.mark.parametrize("kinds, defers, steps", LANES)
def test_a_lanes_deferred_tags_come_after_every_engage_of_the_lane(kinds, defers, steps):
    assert lane_steps(kinds, defers) == steps
