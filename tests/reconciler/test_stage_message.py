"""The stage-change message as a chat channel and an e-mail show it (holdfast.core.announce),
and the one publish that carries it to each kind of subscriber."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from holdfast.clock import FakeClock
from holdfast.core import announce, policy
from holdfast.reconciler import publish_stage
from holdfast.runtime import Runtime
from holdfast.settings import Settings

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SETTINGS = Settings.from_mapping({"hold_minutes": 15, "capacity_hold_minutes": 45})


def _plan(stage, **kw):
    return policy.Plan(generation=3, stage=stage, entered_at=NOW, mode=kw.pop("mode", "auto"),
                       reasons=kw.pop("reasons", ("verdict impaired: 3 groups in 2 zones", "impairment detected: back to hold")), **kw)


def test_a_chat_message_says_the_stage_why_what_is_held_and_the_next_gate():
    message = announce.chat(_plan(policy.HOLD), SETTINGS, account="111122223333", region="us-east-1",
                            engaged={"asg": 4, "esm": 2})
    assert (message["version"], message["source"], message["content"]["textType"]) == ("1.0", "custom", "client-markdown")
    assert message["content"]["title"] == "Holdfast: hold in 111122223333 us-east-1"
    lines = message["content"]["description"].splitlines()
    assert lines[0] == "*Stage:* hold (generation 3, mode auto)"
    assert lines[1] == "*Why:* verdict impaired: 3 groups in 2 zones; impairment detected: back to hold"
    assert lines[2].startswith("*Held:* Auto Scaling groups (4), ") and "(2)" in lines[2]
    assert lines[3] == "*Back to their owners' values:* none"
    assert lines[4].startswith("*Next gate:* drain, after 15 min with no capacity-class launch failure")
    assert message["metadata"]["threadId"] == "holdfast-111122223333-us-east-1"   # one thread per account and region


def test_later_stages_say_what_is_back_and_their_own_gate():
    message = announce.chat(_plan(policy.ROUTING, reasons=("hold passed",)), SETTINGS, account="1", region="r")
    lines = message["content"]["description"].splitlines()
    kept, back = announce.held(_plan(policy.ROUTING), SETTINGS)
    assert "asg" in kept and "async" in back and "esm" in back
    assert lines[3].startswith("*Back to their owners' values:* ") and "none" not in lines[3]
    assert lines[4] == "*Next gate:* capacity, after a clean hold of 15 min"
    assert announce.next_gate(_plan(policy.CAPACITY), SETTINGS).startswith("normal, once launches are normal for 45 min")


def test_recommend_mode_says_nothing_was_written():
    message = announce.chat(_plan(policy.HOLD, mode="recommend"), SETTINGS, account="1", region="r")
    assert message["content"]["title"].startswith("Holdfast: hold (recommend only)")
    assert "recommend: decided and reported, nothing written" in message["content"]["description"]


def test_every_stage_has_a_gate_sentence():
    for stage in policy.STAGES:
        assert announce.next_gate(_plan(stage), SETTINGS)


def test_one_publish_gives_chatbot_its_message_email_its_text_and_other_protocols_the_document(clients):
    sns = clients("sns")
    topic = sns.create_topic(Name="holdfast-stage")["TopicArn"]
    sent = []
    sns.meta.events.register("before-parameter-build.sns.Publish", lambda params, **_: sent.append(dict(params)))
    runtime = Runtime(clients=clients, settings=SETTINGS, table="t", clock=FakeClock(NOW), controller_id="r1", topic_arn=topic)

    publish_stage(runtime, _plan(policy.HOLD))

    (params,) = sent
    assert params["MessageStructure"] == "json"
    bodies = json.loads(params["Message"])
    assert set(bodies) == {"default", "email", "https"}
    chat = json.loads(bodies["https"])            # Chatbot's subscription is an HTTPS endpoint
    assert chat["source"] == "custom" and chat["content"]["title"] == "Holdfast: hold in 123456789012 us-east-1"
    assert bodies["email"].splitlines()[0] == "Holdfast: hold in 123456789012 us-east-1"
    document = json.loads(bodies["default"])      # SQS, Lambda: the JSON document as before
    assert (document["stage"], document["generation"], document["controller"]) == ("hold", 3, "r1")
