"""The drain's cap (concurrent batches) as a provisioned mapping's pollers, and back: a table
of pure decisions (holdfast.core.pollers). One SQS event poller carries up to 10 concurrent
invokes (Lambda Developer Guide); the API takes at least 2 pollers."""

from __future__ import annotations

import pytest

from holdfast.core import pollers

# cap -> MaximumPollers: rounded down (never more batches than the cap), never below 2.
ROUNDING = [
    (1, 2), (2, 2), (5, 2), (19, 2), (20, 2), (21, 2), (29, 2),
    (30, 3), (34, 3), (39, 3), (40, 4), (99, 9), (100, 10), (101, 10),
    (999, 99), (1000, 100),
]


@pytest.mark.parametrize("cap, want", ROUNDING)
def test_a_cap_becomes_the_most_pollers_within_it_and_never_fewer_than_the_api_takes(cap, want):
    got = pollers.pollers_for(cap)
    assert got == want
    # Safe: never more batches than the cap, except where the API's least (2 pollers) carries more.
    assert pollers.cap_of(got) <= cap or got == pollers.LEAST_POLLERS
    # The most: one poller more would carry more than the cap.
    assert pollers.cap_of(got + 1) > cap


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, None, "10"])
def test_a_cap_that_is_no_whole_number_of_batches_is_refused(bad):
    with pytest.raises(ValueError, match="whole number of concurrent batches"):
        pollers.pollers_for(bad)


# (MaximumPollers shown, the cap the drain last wrote) -> the cap the drain reads back.
SHOWN = [
    (3, 34, 34),     # its own cap, rounded down to 3 pollers: read back as written
    (3, 30, 30),
    (3, 39, 39),
    (3, 40, 30),     # 40 would be 4 pollers: someone else's 3 (the owner, a clamp) reads as 30
    (2, 5, 5),       # the floor cap, held at the API's least
    (2, 25, 25),
    (50, 34, 500),   # the owner's 50 pollers while the drain wrote 34
    (2, None, 20),   # no cap written yet: the batches the pollers carry
    (200, None, 2000),
]


@pytest.mark.parametrize("shown, decided, want", SHOWN)
def test_pollers_read_back_as_the_drains_own_cap_only_when_they_are_its_pollers(shown, decided, want):
    assert pollers.shown_cap(shown, decided) == want


@pytest.mark.parametrize("raw, want", [
    ({"MinimumPollers": 10, "MaximumPollers": 50}, {"MinimumPollers": 10, "MaximumPollers": 50}),
    ({"MaximumPollers": 30}, {"MinimumPollers": 2, "MaximumPollers": 30}),
    ({"MinimumPollers": 5}, {"MinimumPollers": 5, "MaximumPollers": 200}),
])
def test_an_absent_field_is_its_documented_default(raw, want):
    assert pollers.provisioned(raw) and pollers.config(raw) == want


@pytest.mark.parametrize("raw", [None, {}, {"MinimumPollers": None, "MaximumPollers": None}])
def test_no_pollers_is_no_provisioned_mode(raw):
    assert not pollers.provisioned(raw)


@pytest.mark.parametrize("current, floor, want", [
    ({"MinimumPollers": 10, "MaximumPollers": 50}, 2, {"MaximumPollers": 2, "MinimumPollers": 2}),
    ({"MinimumPollers": 2, "MaximumPollers": 50}, 2, {"MaximumPollers": 2}),
    ({"MinimumPollers": 2, "MaximumPollers": 2}, 2, {}),
    ({"MinimumPollers": 3, "MaximumPollers": 4}, 5, {}),     # never raised
])
def test_an_engagement_lowers_the_maximum_and_a_minimum_above_it(current, floor, want):
    assert pollers.posture(current, floor) == want


@pytest.mark.parametrize("current, values, want", [
    ({"MinimumPollers": 10, "MaximumPollers": 50}, {"MaximumPollers": 2, "MinimumPollers": 2},
     {"MinimumPollers": 2, "MaximumPollers": 2}),
    ({"MinimumPollers": 2, "MaximumPollers": 2}, {"MaximumPollers": 7}, {"MinimumPollers": 2, "MaximumPollers": 7}),
    ({"MaximumPollers": 30}, {"MaximumPollers": 2}, {"MinimumPollers": 2, "MaximumPollers": 2}),
    # The minimum restored under an owner's lower maximum: brought down to it.
    ({"MinimumPollers": 2, "MaximumPollers": 8}, {"MinimumPollers": 10}, {"MinimumPollers": 8, "MaximumPollers": 8}),
])
def test_every_write_sends_both_fields_with_the_minimum_within_the_maximum(current, values, want):
    assert pollers.to_write(current, values) == want


@pytest.mark.parametrize("original, want", [
    ({"MaximumPollers": 5}, 50), ({"MaximumPollers": 99}, 990),
    ({"MaximumPollers": 100}, None), ({"MaximumPollers": 200}, None), ({}, None),
])
def test_the_owners_pollers_as_a_ceiling_for_the_drain(original, want):
    assert pollers.owner_cap(original, ceiling=1000) == want
