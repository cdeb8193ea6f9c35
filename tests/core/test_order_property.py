"""Property: the verdict never depends on the order in which one tick's signals arrive."""

from datetime import timedelta

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from holdfast.core.detector import IMPAIRED, NORMAL, RECOVERING, Verdict, evaluate
from tests.support.factory import SETTINGS, capacity, config, health, launched, probe, signal, utc

NOW = utc(2025, 10, 20, 7, 0)
GROUPS = ["web", "api", "batch", "etl"]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]


@st.composite
def a_signal(draw):
    at = NOW - timedelta(seconds=draw(st.integers(0, 40 * 60)))
    g, z = draw(st.sampled_from(GROUPS)), draw(st.sampled_from(ZONES))
    kind = draw(st.sampled_from(["capacity", "config", "launch", "probe", "health"]))
    if kind == "capacity":
        return capacity(g, z, at)
    if kind == "config":
        return config(g, z, at)
    if kind == "launch":
        return launched(g, z, at)
    if kind == "probe":
        return probe(draw(st.sampled_from(["dns:a.example", "api:ec2"])), draw(st.booleans()), at)
    status = draw(st.sampled_from(["open", "closed"]))
    return signal(health(status, at, communication=draw(st.sampled_from(["c1", "c2"])), delivered_in=draw(st.sampled_from(["us-east-1", "us-west-2"]))))


previous_verdicts = st.one_of(
    st.none(),
    st.builds(
        Verdict,
        state=st.sampled_from([NORMAL, IMPAIRED, RECOVERING]),
        since=st.just(NOW - timedelta(minutes=45)),
        reasons=st.just(()),
        last_capacity_failure=st.none(),
        last_successful_launch=st.none(),
    ),
)


@hsettings(max_examples=150, deadline=None)
@given(signals=st.lists(a_signal(), max_size=25), previous=previous_verdicts, data=st.data())
def test_verdict_is_independent_of_arrival_order(signals, previous, data):
    shuffled = data.draw(st.permutations(signals))
    assert evaluate(shuffled, previous, SETTINGS, NOW) == evaluate(signals, previous, SETTINGS, NOW)
