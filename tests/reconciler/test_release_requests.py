"""Release requests: `holdfast release ARN --all-accounts` writes CONTROL/RELEASE#<arn>
through the org operator role, which may write only control items, and the reconciler's
next tick acts on it once with its own role (holdfast.core.release, reconciler.release).

The request is written with the operator role's policy evaluated on every DynamoDB call
(the `operator_dynamodb` client of tests/iam/test_operator_role.py: holdfast_fixtures.iam_policy
with DynamoDB's `dynamodb:LeadingKeys`). The ticks are the harness's (a scripted verdict,
in-memory resources for the walks); the released resources are real moto resources,
restored by the real engine, as `holdfast release` restores them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from holdfast.core import release as release_requests
from holdfast.engine import Engine
from holdfast.ledger import Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.resources import ResourceLedger
from holdfast.runtime import Runtime
from tests.iam.test_operator_role import operator_dynamodb  # noqa: F401  (a fixture)
from tests.support.fleet import aws_semantics, describe_asg, make_asg  # noqa: F401  (a fixture)
from tests.support.harness import SETTINGS, Harness

ACCOUNT = "123456789012"


@pytest.fixture
def engaged(aws_semantics, harness):
    """Two Auto Scaling groups engaged by Holdfast (ReplaceUnhealthy and AZRebalance suspended), `web` with
    `HealthCheck` suspended by its owner before: name -> ARN."""
    arns = {"web": make_asg(harness.observer, "web", suspended=("HealthCheck",)), "api": make_asg(harness.observer, "api")}
    report = Engine(harness.runtime("cli")).engage(kinds=("asg",))
    assert {o.arn for o in report.outcomes if o.action == "engaged"} == set(arns.values())
    return arns


def suspended(harness, name: str) -> set[str]:
    return {p["ProcessName"] for p in describe_asg(harness.observer, name)["SuspendedProcesses"]}


def request(operator_dynamodb, harness, arn: str, *, by: str = "oncall", request_id: str = "r1"):
    return ledger_control.request_release(Ledger(operator_dynamodb, harness.table), arn, by=by, reason="drill",
                                          now=harness.clock.now(), request_id=request_id)


def releases(harness) -> dict[str, release_requests.ReleaseRequest]:
    return {r.arn: r for r in ledger_control.read_control(Ledger(harness.observer("dynamodb"), harness.table)).releases}


def test_a_request_written_by_the_operator_role_is_acted_on_once(engaged, harness, operator_dynamodb):
    web = engaged["web"]
    (asked, written) = request(operator_dynamodb, harness, web)
    assert written and asked.state == release_requests.REQUESTED and operator_dynamodb.denied == []
    # The role wrote a control item only: the group is untouched until the reconciler acts.
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}

    result = harness.tick("A")

    assert "release:restored" in result.actions
    assert suspended(harness, "web") == {"HealthCheck"}              # the owner's suspension kept
    assert suspended(harness, "api") == {"ReplaceUnhealthy", "AZRebalance"}   # only the named resource
    assert ResourceLedger(Ledger(harness.observer("dynamodb"), harness.table)).get(web) is None
    done = releases(harness)[web]
    assert (done.state, done.outcome, done.controller) == ("done", "restored", "A")
    assert "restored to its owner's settings" in done.detail and done.by == "oncall"

    # The next ticks leave the done request alone: nothing is released again.
    harness.clock.advance(60)
    assert not any(a.startswith("release:") for a in harness.tick("B").actions)
    assert releases(harness)[web] == done


def test_a_duplicate_request_while_one_is_pending_writes_nothing_and_one_release_happens(engaged, harness,
                                                                                         operator_dynamodb):
    web = engaged["web"]
    first, written = request(operator_dynamodb, harness, web, by="alice", request_id="r1")
    again, rewritten = request(operator_dynamodb, harness, web, by="bob", request_id="r2")
    assert written and not rewritten
    assert (again.id, again.by) == ("r1", "alice")                   # the pending request, as it was
    assert operator_dynamodb.denied == []

    result = harness.tick("A")
    assert [a for a in result.actions if a.startswith("release:")] == ["release:restored"]

    # Once done, a new request is a new request: acted on again, and refused, since
    # nothing is recorded any more (nothing is written to the group).
    _, written = request(operator_dynamodb, harness, web, by="bob", request_id="r3")
    assert written
    before = describe_asg(harness.observer, "web")
    harness.clock.advance(60)
    assert "release:refused" in harness.tick("A").actions
    assert describe_asg(harness.observer, "web") == before
    done = releases(harness)[web]
    assert (done.id, done.outcome) == ("r3", "refused")
    assert done.detail == f"{web} is not engaged and Holdfast holds no record of it; nothing to release"


def test_two_ticks_at_once_one_claims_the_request(engaged, harness, operator_dynamodb):
    web = engaged["web"]
    asked, _ = request(operator_dynamodb, harness, web)
    dynamodb, now = harness.observer("dynamodb"), harness.clock.now()
    until = now + timedelta(minutes=4)
    assert ledger_control.claim_release(Ledger(dynamodb, harness.table), asked, controller_id="A", now=now, until=until)
    assert not ledger_control.claim_release(Ledger(dynamodb, harness.table), asked, controller_id="B", now=now, until=until)
    # A's tick died holding it: after its claim ran out, a tick takes it over and acts.
    assert not any(a.startswith("release:") for a in harness.tick("B").actions)
    harness.clock.advance(5 * 60)
    assert "release:restored" in harness.tick("B").actions
    assert releases(harness)[web].controller == "B"


def test_a_request_for_an_unrecorded_a_foreign_or_a_non_resource_arn_is_refused_with_why(engaged, harness,
                                                                                       operator_dynamodb):
    stranger = make_asg(harness.observer, "stranger")                 # selected, never engaged
    parts = engaged["api"].split(":")
    other_account = ":".join(parts[:4] + ["210987654321"] + parts[5:])
    other_region = ":".join(parts[:3] + ["eu-west-1"] + parts[4:])
    not_ours = f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders"
    for i, arn in enumerate((stranger, other_account, other_region, not_ours)):
        request(operator_dynamodb, harness, arn, request_id=f"r{i}")
    before = {name: describe_asg(harness.observer, name) for name in ("stranger", "api", "web")}

    result = harness.tick("A")

    assert [a for a in result.actions if a.startswith("release:")] == ["release:refused"] * 4
    assert {name: describe_asg(harness.observer, name) for name in before} == before   # nothing written
    done = releases(harness)
    assert all(done[a].state == "done" and done[a].outcome == "refused" for a in done)
    assert done[stranger].detail == f"{stranger} is not engaged and Holdfast holds no record of it; nothing to release"
    assert done[other_account].detail == (f"{other_account} is in account 210987654321 (this reconciler acts in "
                                          f"{ACCOUNT}); nothing was done")
    assert "region eu-west-1 (this reconciler acts in us-east-1)" in done[other_region].detail
    assert "is not a resource kind Holdfast manages" in done[not_ours].detail


def test_in_recommend_mode_a_request_is_refused_and_writes_nothing(engaged, clients, ledger_table, operator_dynamodb):
    h = Harness(clients, ledger_table, settings=replace(SETTINGS, mode="recommend"))
    web = engaged["web"]
    request(operator_dynamodb, h, web)
    h.tick("A")
    done = releases(h)[web]
    assert done.outcome == "refused" and "mode recommend" in done.detail
    assert suspended(h, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}


def test_paused_waits_and_a_request_past_its_day_expires_unacted(engaged, harness, operator_dynamodb):
    web = engaged["web"]
    ledger_control.set_paused(Ledger(operator_dynamodb, harness.table), True, by="oncall", reason="x", now=harness.clock.now())
    request(operator_dynamodb, harness, web)
    assert harness.tick("A").actions == ["paused"]
    assert releases(harness)[web].state == "requested"
    harness.clock.advance(25 * 3600)
    ledger_control.set_paused(Ledger(operator_dynamodb, harness.table), False, by="oncall", reason="", now=harness.clock.now())
    assert "release:expired" in harness.tick("A").actions
    assert releases(harness)[web].outcome == "expired"
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}


def test_the_operator_role_cannot_mark_a_request_done_itself(engaged, harness, operator_dynamodb):
    asked, _ = request(operator_dynamodb, harness, engaged["web"])
    with pytest.raises(Exception):
        ledger_control.finish_release(Ledger(operator_dynamodb, harness.table), asked, outcome="restored", detail="x",
                                      controller_id="op", now=harness.clock.now(), claimed=False)
    assert operator_dynamodb.denied == ["dynamodb:UpdateItem ['CONTROL']"]


def test_a_recorded_resource_that_is_gone_is_forgotten_and_says_so(engaged, harness, operator_dynamodb):
    api = engaged["api"]
    harness.observer("autoscaling").delete_auto_scaling_group(AutoScalingGroupName="api", ForceDelete=True)
    request(operator_dynamodb, harness, api)
    assert "release:vanished" in harness.tick("A").actions
    done = releases(harness)[api]
    assert (done.outcome, done.detail) == ("vanished", "the resource no longer exists; its record is forgotten")
    assert ResourceLedger(Ledger(harness.observer("dynamodb"), harness.table)).get(api) is None


def test_status_shows_each_request_and_its_outcome(engaged, harness, operator_dynamodb, capsys):
    import json

    from holdfast.cli import main

    web = engaged["web"]
    request(operator_dynamodb, harness, web)
    assert main(["--region", "us-east-1", "status"]) == 0
    assert f"release of {web} requested by oncall at {harness.clock.now().isoformat()}: requested" in capsys.readouterr().out
    harness.tick("A")
    capsys.readouterr()   # the tick's log lines
    assert main(["--json", "--region", "us-east-1", "status"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["release_requests"]
    assert (shown["arn"], shown["state"], shown["outcome"], shown["by"]) == (web, "done", "restored", "oncall")


def put_request_item(operator_dynamodb, harness, arn: str, **attributes) -> None:
    """What the operator role may write in CONTROL by hand: any item, any attribute types."""
    item = {"pk": {"S": "CONTROL"}, "sk": {"S": f"RELEASE#{arn}"}, "arn": {"S": arn}, "request": {"S": "hand"},
            "by": {"S": "oncall"}, "reason": {"S": "by hand"}, "at": {"S": harness.clock.now().isoformat()},
            "state": {"S": "requested"}, "expires_at": {"N": str(int(harness.clock.now().timestamp()) + 3600)}}
    item = {name: value for name, value in {**item, **attributes}.items() if value is not None}   # None: left out
    operator_dynamodb.put_item(TableName=harness.table, Item=item)
    assert operator_dynamodb.denied == []


def test_a_malformed_request_is_refused_with_why_and_the_ticks_go_on(engaged, harness, operator_dynamodb, capsys):
    from holdfast.cli import main

    web, api = engaged["web"], engaged["api"]
    put_request_item(operator_dynamodb, harness, web, expires_at={"N": "1893456000.5"})
    put_request_item(operator_dynamodb, harness, api, request={"S": "hand2"}, state={"S": "sideways"})
    ledger_control.set_paused(Ledger(operator_dynamodb, harness.table), True, by="oncall", reason="drill", now=harness.clock.now())

    # The other control items are read as before: the kill switch holds the tick.
    assert harness.tick("A").actions == ["paused"]
    assert main(["--region", "us-east-1", "status"]) == 0
    shown = capsys.readouterr().out
    assert f"release of {web} requested by oncall" in shown and "1893456000.5" in shown
    ledger_control.set_paused(Ledger(operator_dynamodb, harness.table), False, by="oncall", reason="", now=harness.clock.now())

    # The tick detects and engages as ever, and refuses each malformed request, saying why.
    harness.script.set("impaired", harness.clock.now())
    result = harness.tick("A")
    assert result.stage == "hold" and any(o.action == "engaged" for o in result.outcomes)
    assert sorted(a for a in result.actions if a.startswith("release:")) == ["release:refused"] * 2
    done = releases(harness)
    assert (done[web].state, done[web].outcome) == ("done", "refused")
    assert "expires_at 1893456000.5 is not whole epoch seconds" in done[web].detail
    assert "state 'sideways'" in done[api].detail
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}   # nothing released

    # Refused, the request is done: a new request replaces it and is acted on.
    harness.clock.advance(60)
    _, written = request(operator_dynamodb, harness, api, request_id="r9")
    assert written
    assert main(["--region", "us-east-1", "status"]) == 0
    assert "expires_at 1893456000.5 is not whole epoch seconds" in capsys.readouterr().out


def test_a_takeover_that_finds_the_resource_restored_says_an_earlier_attempt_restored_it(engaged, harness,
                                                                                          operator_dynamodb):
    web = engaged["web"]
    asked, _ = request(operator_dynamodb, harness, web)
    now = harness.clock.now()
    assert ledger_control.claim_release(Ledger(harness.observer("dynamodb"), harness.table), asked, controller_id="A",
                                        now=now, until=now + timedelta(minutes=4))
    # A's tick restored the group, then stopped before recording the outcome.
    assert Engine(harness.runtime("A")).release(web).action == "restored"
    harness.clock.advance(5 * 60)
    assert "release:restored-unconfirmed" in harness.tick("B").actions
    done = releases(harness)[web]
    assert (done.state, done.outcome, done.controller) == ("done", "restored-unconfirmed", "B")
    assert done.detail.startswith("restored by an earlier attempt (unconfirmed)")


def test_a_claimed_request_is_not_expired_while_its_claim_runs(engaged, harness, operator_dynamodb):
    web = engaged["web"]
    asked, _ = request(operator_dynamodb, harness, web)
    harness.clock.advance(24 * 3600 - 60)
    now, dynamodb = harness.clock.now(), harness.observer("dynamodb")
    assert ledger_control.claim_release(Ledger(dynamodb, harness.table), asked, controller_id="A", now=now,
                                        until=now + timedelta(minutes=4))
    harness.clock.advance(120)      # past the request's day, within A's claim
    assert not any(a.startswith("release:") for a in harness.tick("B").actions)
    assert (releases(harness)[web].state, releases(harness)[web].controller) == ("acting", "A")
    # A tick that read the request before A claimed it cannot mark it expired either.
    assert not ledger_control.finish_release(Ledger(dynamodb, harness.table), asked, outcome="expired", detail="x",
                                             controller_id="B", now=harness.clock.now(), claimed=False)
    # A records its outcome as its claim allows.
    assert ledger_control.finish_release(Ledger(dynamodb, harness.table), asked, outcome="restored", detail="x",
                                         controller_id="A", now=harness.clock.now())


def test_a_request_asked_before_the_hold_began_is_refused(engaged, harness, operator_dynamodb):
    web = engaged["web"]
    harness.tick("A")                        # normal: nothing engaged by the plan
    asked, _ = request(operator_dynamodb, harness, web)
    harness.clock.advance(60)
    harness.script.set("impaired", harness.clock.now())
    result = harness.tick("A")               # the new hold begins, then the request is looked at
    assert result.stage == "hold" and "release:refused" in result.actions
    done = releases(harness)[web]
    began = harness.plan().impaired_at.isoformat()
    assert done.seen_at == began        # first read by the tick that began the hold, on its clock
    assert done.detail == (f"asked at {asked.at} (first read by a tick at {began}), before this hold began at "
                           f"{began}: the hold may have engaged {web} since; nothing was done; ask again to release "
                           "it from this hold")
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}
    # Asked again during the hold, it is acted on.
    harness.clock.advance(60)
    request(operator_dynamodb, harness, web, request_id="r2")
    assert "release:restored" in harness.tick("A").actions
    assert suspended(harness, "web") == {"HealthCheck"}


def test_each_claim_runs_from_its_own_start_and_none_is_taken_once_the_tick_is_out_of_time(engaged, harness,
                                                                                         operator_dynamodb):
    arns = {**engaged, "db": make_asg(harness.observer, "db")}
    Engine(harness.runtime("cli")).engage(kinds=("asg",))
    for i, arn in enumerate(arns.values()):
        request(operator_dynamodb, harness, arn, request_id=f"r{i}")
    claims: list[tuple[str, int, int]] = []   # (ARN, claim_until, epoch now) as each restore starts

    def slow_restore(params, **_):
        """Each group's restore takes 30 s of the tick's 45 (the clock is the harness's)."""
        now = int(harness.clock.now().timestamp())
        claims.extend((r.arn, r.claim_until, now) for r in releases(harness).values() if r.state == "acting")
        harness.clock.advance(30)

    harness.observer("autoscaling").meta.events.register("before-call.autoscaling.ResumeProcesses", slow_restore)
    first = harness.tick("A")

    # Two restores fit in the tick: each claimed and acted on while its claim runs; the
    # third waits, unclaimed, for the next tick rather than being claimed already expired.
    assert [a for a in first.actions if a.startswith("release:")] == ["release:restored"] * 2
    assert len(claims) == 2 and all(until > now for _, until, now in claims), claims
    waiting = [r for r in releases(harness).values() if r.state == "requested"]
    assert len(waiting) == 1
    harness.clock.advance(60)
    assert [a for a in harness.tick("B").actions if a.startswith("release:")] == ["release:restored"]
    assert all(r.outcome == "restored" for r in releases(harness).values())
    assert claims[-1][0] == waiting[0].arn and claims[-1][1] > claims[-1][2]


def test_control_items_written_by_hand_in_the_wrong_shape_are_named_and_the_ticks_go_on(engaged, harness,
                                                                                       operator_dynamodb, capsys):
    import json

    from holdfast.cli import main

    for sk, attributes in (("ENGAGE", {"generation": {"N": "0.5"}, "by": {"N": "7"}}),
                           ("PAUSE", {"paused": {"S": "false"}, "by": {"S": "oncall"}})):
        operator_dynamodb.put_item(TableName=harness.table, Item={"pk": {"S": "CONTROL"}, "sk": {"S": sk}, **attributes})
    assert operator_dynamodb.denied == []

    harness.script.set("impaired", harness.clock.now())
    assert harness.tick("A").stage == "hold"       # detected and engaged as ever
    capsys.readouterr()   # the tick's log lines
    assert main(["--json", "--region", "us-east-1", "status"]) == 0
    problems = json.loads(capsys.readouterr().out)["control_problems"]
    assert sorted(problems) == ["ENGAGE: by {'N': '7'} is not a string; read as absent",
                                "ENGAGE: generation {'N': '0.5'} is not a whole number; the request is not acted on "
                        "(write it again with the CLI)",
                        "PAUSE: paused {'S': 'false'} is not a boolean; read as not paused (`holdfast pause` writes it)"]


def test_the_control_items_are_read_past_a_page(engaged, harness, operator_dynamodb):
    for i in range(5):
        put_request_item(operator_dynamodb, harness, f"{engaged['web']}-{i}", request={"S": f"p{i}"})
    dynamodb = harness.observer("dynamodb")

    def two_a_page(params, **_):
        params["Limit"] = 2        # as DynamoDB cuts a page at 1 MB

    dynamodb.meta.events.register("before-parameter-build.dynamodb.Query", two_a_page)
    try:
        assert len(ledger_control.read_control(Ledger(dynamodb, harness.table)).releases) == 5
    finally:
        dynamodb.meta.events.unregister("before-parameter-build.dynamodb.Query", two_a_page)


def test_a_request_item_with_no_request_id_or_one_of_another_type_is_refused(engaged, harness, operator_dynamodb):
    web, api = engaged["web"], engaged["api"]
    put_request_item(operator_dynamodb, harness, web, request={"N": "5"})
    put_request_item(operator_dynamodb, harness, api, request=None)
    result = harness.tick("A")
    assert sorted(a for a in result.actions if a.startswith("release:")) == ["release:refused"] * 2
    done = releases(harness)
    assert "request {'N': '5'} is not a string" in done[web].detail
    assert "it has no request id" in done[api].detail
    assert all(r.state == "done" and r.expires == int(harness.clock.now().timestamp()) + 86400 for r in done.values())
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}


def test_the_engagement_in_force_began_at_the_latest_hold_or_a_later_step_back():
    from datetime import datetime, timezone

    from holdfast.core import policy

    t = lambda minute: datetime(2025, 10, 20, 7, minute, tzinfo=timezone.utc)
    asked = release_requests.ReleaseRequest(arn="arn:x", id="r", at=t(10).isoformat())
    held = policy.Plan(generation=2, stage=policy.HOLD, entered_at=t(5), impaired_at=t(5))
    draining = policy.Plan(generation=3, stage=policy.DRAIN, entered_at=t(20), impaired_at=t(5))
    stepped_back = policy.Plan(generation=4, stage=policy.HOLD, entered_at=t(30), impaired_at=t(5), stepped_back=True)
    assert [release_requests.engagement_began(p) for p in (None, policy.Plan(), held, draining, stepped_back)] == \
        [None, None, t(5), t(5), t(30)]
    assert release_requests.stale(asked, t(5), t(10)) is None          # first read during the hold
    assert release_requests.stale(asked, t(30), t(10)).startswith(
        f"asked at {t(10).isoformat()} (first read by a tick at {t(10).isoformat()}), before this hold began at "
        f"{t(30).isoformat()}")
    # The operator's clock says nothing: only when a tick first read it (seen_at), on the plan's clock.
    ahead = replace(asked, at=t(45).isoformat(), seen_at=t(10).isoformat())
    assert release_requests.stale(ahead, t(30), t(50)) is not None
    assert release_requests.stale(replace(asked, at=t(1).isoformat()), t(5), t(10)) is None
    assert release_requests.stale(asked, t(10), t(10)) is not None     # read by the tick that began the hold


def test_a_claimed_request_past_its_day_expires_once_its_claim_has_run_out_and_says_it_was_claimed(engaged, harness,
                                                                                                 operator_dynamodb):
    web = engaged["web"]
    asked, _ = request(operator_dynamodb, harness, web)
    harness.clock.advance(24 * 3600 - 60)
    now = harness.clock.now()
    assert ledger_control.claim_release(Ledger(harness.observer("dynamodb"), harness.table), asked, controller_id="A",
                                        now=now, until=now + timedelta(minutes=4))
    harness.clock.advance(5 * 60)
    assert "release:expired" in harness.tick("B").actions
    done = releases(harness)[web]
    assert (done.outcome, done.controller) == ("expired", "B")
    assert "claimed by A, whose tick stopped before recording an outcome" in done.detail
    assert "may or may not have been restored" in done.detail


def test_a_request_acted_on_during_a_hold_leaves_the_resource_released_for_the_rest_of_it(engaged, harness,
                                                                                        operator_dynamodb):
    web = engaged["web"]
    harness.script.set("impaired", harness.clock.now())   # a hold begins
    assert harness.tick("A").stage == "hold"
    harness.clock.advance(60)
    request(operator_dynamodb, harness, web)               # and the request is asked during it
    result = harness.tick("A")
    assert "release:restored" in result.actions
    done = releases(harness)[web]
    assert "left released for the rest of this hold" in done.detail
    marks = ledger_control.read_control(Ledger(harness.observer("dynamodb"), harness.table)).released
    assert [m.arn for m in marks] == [web] and marks[0].by == "oncall"


def test_a_walk_that_takes_the_whole_tick_does_not_keep_release_requests_waiting(engaged, harness, operator_dynamodb):
    # The requests are acted on before the walks: a hold's first engage walk of a large
    # fleet may take every tick it has, and an operator's release must not wait for it.
    web = engaged["web"]
    harness.script.set("impaired", harness.clock.now())
    engage_all = harness.engine.engage_all
    # The hold begins; its first engage walk is cut at once by the deadline, so it goes on next tick.
    harness.engine.engage_all = lambda *args, **kwargs: engage_all(*args, **{**kwargs, "deadline": lambda: True})
    assert harness.tick("A").stage == "hold"
    harness.clock.advance(60)
    request(operator_dynamodb, harness, web)               # asked during the hold
    walks = []

    def whole_tick(*args, **kwargs):
        walks.append(kwargs.get("skip", frozenset()))
        report = engage_all(*args, **kwargs)
        harness.clock.advance(15 * 60)   # the walk takes all of the tick's time
        return report

    harness.engine.engage_all = whole_tick
    result = harness.tick("A")
    assert walks and "release:restored" in result.actions
    assert suspended(harness, "web") == {"HealthCheck"}   # Holdfast's suspensions gone, the owner's kept
    assert web in walks[0]                               # and this tick's walk leaves it released


def test_a_request_asked_before_the_hold_on_an_operator_clock_running_ahead_is_still_refused(engaged, harness,
                                                                                              operator_dynamodb):
    """The operator's machine writes `at` on its own clock; ten minutes ahead, a request asked
    before the hold would read as asked during it. The tick judges it by when a tick first
    read it (`seen_at`, the reconcilers' clock, as the plan's times are)."""
    web = engaged["web"]
    harness.tick("A")
    ahead = harness.clock.now() + timedelta(minutes=10)
    ledger_control.request_release(Ledger(operator_dynamodb, harness.table), web, by="oncall", reason="drill",
                                   now=ahead, request_id="r1")
    harness.clock.advance(60)
    harness.script.set("impaired", harness.clock.now())
    result = harness.tick("A")
    assert result.stage == "hold" and "release:refused" in result.actions
    assert "before this hold began" in releases(harness)[web].detail
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}


def test_a_request_waits_while_sts_does_not_answer_and_is_acted_on_by_the_next_tick(engaged, harness,
                                                                                  operator_dynamodb, monkeypatch):
    """A transient STS failure is the reconciler's, not the request's: refusing would end the
    request for good (done, never acted on again)."""
    from holdfast.aws import Clients

    web = engaged["web"]
    request(operator_dynamodb, harness, web)

    def no_answer(self):
        from botocore.exceptions import EndpointConnectionError
        raise EndpointConnectionError(endpoint_url="https://sts.us-east-1.amazonaws.com")

    with monkeypatch.context() as patched:
        patched.setattr(Clients, "account_id", no_answer)
        result = harness.tick("A")
    assert "release:waiting" in result.actions and "release:refused" not in result.actions
    assert releases(harness)[web].state == release_requests.REQUESTED
    assert suspended(harness, "web") == {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"}

    harness.clock.advance(60)
    assert "release:restored" in harness.tick("A").actions
    assert suspended(harness, "web") == {"HealthCheck"}


def test_a_request_whose_restore_meets_a_cap_write_in_flight_waits_a_tick_and_is_then_acted_on(
        aws_semantics, harness, operator_dynamodb):
    """A mapping whose last cap write has not shown and may still land (sent under
    LEASE_SECONDS ago) is left alone by every tick (actuators.tagged._wait_for). That is a
    wait, not the request's fault: marked done it would never be acted on again, and the
    resource would stay capped with the operator told it was refused."""
    from holdfast.aws import Clients
    from holdfast.core.model import FAILED, RAISED
    from holdfast.ledger.leases import LEASE_SECONDS
    from holdfast_fixtures.late_requests import LateRequests
    from tests.support.fleet import make_function, make_mapping

    key = "MaximumConcurrency"
    mapping = make_mapping(harness.observer, make_function(harness.observer, "consumer"), "q")
    arn, uuid = mapping["EventSourceMappingArn"], mapping["UUID"]

    def cap():
        return (harness.observer("lambda").get_event_source_mapping(UUID=uuid).get("ScalingConfig") or {}).get(key)

    Engine(harness.runtime("cli")).engage(kinds=("esm",))
    # GIVEN a drain tick whose own clients send the cap writes: it raises to 20, then to 30,
    # and that UpdateEventSourceMapping times out while AWS applies it later
    drain = Runtime(clients=Clients(region="us-east-1"), settings=SETTINGS, table=harness.table,
                    clock=harness.clock, controller_id="drain")

    def relax(target):
        return Engine(drain, kinds=("esm",)).relax(kinds=("esm",), target_for=lambda _r: target).outcomes

    assert [o.action for o in relax({key: 20})] == [RAISED] and cap() == 20
    with LateRequests(drain.clients("lambda"), "UpdateEventSourceMapping", timeout=True) as late:
        harness.clock.advance(60)
        assert [o.action for o in relax({key: 30})] == [FAILED] and cap() == 20
        # WHEN a release request is acted on 20 s later, while that write may still land
        request(operator_dynamodb, harness, arn)
        harness.clock.advance(20)
        result = harness.tick("A")
        # THEN nothing is written, and the request is not done: it waits for the next tick
        assert "release:waiting" in result.actions, result.actions
        assert not any(a.startswith("release:") and a != "release:waiting" for a in result.actions), result.actions
        waiting = releases(harness)[arn]
        assert (waiting.state, waiting.outcome) == (release_requests.REQUESTED, None), waiting
        assert "may still land" in (waiting.detail or "")
        assert cap() == 20
        assert late.land() == 1
    assert cap() == 30
    # AND the next tick, the late write seen, restores the owner's value (no cap) and is done
    harness.clock.advance(LEASE_SECONDS)
    assert "release:restored" in harness.tick("A").actions
    done = releases(harness)[arn]
    assert (done.state, done.outcome) == (release_requests.DONE, "restored"), done
    assert cap() is None
    assert ResourceLedger(Ledger(harness.observer("dynamodb"), harness.table)).get(arn) is None
