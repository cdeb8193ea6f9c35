"""The engage walk's order as pure decisions (holdfast.core.order): a resource's place in
its kind (most harm first, ties by ARN, a string that sorts in that order), and the steps of
one service's lane (each kind's engage, then the deferred record tags, last)."""

from __future__ import annotations

import pytest

from holdfast.core.order import ENGAGE, HARM_CEILING, TAGS, Step, lane_steps, per_call, position

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


@pytest.mark.parametrize("harm, calls, most, expected", [
    (2003, 1, 1, 2003),     # a kind whose resources all cost one call keeps its harm
    (2003, 1, 2, 4006),     # a mapping its function's tag selects: its cap is the one call
    (2003, 2, 2, 2003),     # one only its own tag selects: ListTags, then the cap
    (1001, 2, 2, 1001),
    (0, 1, 2, 0),
    (7, 5, 2, 7),           # calls are clamped to 1..most
    (7, 0, 2, 14),
])
def test_harm_per_call_before_the_change(harm, calls, most, expected):
    assert per_call(harm, calls, most) == expected


def test_an_uncapped_mapping_needing_two_calls_comes_after_a_capped_one_needing_one_of_more_harm_per_call():
    """Smith's rule: 2003 harm over two calls (1001.5 a call) after 1003 over one, before 999 over one."""
    ranked = sorted([("own-uncapped", per_call(2003, 2, 2)), ("fn-cap-501", per_call(1003, 1, 2)),
                     ("fn-cap-499", per_call(999, 1, 2))], key=lambda x: position(x[1], x[0]))
    assert [name for name, _ in ranked] == ["fn-cap-501", "own-uncapped", "fn-cap-499"]


def test_a_resource_the_walk_does_not_expect_to_change_comes_after_every_one_that_may():
    """A mapping the Tagging API's index does not list while it lists others (actuators.esm):
    0 whatever its harm, so an uncapped one comes after an indexed cap of 2; among such, by ARN."""
    assert per_call(2003, 2, 2, likely=False) == per_call(0, 1, 2, likely=False) == 0
    ranked = sorted([("b-unlisted-uncapped", per_call(2003, 2, 2, likely=False)), ("z-indexed-cap-2", per_call(5, 1, 2)),
                     ("a-unlisted-cap-500", per_call(1001, 2, 2, likely=False))], key=lambda x: position(x[1], x[0]))
    assert [name for name, _ in ranked] == ["z-indexed-cap-2", "a-unlisted-cap-500", "b-unlisted-uncapped"]
