"""`chat_channels`: AWS Chatbot channels (Slack and Microsoft Teams) subscribed to the
stage topic, receiving only; cdk-nag and cfn-lint stay clean; bad channel ids fail at synth."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Aspects, Environment, Stack
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from holdfast_cdk import Holdfast, SlackChannel, TeamsChannel
from tests.stack.checks import cfn_lint_errors, synth

ACCOUNT, REGION = "123456789012", "us-east-1"
TEAM, TENANT = "6f1a2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b", "0a1b2c3d-4e5f-4061-8273-9a8b7c6d5e4f"
TEAMS_CHANNEL = "19%3a0123456789abcdef0123456789abcdef%40thread.tacv2"


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.chat")))
    Aspects.of(app).add(AwsSolutionsChecks())
    stack = Stack(app, "WithChat", env=Environment(account=ACCOUNT, region=REGION))
    holdfast = Holdfast(stack, "Holdfast", chat_channels=[
        SlackChannel(workspace_id="T012ABCDEFG", channel_id="C0123456789"),
        TeamsChannel(team_id=TEAM, tenant_id=TENANT, channel_id=TEAMS_CHANNEL),
    ])
    done = synth(app)
    return stack, holdfast, done.template(stack), done


def _topic_ref(template: Template) -> dict:
    (topic_id,) = template.find_resources("AWS::SNS::Topic")
    return {"Ref": topic_id}


def test_slack_and_teams_channels_subscribe_to_the_stage_topic(chat):
    _, _, template, _ = chat
    (slack,) = template.find_resources("AWS::Chatbot::SlackChannelConfiguration").values()
    (teams,) = template.find_resources("AWS::Chatbot::MicrosoftTeamsChannelConfiguration").values()
    topic = _topic_ref(template)
    assert slack["Properties"]["SnsTopicArns"] == [topic] and teams["Properties"]["SnsTopicArns"] == [topic]
    assert (slack["Properties"]["SlackWorkspaceId"], slack["Properties"]["SlackChannelId"]) == ("T012ABCDEFG", "C0123456789")
    assert (teams["Properties"]["TeamId"], teams["Properties"]["TeamsTenantId"], teams["Properties"]["TeamsChannelId"]) == (
        TEAM, TENANT, TEAMS_CHANNEL)


def test_the_channels_only_receive_their_role_has_no_policy_and_the_guardrail_denies_everything(chat):
    _, _, template, _ = chat
    (slack,) = template.find_resources("AWS::Chatbot::SlackChannelConfiguration").values()
    (teams,) = template.find_resources("AWS::Chatbot::MicrosoftTeamsChannelConfiguration").values()
    (guardrail_id, guardrail), = template.find_resources("AWS::IAM::ManagedPolicy").items()
    assert guardrail["Properties"]["PolicyDocument"]["Statement"] == [
        {"Sid": "NothingFromChat", "Effect": "Deny", "Action": "*", "Resource": "*"}]
    for config in (slack, teams):
        assert config["Properties"]["GuardrailPolicies"] == [{"Ref": guardrail_id}]   # not AdministratorAccess
    role_id = slack["Properties"]["IamRoleArn"]["Fn::GetAtt"][0]
    assert teams["Properties"]["IamRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    role = template.find_resources("AWS::IAM::Role")[role_id]
    assert "Policies" not in role["Properties"] and "ManagedPolicyArns" not in role["Properties"]
    attached = [p for p in template.find_resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]]
    assert attached == []
    assert json.dumps(role["Properties"]["AssumeRolePolicyDocument"]).count("chatbot.amazonaws.com") == 1


def test_without_channels_nothing_of_chatbot_is_made(synthesized):
    assert synthesized.resources("AWS::Chatbot::SlackChannelConfiguration") == {}
    assert synthesized.resources("AWS::Chatbot::MicrosoftTeamsChannelConfiguration") == {}


def test_cdk_nag_and_cfn_lint_stay_clean_with_chat_channels(chat):
    stack, _, template, done = chat
    assert done.nag_errors(stack) == []
    assert cfn_lint_errors(template.to_json(), regions=[REGION]) == []


@pytest.mark.parametrize("channel, message", [
    (SlackChannel(workspace_id="my workspace", channel_id="C01"), "workspace_id 'my workspace' must be the Slack workspace id"),
    (SlackChannel(workspace_id="T01", channel_id="#ops"), "channel_id '#ops' must be a Slack channel id"),
    (TeamsChannel(team_id="team", tenant_id=TENANT, channel_id=TEAMS_CHANNEL), "team_id 'team' must be a UUID"),
    (TeamsChannel(team_id=TEAM, tenant_id=TENANT, channel_id="19:abc@thread.tacv2"), "must be a Teams channel id, URL-encoded"),
    (SlackChannel(workspace_id="T01", channel_id="C01", name="ops channel"), "chat channel name 'ops channel'"),
])
def test_a_wrong_channel_fails_at_synth_naming_the_prop(channel, message):
    stack = Stack(App(), "Bad", env=Environment(account=ACCOUNT, region=REGION))
    with pytest.raises(ValueError, match=message):
        Holdfast(stack, "Holdfast", chat_channels=[channel])


def test_two_channels_of_one_name_fail_at_synth():
    stack = Stack(App(), "Twice", env=Environment(account=ACCOUNT, region=REGION))
    with pytest.raises(ValueError, match="chat channel names must differ"):
        Holdfast(stack, "Holdfast", chat_channels=[SlackChannel("T01", "C01"), SlackChannel("T01", "C02")])
