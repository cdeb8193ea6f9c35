"""A stack's life in CloudFormation: two stacks side by side in one account and region, a
stack deleted (its ledger retained) and deployed again, the organization's member stacks,
the mode a template runs in, and the expired-events queue as a redrive source.

CloudFormation refuses to create a resource whose name is taken ("already exists"), and a
retained resource keeps its name after its stack is gone. So the checks are over the
templates: no two stacks share a literal name, and nothing retained has one."""

from __future__ import annotations

import json

from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Annotations, Match, Template

from holdfast.settings import Settings
from holdfast_cdk import Holdfast, HoldfastStack
from holdfast_cdk.org import HoldfastMemberStack
from tests.stack.conftest import ACCOUNT, ORG_CONTEXT, REGION

ENV = Environment(account=ACCOUNT, region=REGION)
# The properties that set a resource's physical name, per type, where CloudFormation would
# otherwise generate one (CloudFormation User Guide, "Name type").
NAME_PROPERTIES = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::IAM::Role": "RoleName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SSM::Parameter": "Name",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::Rule": "Name",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::KMS::Alias": "AliasName",
}


def _template(stack: Stack) -> dict:
    return Template.from_stack(stack).to_json()


def _names(template: dict) -> dict[str, object]:
    """Logical id -> the name property's value, for resources that set one."""
    out = {}
    for logical_id, resource in template["Resources"].items():
        prop = NAME_PROPERTIES.get(resource["Type"])
        if prop and prop in resource.get("Properties", {}):
            out[logical_id] = resource["Properties"][prop]
    return out


def _literal(value) -> str | None:
    """The name when it is a plain string; None when CloudFormation computes it."""
    return value if isinstance(value, str) else None


def _two_stacks(tmp_path, settings=None):
    app = App(outdir=str(tmp_path))
    settings = settings or Settings()
    return [HoldfastStack(app, name, settings=settings, env=ENV) for name in ("Holdfast-a", "Holdfast-b")]


def test_two_stacks_in_one_account_and_region_share_no_name(tmp_path):
    one, two = (_template(s) for s in _two_stacks(tmp_path))
    names = [{_literal(v) for v in _names(t).values()} - {None} for t in (one, two)]
    assert names[0] & names[1] == set()
    # Each names its own SSM parameters, the CLI's way to its ledger and queue.
    assert "/holdfast/Holdfast-a/ledger-table" in names[0] and "/holdfast/Holdfast-b/ledger-table" in names[1]


def test_nothing_a_stack_retains_has_a_name_its_next_create_would_need(synthesized):
    """Delete and deploy again: CloudFormation creates every resource anew, and the ones the
    delete left behind (DeletionPolicy Retain) must not hold a name the new ones take."""
    template = synthesized.template.to_json()
    names = _names(template)
    retained = {lid for lid, r in template["Resources"].items() if r.get("DeletionPolicy") == "Retain"}
    (ledger,) = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"]
    assert ledger in retained
    assert {lid: names[lid] for lid in retained if lid in names} == {}


def test_the_functions_and_the_cli_are_told_the_ledger_name_cloudformation_chose(synthesized):
    template = synthesized.template.to_json()
    (ledger,) = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"]
    for function in synthesized.resources("AWS::Lambda::Function").values():
        assert function["Properties"]["Environment"]["Variables"]["HOLDFAST_LEDGER_TABLE"] == {"Ref": ledger}
    (parameter,) = [r for r in synthesized.resources("AWS::SSM::Parameter").values()
                    if r["Properties"]["Name"].endswith("/ledger-table")]
    assert parameter["Properties"]["Value"] == {"Ref": ledger}
    tags = {t["Key"]: t["Value"] for t in template["Resources"][ledger]["Properties"]["Tags"]}
    assert tags["holdfast:component"] == "ledger"   # what the read-only role is scoped to


def test_a_named_ledger_is_kept_for_a_stack_deployed_with_the_fixed_name(tmp_path):
    """ledger_table_name keeps `holdfast-ledger` for a stack from before: a TableName change
    would make CloudFormation replace the table, starting an empty ledger."""
    (stack, _) = _two_stacks(tmp_path, Settings(ledger_table_name="holdfast-ledger"))
    tables = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table")
    assert [t["Properties"]["TableName"] for t in tables.values()] == ["holdfast-ledger"]


def test_the_member_read_only_role_reads_tagged_ledgers_and_finds_their_names(org_synthesized):
    (role,) = [r for r in org_synthesized.member_template["Resources"].values()
               if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == "HoldfastReadOnly"]
    statements = {s["Sid"]: s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]}
    reads = statements["LedgerReadEveryRegion"]
    assert reads["Condition"] == {"StringEquals": {"aws:ResourceTag/holdfast:component": "ledger"}}
    assert "holdfast-ledger" not in json.dumps(reads["Resource"])
    assert statements["LedgerNameEveryRegion"]["Action"] in ("ssm:GetParametersByPath", ["ssm:GetParametersByPath"])


# ---- the expired-events queue is a redrive source ------------------------------------

def test_the_expired_events_queue_is_the_dead_letter_queue_of_an_anchor_queue_and_of_it_alone(synthesized):
    template = synthesized.template.to_json()
    queues = {lid: r["Properties"] for lid, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    (anchor_id,) = [lid for lid, p in queues.items() if "RedrivePolicy" in p]
    (expired_id,) = [lid for lid, p in queues.items() if "RedriveAllowPolicy" in p]
    assert "ExpiredEvents" in expired_id and "Anchor" in anchor_id
    anchor, expired = queues[anchor_id], queues[expired_id]
    assert anchor["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [expired_id, "Arn"]}
    allow = expired["RedriveAllowPolicy"]
    assert allow["redrivePermission"] == "byQueue" and len(allow["sourceQueueArns"]) == 1
    # The ARN the allow policy names is the anchor's: same name expression, this account and region.
    (allowed,) = allow["sourceQueueArns"]
    stack_uuid = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
    assert anchor["QueueName"] == {"Fn::Join": ["", ["holdfast-anchor-", stack_uuid]]}
    assert allowed == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                         f":sqs:{synthesized.region}:{synthesized.account}:holdfast-anchor-", stack_uuid]]}
    assert "AWS::StackId" in json.dumps(anchor["QueueName"])   # new on every create: never clashes
    # Nothing reads the anchor: only its own TLS-only queue policy refers to it (a Deny). (The
    # controllers' list of Holdfast's own logical IDs names it as text, not as a reference.)
    refers = lambda r: (json.dumps({"Ref": anchor_id}) in json.dumps(r)
                        or json.dumps({"Fn::GetAtt": [anchor_id, "Arn"]}) in json.dumps(r))
    naming = {r["Type"]: r for k, r in template["Resources"].items() if k != anchor_id and refers(r)}
    assert list(naming) == ["AWS::SQS::QueuePolicy"]
    assert [s["Effect"] for s in naming["AWS::SQS::QueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]] == ["Deny"]


# ---- the game day --------------------------------------------------------------------

def _member(settings_change: dict, tmp_path) -> Template:
    settings = Settings.from_mapping({**ORG_CONTEXT["holdfast"], **settings_change})
    app = App(outdir=str(tmp_path))
    return Template.from_stack(HoldfastMemberStack(app, "Holdfast", settings=settings))


def test_member_stacks_do_not_inherit_the_admins_game_day(tmp_path):
    member = _member({"game_day_stop_alarm": "admin-slo"}, tmp_path)
    assert member.find_resources("AWS::FIS::ExperimentTemplate") == {}
    assert [lid for lid in member.to_json()["Resources"] if lid.startswith("GameDay")] == []


def test_a_member_game_day_is_made_only_in_the_accounts_named_each_with_its_own_alarm(tmp_path):
    accounts = {f"{n:012d}": f"slo-{n}" for n in range(1, 13)}   # more than one Fn::Or holds
    member = _member({"org_game_day_stop_alarms": accounts, "game_day_availability_zones": ["use1-az1", "use1-az2"]},
                     tmp_path).to_json()
    game_day = {lid: r for lid, r in member["Resources"].items() if lid.startswith("GameDay")}
    assert {r["Type"] for r in game_day.values()} >= {"AWS::FIS::ExperimentTemplate", "AWS::IAM::Role"}
    assert all(r.get("Condition") == "IsGameDayAccount" for r in game_day.values())
    condition = json.dumps(member["Conditions"]["IsGameDayAccount"])
    assert all(f'"{a}"' in condition for a in accounts) and condition.count('"Fn::Or"') == 3
    assert member["Mappings"]["GameDayStopAlarms"] == {a: {"alarm": alarm} for a, alarm in accounts.items()}
    (template,) = [r for r in game_day.values() if r["Type"] == "AWS::FIS::ExperimentTemplate"]
    assert "GameDayStopAlarms" in json.dumps(template["Properties"]["StopConditions"])
    (action,) = template["Properties"]["Actions"].values()
    assert action["Parameters"]["availabilityZoneIdentifiers"] == "use1-az1,use1-az2"
    assert len(template["Properties"]["Actions"]) == 1   # launches only, never the Lambda action


def test_named_zones_are_the_game_days_zones_and_unnamed_ones_warn_at_synth(tmp_path):
    app = App(outdir=str(tmp_path))
    named = HoldfastStack(app, "Named", env=ENV, settings=Settings(
        game_day_stop_alarm="slo", game_day_availability_zones=("us-east-1a", "us-east-1b", "us-east-1c")))
    unnamed = HoldfastStack(app, "Unnamed", env=ENV, settings=Settings(game_day_stop_alarm="slo"))
    (template,) = Template.from_stack(named).find_resources("AWS::FIS::ExperimentTemplate").values()
    (action,) = template["Properties"]["Actions"].values()
    assert action["Parameters"]["availabilityZoneIdentifiers"] == "us-east-1a,us-east-1b,us-east-1c"
    warning = Match.string_like_regexp("Game day zones not named")
    Annotations.from_stack(unnamed).has_warning("*", warning)
    Annotations.from_stack(named).has_no_warning("*", warning)


# ---- the mode ------------------------------------------------------------------------

def test_the_construct_by_default_changes_nothing_and_synth_says_which_mode_each_stack_runs(tmp_path):
    app = App(outdir=str(tmp_path))
    default = Stack(app, "Default", env=ENV)
    holdfast = Holdfast(default, "Holdfast")
    assert holdfast.settings.mode == "recommend" and Settings(esm_floor=3).mode == "recommend"
    chosen = HoldfastStack(app, "Chosen", env=ENV, settings=Settings(mode="auto"))
    Annotations.from_stack(default).has_info("*", Match.string_like_regexp("Holdfast in Default: mode recommend"))
    Annotations.from_stack(chosen).has_info("*", Match.string_like_regexp("Holdfast in Chosen: mode auto"))
    env = Template.from_stack(default).find_resources("AWS::Lambda::Function")
    for function in env.values():
        settings = json.loads(function["Properties"]["Environment"]["Variables"]["HOLDFAST_SETTINGS"])
        assert settings["mode"] == "recommend"
