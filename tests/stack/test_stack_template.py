"""The synthesized template has every resource Holdfast deploys, with its key properties."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from holdfast_cdk import role_policies as policies
from holdfast_cdk.constructs.controllers import POWERTOOLS_LAYER_PARAMETER


def _only(synthesized, cfn_type: str, **match) -> dict:
    found = synthesized.template.find_resources(cfn_type, match or None)
    assert len(found) == 1, f"expected one {cfn_type} matching {match}, found {sorted(found)}"
    return next(iter(found.values()))


def _functions(synthesized) -> dict[str, dict]:
    """handler module ('detector' / 'reconciler') -> function resource."""
    found = synthesized.resources("AWS::Lambda::Function")
    return {f["Properties"]["Handler"].split(".")[2]: f for f in found.values()}


def _logical_id(synthesized, cfn_type: str, resource: dict) -> str:
    return next(k for k, v in synthesized.resources(cfn_type).items() if v == resource)


def test_ledger_table_is_on_demand_recoverable_encrypted_and_retained(synthesized):
    table = _only(synthesized, "AWS::DynamoDB::Table")
    props = table["Properties"]
    assert "TableName" not in props   # named by CloudFormation: a retained table never blocks the next create
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"


def test_controllers_run_python_313_on_arm_with_the_powertools_layer_and_tracing(synthesized):
    functions = _functions(synthesized)
    assert set(functions) == {"detector", "reconciler", "readiness", "teardown"}
    # The layer ARN comes from Powertools' public SSM parameter for the pinned release.
    parameters = synthesized.template.to_json()["Parameters"]
    (name,) = [k for k, v in parameters.items() if v.get("Default") == POWERTOOLS_LAYER_PARAMETER]
    assert parameters[name]["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert POWERTOOLS_LAYER_PARAMETER.endswith("/arm64/python3.13/3.37.0")
    layer = {"Ref": name}
    for name, function in functions.items():
        props = function["Properties"]
        assert props["Handler"] == f"holdfast.handlers.{name}.handler"
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Layers"] == [layer]


def test_each_controller_has_its_own_role(synthesized):
    roles = [json.dumps(f["Properties"]["Role"]) for f in _functions(synthesized).values()]
    assert len(set(roles)) == 3
    assert len(synthesized.resources("AWS::IAM::Role")) == 3


def test_controllers_get_the_contract_environment(synthesized):
    for name, function in _functions(synthesized).items():
        env = function["Properties"]["Environment"]["Variables"]
        assert json.loads(env["HOLDFAST_SETTINGS"]) == synthesized.settings.to_mapping()
        assert set(env) >= {
            "HOLDFAST_LEDGER_TABLE",
            "HOLDFAST_EXPIRED_QUEUE_ARN",
            "HOLDFAST_TOPIC_ARN",
            "POWERTOOLS_SERVICE_NAME",
            "POWERTOOLS_METRICS_NAMESPACE",
        }
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Holdfast"
        assert env["POWERTOOLS_SERVICE_NAME"] == f"holdfast-{name}"


def test_reconciler_timeout_leaves_margin_after_the_tick_budget(synthesized):
    timeout = _functions(synthesized)["reconciler"]["Properties"]["Timeout"]
    assert timeout >= synthesized.settings.tick_budget_seconds + 15
    assert timeout <= 900


def test_log_groups_keep_logs_as_long_as_settings_say(synthesized):
    groups = synthesized.resources("AWS::Logs::LogGroup")
    assert len(groups) == 4   # the three controllers and the deletion-time teardown
    assert {g["Properties"]["RetentionInDays"] for g in groups.values()} == {synthesized.settings.log_retention_days}
    for function in _functions(synthesized).values():
        assert "LogGroup" in function["Properties"]["LoggingConfig"]


def test_failed_async_invocations_go_to_the_dead_letter_queue(synthesized):
    configs = synthesized.resources("AWS::Lambda::EventInvokeConfig")
    dlq = _logical_id(synthesized, "AWS::SQS::Queue", _dead_letter_queue(synthesized))
    by_retries = {c["Properties"]["MaximumRetryAttempts"]: c["Properties"] for c in configs.values()}
    assert set(by_retries) == {0, 2}, "reconciler ticks are not retried, signals are"
    for props in by_retries.values():
        assert props["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [dlq, "Arn"]}


def _dead_letter_queue(synthesized) -> dict:
    queues = synthesized.resources("AWS::SQS::Queue")
    return next(q for k, q in queues.items() if "DeadLetters" in k)


def test_launch_results_rule_matches_failures_and_successes(synthesized):
    rule = _only(
        synthesized,
        "AWS::Events::Rule",
        Properties={"EventPattern": Match.object_like({"source": ["aws.autoscaling"]})},
    )
    assert rule["Properties"]["EventPattern"]["detail-type"] == [
        "EC2 Instance Launch Unsuccessful",
        "EC2 Instance Launch Successful",
        "EC2 Instance Terminate Successful",
    ]
    _assert_target(synthesized, rule, "detector", retries=2)


def test_health_rule_matches_issues_for_configured_services_in_this_region(synthesized):
    rule = _only(
        synthesized,
        "AWS::Events::Rule",
        Properties={"EventPattern": Match.object_like({"source": ["aws.health"]})},
    )
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == ["AWS Health Event"]
    # The impaired region is detail.eventRegion; `region` is only where the copy was delivered
    # (this bus also receives other regions' backup copies: AWS Health user guide,
    # "Creating EventBridge rules for AWS Region coverage").
    assert "region" not in pattern
    assert pattern["detail"] == {"service": ["EC2", "DYNAMODB"], "eventTypeCategory": ["issue"],
                                 "eventRegion": [synthesized.region]}
    _assert_target(synthesized, rule, "detector", retries=2)


def test_schedule_drives_the_reconciler_every_period(synthesized):
    (rule,) = [r for r in synthesized.resources("AWS::Events::Rule").values()
               if r["Properties"].get("Description") == "Holdfast: reconciler tick"]
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    _assert_target(synthesized, rule, "reconciler", retries=0)


def _assert_target(synthesized, rule: dict, handler: str, *, retries: int) -> None:
    (target,) = rule["Properties"]["Targets"]
    function_id = _logical_id(synthesized, "AWS::Lambda::Function", _functions(synthesized)[handler])
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    dlq = _logical_id(synthesized, "AWS::SQS::Queue", _dead_letter_queue(synthesized))
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq, "Arn"]}}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == retries


def test_expired_events_queue_is_encrypted_keeps_14_days_and_takes_sends_from_this_account(synthesized):
    queues = synthesized.resources("AWS::SQS::Queue")
    expired_id, expired = next((k, q) for k, q in queues.items() if "ExpiredEvents" in k)
    assert expired["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert expired["Properties"]["SqsManagedSseEnabled"] is True
    policy = _only(
        synthesized, "AWS::SQS::QueuePolicy", Properties={"Queues": [{"Ref": expired_id}]}
    )["Properties"]["PolicyDocument"]["Statement"]
    send = next(s for s in policy if s.get("Sid") == "OwnFunctionsSendExpiredEvents")
    assert send["Effect"] == "Allow" and send["Action"] == "sqs:SendMessage"
    assert send["Condition"] == {"StringEquals": {"aws:PrincipalAccount": synthesized.account}}
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy)


def test_topic_is_encrypted_with_its_own_key_and_mails_the_configured_address(synthesized):
    topic_id, topic = next(iter(synthesized.resources("AWS::SNS::Topic").items()))
    key_id = next(iter(synthesized.resources("AWS::KMS::Key")))
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    subscription = _only(synthesized, "AWS::SNS::Subscription")["Properties"]
    assert subscription == {"Protocol": "email", "TopicArn": {"Ref": topic_id}, "Endpoint": "oncall@example.com"}


def test_each_of_holdfasts_functions_reserves_its_own_concurrency(synthesized):
    """An account out of concurrency throttles every function without a reservation: the
    detector and the reconciler must run exactly then."""
    functions = [f["Properties"] for f in synthesized.resources("AWS::Lambda::Function").values()
                 if str(f["Properties"].get("Handler", "")).startswith("holdfast.handlers.")]
    # The teardown runs once, at the stack's deletion: it reserves nothing.
    assert {f["Handler"]: f.get("ReservedConcurrentExecutions") for f in functions} == {
        "holdfast.handlers.detector.handler": 5, "holdfast.handlers.reconciler.handler": 5,
        "holdfast.handlers.readiness.handler": 5, "holdfast.handlers.teardown.handler": None}


def test_no_reservation_when_the_setting_is_zero(tmp_path):
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from holdfast.settings import Settings
    from holdfast_cdk import Holdfast

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Zero", env={"account": "123456789012", "region": "us-east-1"})
    Holdfast(stack, "Holdfast", settings=Settings.from_mapping({"controller_reserved_concurrency": 0}))
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    assert functions and not any("ReservedConcurrentExecutions" in f["Properties"] for f in functions.values())


def test_the_deletion_time_custom_resource_runs_before_what_it_needs_is_deleted(synthesized):
    """CloudFormation deletes a resource before those it depends on: the teardown's custom
    resource depends on the controllers, their roles, the ledger, the queues, the topic and
    the schedule, so a refused deletion keeps them all and a restore has them while it runs."""
    resources = synthesized.template.to_json()["Resources"]
    (cr_id, cr), = [(k, v) for k, v in resources.items() if v["Type"] == "Custom::HoldfastTeardown"]
    function_id = cr["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = resources[function_id]["Properties"]
    assert function["Handler"] == "holdfast.handlers.teardown.handler" and function["Timeout"] == 900
    assert cr["Properties"]["ServiceTimeout"] == "960" and cr["Properties"]["OnDeleteWhileEngaged"] == "refuse"
    depends = set(cr["DependsOn"])
    by_type = lambda t: {k for k, v in resources.items() if v["Type"] == t}
    needed = (by_type("AWS::Lambda::Function") | by_type("AWS::IAM::Role") | by_type("AWS::IAM::Policy")
              | by_type("AWS::DynamoDB::Table") | by_type("AWS::Events::Rule") | by_type("AWS::SQS::Queue")
              | by_type("AWS::SNS::Topic") | by_type("AWS::KMS::Key"))
    assert needed <= depends and function_id in depends
    reconciler_role = next(v for v in resources.values() if v["Type"] == "AWS::Lambda::Function"
                           and v["Properties"]["Handler"] == "holdfast.handlers.reconciler.handler")["Properties"]["Role"]
    assert function["Role"] == reconciler_role   # a restore is the reconciler's writes


def test_cloudwatch_alarms_of_this_account_may_publish_to_the_topic_and_use_its_key(synthesized):
    """A topic policy replaces SNS's default one: without its own Allow, CloudWatch alarms
    could not publish to the topic, whatever the key grants."""
    topic_id = next(iter(synthesized.resources("AWS::SNS::Topic")))
    policy = _only(synthesized, "AWS::SNS::TopicPolicy", Properties={"Topics": [{"Ref": topic_id}]})
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (publish,) = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert publish["Effect"] == "Allow" and publish["Action"] == "sns:Publish"
    assert publish["Resource"] == {"Ref": topic_id}
    assert publish["Condition"]["StringEquals"] == {"aws:SourceAccount": synthesized.account}
    assert publish["Condition"]["ArnLike"] == {
        "aws:SourceArn": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":cloudwatch:{synthesized.region}:"
                                            f"{synthesized.account}:alarm:*"]]}}
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements)
    key = next(iter(synthesized.resources("AWS::KMS::Key").values()))
    grants = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
              if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert grants and all(s["Condition"] == {"StringEquals": {"aws:SourceAccount": synthesized.account}} for s in grants)
    assert {a for s in grants for a in s["Action"]} == {"kms:Decrypt", "kms:GenerateDataKey"}


def test_alarms_cover_errors_and_throttles_of_both_controllers_the_dead_letters_and_stuck_resources(synthesized):
    alarms = synthesized.resources("AWS::CloudWatch::Alarm").values()
    watched = {(a["Properties"]["MetricName"], a["Properties"]["Namespace"]) for a in alarms}
    assert watched == {("Errors", "AWS/Lambda"), ("Throttles", "AWS/Lambda"), ("ApproximateNumberOfMessagesVisible", "AWS/SQS"),
                       ("ResourcesStuck", "Holdfast"), ("ReadinessChecksFailed", "Holdfast"), ("DrainStalled", "Holdfast")}
    assert len(alarms) == 8
    # the reconciler emits ResourcesStuck with Powertools' service dimension (holdfast.reconciler.announcements.emit_metrics)
    (stuck,) = [a["Properties"] for a in alarms if a["Properties"]["MetricName"] == "ResourcesStuck"]
    assert stuck["Dimensions"] == [{"Name": "service", "Value": "holdfast-reconciler"}]
    assert stuck["Threshold"] == 1 and stuck["TreatMissingData"] == "ignore"
    (stalled,) = [a["Properties"] for a in alarms if a["Properties"]["MetricName"] == "DrainStalled"]
    assert stalled["Dimensions"] == [{"Name": "service", "Value": "holdfast-reconciler"}] and stalled["Threshold"] == 1
    topic_id = next(iter(synthesized.resources("AWS::SNS::Topic")))
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    synthesized.template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_roles_carry_exactly_the_rendered_policy_documents(synthesized):
    """What reaches IAM is policies/<role>.json, filled; nothing is added or lost on the way."""
    roles = synthesized.resources("AWS::IAM::Role")
    for role_name in ("detector", "reconciler"):
        raw = policies.read(role_name)
        granted = {a for s in raw["Statement"] for a in s["Action"]}
        (role,) = [r for r in roles.values() if r["Properties"]["Description"].startswith(f"Holdfast {role_name}:")]
        inline = role["Properties"].get("Policies", [])
        rendered = {a for p in inline for s in p["PolicyDocument"]["Statement"] for a in _as_list(s["Action"])}
        assert rendered == granted


def _as_list(value):
    return value if isinstance(value, list) else [value]


def test_the_readiness_check_runs_on_its_schedule_and_alarms_on_failure_or_silence(synthesized):
    """Doctor's read-only checks every `readiness_hours` (6 by default), by a function of
    their own; the alarm fires on one failed check, or on a period with no run."""
    functions = synthesized.resources("AWS::Lambda::Function")
    (readiness_id,) = [k for k, f in functions.items() if f["Properties"]["Handler"] == "holdfast.handlers.readiness.handler"]
    env = functions[readiness_id]["Properties"]["Environment"]["Variables"]
    assert {"HOLDFAST_RECONCILER_ROLE_ARN", "HOLDFAST_RECONCILER_FUNCTION_ARN", "HOLDFAST_SETTINGS_PARAMETER"} <= set(env)
    assert env["HOLDFAST_SETTINGS_PARAMETER"] == "/holdfast/HoldfastStack-123456789012-us-east-1/settings" or \
        env["HOLDFAST_SETTINGS_PARAMETER"].endswith("/settings")
    rules = [r for r in synthesized.resources("AWS::Events::Rule").values()
             if any(t["Arn"] == {"Fn::GetAtt": [readiness_id, "Arn"]} for t in r["Properties"].get("Targets", []))]
    assert [r["Properties"]["ScheduleExpression"] for r in rules] == ["rate(6 hours)"]
    (alarm,) = [a for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("MetricName") == "ReadinessChecksFailed"]
    props = alarm["Properties"]
    assert (props["Namespace"], props["Threshold"], props["TreatMissingData"], props["Period"]) == ("Holdfast", 1, "breaching", 6 * 3600)
    assert props["Dimensions"] == [{"Name": "service", "Value": "holdfast-readiness"}]
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic_id}]
