"""The pure restore decision, table-driven, and the write-ahead tag codec's round trip."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holdfast.core import restore, tags
from holdfast.core.restore import KEEP_DRIFT, NOTHING, WRITE


@pytest.mark.parametrize(
    "original, applied, current, expected",
    [
        (None, 2, 2, WRITE),            # our cap is still there: remove it
        (None, 2, None, NOTHING),       # already as the owner had it
        (None, 2, 7, KEEP_DRIFT),       # the owner set their own cap while engaged
        (50, [2, 5], 5, WRITE),         # a raise in flight: either cap is Holdfast's
        (50, [2, 5], 2, WRITE),
        (50, [2, 5], 50, NOTHING),
        (False, True, True, WRITE),     # a process Holdfast suspended
        (False, True, False, NOTHING),  # the owner resumed it already
        ("1", "off", "3", KEEP_DRIFT),
        (2, 2, 2, NOTHING),             # original equals applied: nothing to tell apart, nothing to do
    ],
)
def test_decide_key(original, applied, current, expected):
    assert restore.decide_key(original, applied, current) == expected


def test_decide_writes_and_drift():
    decisions = restore.decide({"a": 1, "b": None, "c": "x"}, {"a": 2, "b": 5, "c": "y"}, {"a": 2, "b": 9, "c": "x"})
    assert restore.writes(decisions) == {"a": 1}
    assert restore.drift(decisions) == {"b": {"original": None, "applied": 5, "current": 9}}


scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12)
records = st.dictionaries(st.text(string.ascii_letters + string.digits + "_", min_size=1, max_size=8),
                          scalars | st.lists(scalars, max_size=3), max_size=4)


# The first draw can be slow on a loaded CI box; the property itself is cheap.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_codec_round_trips_within_the_tag_charset(values):
    try:
        text = tags.encode(values)
    except tags.TagError:
        return  # too long for one tag: the actuator refuses to change the resource
    assert set(text) <= tags.ALLOWED and len(text) <= tags.MAX_VALUE
    assert tags.decode(text) == values


def test_codec_keeps_arns_readable_and_rejects_what_it_cannot_hold():
    arn = "arn:aws:sqs:us-east-1:123456789012:owner-dlq"
    assert tags.encode({"on_failure": arn, "max_age": None}) == f"on_failure=s{arn} max_age=n"
    with pytest.raises(tags.TagError):
        tags.encode({"k": "x" * 300})
    with pytest.raises(tags.TagError):
        tags.decode("k=q1")
