"""One case per validation rule of holdfast.settings: the exact message an operator reads
when `cdk synth` stops (key, value, what is allowed)."""

from __future__ import annotations

import dataclasses

import pytest

from holdfast.settings import _REMOVED, LOG_RETENTION_DAYS, Rule, Settings, SettingsError, Target

TARGET = {"account": "123456789012", "region": "us-east-1"}
TARGETS_ALLOWED = 'must be a list of {"account": 12 digits, "region": e.g. "us-east-1"}, without duplicates'
SELECTOR_ALLOWED = (
    "must be a tag `KEY=VALUE`, key 1–128 and value 0–256 characters of letters, digits, spaces and _ . : / = + - @"
)
ORG = {
    "org_organizational_unit_ids": ["ou-ab12-cd345678"],
    "org_regions": ["us-east-1", "eu-west-1"],
    "org_admin_account": "111111111111",
    "org_id": "o-a1b2c3d4e5",
}
KNOWN = "(known: the regions of the aws, aws-cn and aws-us-gov partitions)"
PROCESSES = "Launch, Terminate, AddToLoadBalancer, AlarmNotification, AZRebalance, HealthCheck, InstanceRefresh, ReplaceUnhealthy, ScheduledActions"

RULES = {
    # per key
    "selector without =": ({"selector": "holdfast"}, f'holdfast.selector = "holdfast": {SELECTOR_ALLOWED}'),
    "selector in the aws: namespace": ({"selector": "aws:x=y"}, f'holdfast.selector = "aws:x=y": {SELECTOR_ALLOWED}'),
    "mode": ({"mode": "on"}, 'holdfast.mode = "on": must be one of auto, recommend, off'),
    "targets not a list": ({"targets": "us-east-1"}, f'holdfast.targets = "us-east-1": {TARGETS_ALLOWED}'),
    "target account": (
        {"targets": [{"account": "1234", "region": "us-east-1"}]},
        f'holdfast.targets = {{"account": "1234", "region": "us-east-1"}}: {TARGETS_ALLOWED}',
    ),
    "target region": (
        {"targets": [{"account": "123456789012", "region": "us-est-1"}]},
        f'holdfast.targets = "us-est-1": unknown region; did you mean \'us-east-1\' or \'us-west-1\'? {KNOWN}',
    ),
    "target region, an Availability Zone": (
        {"targets": [{"account": "123456789012", "region": "us-east-1a"}]},
        f'holdfast.targets = "us-east-1a": unknown region; that is an Availability Zone of \'us-east-1\' {KNOWN}',
    ),
    "target duplicated": (
        {"targets": [TARGET, TARGET]},
        f'holdfast.targets = [{{"account": "123456789012", "region": "us-east-1"}}, '
        f'{{"account": "123456789012", "region": "us-east-1"}}]: {TARGETS_ALLOWED}',
    ),
    "asg process unknown": ({"asg_processes": ["Launch", "Nope"]}, f'holdfast.asg_processes = "Nope": must be one of {PROCESSES}'),
    "asg processes empty": (
        {"asg_processes": []},
        f"holdfast.asg_processes = []: must be a list of Auto Scaling processes ({PROCESSES}), at least 1",
    ),
    "asg processes duplicated": (
        {"asg_processes": ["Launch", "Launch"]},
        f'holdfast.asg_processes = ["Launch", "Launch"]: must be a list of Auto Scaling processes ({PROCESSES}), without duplicates',
    ),
    "esm floor below 2": ({"esm_floor": 1}, "holdfast.esm_floor = 1: must be an integer from 2 to 1000"),
    "esm floor above 1000": ({"esm_floor": 1001}, "holdfast.esm_floor = 1001: must be an integer from 2 to 1000"),
    "an integer is not a boolean": ({"esm_floor": True}, "holdfast.esm_floor = true: must be an integer from 2 to 1000"),
    "an integer is not a fraction": ({"hold_minutes": 2.5}, "holdfast.hold_minutes = 2.5: must be an integer from 1 to 1440"),
    "cap steps are gone, said so": (
        {"esm_cap_steps": [5, 20]},
        "holdfast.esm_cap_steps = [5, 20]: was removed: the drain no longer raises caps along a ladder but with a "
        "feedback controller per mapping; see the drain_* settings",
    ),
    "drain alarms by key": (
        {"drain_downstream_alarms": {"orders": "db-latency"}},
        'holdfast.drain_downstream_alarms = {"orders": "db-latency"}: must be an object of {"KEY": ["alarm name", ...]}, '
        'KEY a function name, queue name, mapping UUID or "*", each list without duplicates',
    ),
    "drain warnings without duplicates": (
        {"drain_warning_alarms": {"*": ["w", "w"]}},
        'holdfast.drain_warning_alarms = {"*": ["w", "w"]}: must be an object of {"KEY": ["alarm name", ...]}, '
        'KEY a function name, queue name, mapping UUID or "*", each list without duplicates',
    ),
    "drain raise fraction": ({"drain_raise_fraction": 0}, "holdfast.drain_raise_fraction = 0: must be a number from 0.01 to 1"),
    "drain share of the cap": ({"drain_raise_share_of_cap": 0.6}, "holdfast.drain_raise_share_of_cap = 0.6: must be a number from 0 to 0.5"),
    "drain start above": ({"drain_start_steps_above": 5}, "holdfast.drain_start_steps_above = 5: must be an integer from 0 to 4"),
    "drain cut factor": ({"drain_cut_factor": 1}, "holdfast.drain_cut_factor = 1: must be a number from 0.1 to 0.95"),
    "drain stale minutes": ({"drain_stale_minutes": 0}, "holdfast.drain_stale_minutes = 0: must be an integer from 1 to 60"),
    "drain slack": ({"drain_caught_up_slack_seconds": -1}, "holdfast.drain_caught_up_slack_seconds = -1: must be an integer from 0 to 3600"),
    "drain restore after": ({"drain_restore_after_minutes": 1441}, "holdfast.drain_restore_after_minutes = 1441: must be an integer from 0 to 1440"),
    "drain alarm memory": ({"drain_remember_alarm_minutes": 1.5}, "holdfast.drain_remember_alarm_minutes = 1.5: must be an integer from 0 to 1440"),
    "drain pre-event window": ({"drain_pre_event_minutes": 4}, "holdfast.drain_pre_event_minutes = 4: must be an integer from 5 to 1440"),
    "drain slow start": ({"drain_slow_start_factor": 1.0}, "holdfast.drain_slow_start_factor = 1.0: must be a number from 1.1 to 4"),
    "drain duration warning": ({"drain_duration_warning_ratio": 1}, "holdfast.drain_duration_warning_ratio = 1: must be a number from 1.01 to 3"),
    "drain duration critical": ({"drain_duration_critical_ratio": 9}, "holdfast.drain_duration_critical_ratio = 9: must be a number from 1.02 to 5"),
    "drain timeout warning": ({"drain_timeout_warning_share": 0.99}, "holdfast.drain_timeout_warning_share = 0.99: must be a number from 0.1 to 0.95"),
    "drain timeout critical": ({"drain_timeout_critical_share": 0.1}, "holdfast.drain_timeout_critical_share = 0.1: must be a number from 0.2 to 1"),
    "drain failure share": ({"drain_failure_critical_share": 0}, "holdfast.drain_failure_critical_share = 0: must be a number from 0.01 to 1"),
    "drain warning step back": ({"drain_warning_step_back": 0.6}, "holdfast.drain_warning_step_back = 0.6: must be a number from 0.01 to 0.5"),
    "drain critical below warning": ({"drain_duration_warning_ratio": 1.3},
                                     "holdfast.drain_duration_critical_ratio = 1.2: must be above drain_duration_warning_ratio (1.3)"),
    "drain timeout critical below warning": ({"drain_timeout_critical_share": 0.4},
                                             "holdfast.drain_timeout_critical_share = 0.4: must be above drain_timeout_warning_share (0.5)"),
    "replay attempts": ({"replay_max_attempts": 0}, "holdfast.replay_max_attempts = 0: must be an integer from 1 to 10"),
    "replay rate within SQS's maximum": (
        {"replay_messages_per_second": 501}, "holdfast.replay_messages_per_second = 501: must be an integer from 1 to 500"),
    "replay destination is a queue ARN": (
        {"replay_expired_events_to": "orders"},
        'holdfast.replay_expired_events_to = "orders": must be an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME) or null',
    ),
    "capacity hold": ({"capacity_hold_minutes": 0}, "holdfast.capacity_hold_minutes = 0: must be an integer from 1 to 1440"),
    "capacity wave groups": ({"capacity_wave_groups_percent": 0}, "holdfast.capacity_wave_groups_percent = 0: must be an integer from 1 to 100"),
    "capacity wave instances": ({"capacity_wave_instances_percent": 101}, "holdfast.capacity_wave_instances_percent = 101: must be an integer from 1 to 100"),
    "capacity wave hold": ({"capacity_wave_minutes": 0}, "holdfast.capacity_wave_minutes = 0: must be an integer from 1 to 1440"),
    "async event age": ({"async_max_event_age_seconds": 59}, "holdfast.async_max_event_age_seconds = 59: must be an integer from 60 to 21600"),
    "async event age above 6 h": (
        {"async_max_event_age_seconds": 21601},
        "holdfast.async_max_event_age_seconds = 21601: must be an integer from 60 to 21600",
    ),
    "async retries": ({"async_max_retry_attempts": 3}, "holdfast.async_max_retry_attempts = 3: must be an integer from 0 to 2"),
    "dns failover count": (
        {"nlb_dns_failover_minimum_healthy_count": "none"},
        'holdfast.nlb_dns_failover_minimum_healthy_count = "none": must be `off` or an integer from 1 to 1000',
    ),
    "dns failover percentage": (
        {"nlb_dns_failover_minimum_healthy_percentage": 101},
        "holdfast.nlb_dns_failover_minimum_healthy_percentage = 101: must be `off` or an integer from 1 to 100",
    ),
    "routing count has no off": (
        {"nlb_routing_minimum_healthy_count": "off"},
        'holdfast.nlb_routing_minimum_healthy_count = "off": must be an integer from 1 to 1000',
    ),
    "routing percentage": (
        {"nlb_routing_minimum_healthy_percentage": 0},
        "holdfast.nlb_routing_minimum_healthy_percentage = 0: must be `off` or an integer from 1 to 100",
    ),
    "gating alarms": ({"gating_alarms": [""]}, 'holdfast.gating_alarms = [""]: must be a list of CloudWatch alarm names'),
    "detect groups": ({"detect_min_groups": 0}, "holdfast.detect_min_groups = 0: must be an integer from 1 to 100"),
    "detect zones": ({"detect_min_zones": 11}, "holdfast.detect_min_zones = 11: must be an integer from 1 to 10"),
    "detect window": ({"detect_window_minutes": 121}, "holdfast.detect_window_minutes = 121: must be an integer from 1 to 120"),
    "recover quiet": ({"recover_quiet_minutes": 0}, "holdfast.recover_quiet_minutes = 0: must be an integer from 1 to 1440"),
    "detect failure share": ({"detect_failure_share": 0}, "holdfast.detect_failure_share = 0: must be a number from 0.01 to 1"),
    "recover success share": ({"recover_success_share": 0.4}, "holdfast.recover_success_share = 0.4: must be a number from 0.5 to 1"),
    "recover share above the impairment share's complement": (
        {"detect_failure_share": 0.2, "recover_success_share": 0.7},
        "holdfast.recover_success_share = 0.7: must be at least 1 - detect_failure_share (0.8), so that recovery needs "
        "fewer failures than impairment",
    ),
    "drain error share": ({"drain_max_error_share": 1.5}, "holdfast.drain_max_error_share = 1.5: must be a number from 0 to 1"),
    "drain throttle share": ({"drain_max_throttle_share": -0.1}, "holdfast.drain_max_throttle_share = -0.1: must be a number from 0 to 1"),
    "health services spelled as AWS Health does": (
        {"health_services": ["ec2"]},
        'holdfast.health_services = "ec2": each service must be an AWS Health service code in capitals, such as EC2 or DYNAMODB',
    ),
    "health services a list": (
        {"health_services": "EC2"},
        'holdfast.health_services = "EC2": must be a list of AWS Health service names such as EC2',
    ),
    "probe endpoints": (
        {"probe_endpoints": ["not a host"]},
        'holdfast.probe_endpoints = "not a host": each endpoint must be a host name such as dynamodb.{region}.amazonaws.com',
    ),
    "probe api services": (
        {"probe_api_services": ["s3"]},
        'holdfast.probe_api_services = "s3": must be one of dynamodb, ec2, autoscaling, lambda, sqs',
    ),
    "probe timeout": ({"probe_timeout_seconds": 0.05}, "holdfast.probe_timeout_seconds = 0.05: must be a number from 0.1 to 10"),
    "probe failure ratio below 1": ({"probe_failure_ratio": 1}, "holdfast.probe_failure_ratio = 1: must be a number from 0 to 1 (exclusive)"),
    "schedule": ({"schedule_minutes": 61}, "holdfast.schedule_minutes = 61: must be an integer from 1 to 60"),
    "tick budget": ({"tick_budget_seconds": 601}, "holdfast.tick_budget_seconds = 601: must be an integer from 10 to 600"),
    "rewalk period": ({"rewalk_minutes": 0}, "holdfast.rewalk_minutes = 0: must be an integer from 1 to 1440"),
    "stuck after": ({"stuck_after_failures": 101}, "holdfast.stuck_after_failures = 101: must be an integer from 1 to 100"),
    "lambda write rate": ({"lambda_writes_per_second": 16}, "holdfast.lambda_writes_per_second = 16: must be a number from 1 to 15"),
    "controller concurrency": ({"controller_reserved_concurrency": 101}, "holdfast.controller_reserved_concurrency = 101: must be an integer from 0 to 100"),
    "drain stall minutes": ({"drain_stall_minutes": 4}, "holdfast.drain_stall_minutes = 4: must be an integer from 5 to 1440"),
    "drain stall forecast factor": ({"drain_stall_forecast_factor": 1.0}, "holdfast.drain_stall_forecast_factor = 1.0: must be a number from 1.5 to 20.0"),
    "on delete while engaged": ({"on_delete_while_engaged": "keep"}, "holdfast.on_delete_while_engaged = \"keep\": must be one of refuse, restore"),
    "max resources": ({"max_resources": 0}, "holdfast.max_resources = 0: must be an integer from 1 to 100000"),
    "signal ttl": ({"signal_ttl_hours": 721}, "holdfast.signal_ttl_hours = 721: must be an integer from 1 to 720"),
    "notification email": ({"notification_email": "nobody"}, 'holdfast.notification_email = "nobody": must be an e-mail address or null'),
    "log retention": (
        {"log_retention_days": 10},
        f"holdfast.log_retention_days = 10: must be one of {', '.join(map(str, LOG_RETENTION_DAYS))}",
    ),
    "org: OU id of the wrong shape": (
        {**ORG, "org_organizational_unit_ids": ["ou-12"]},
        'holdfast.org_organizational_unit_ids = "ou-12": each must be an OU id such as ou-ab12-cd345678, or a root id such as r-ab12',
    ),
    "org: an account id is not an OU": (
        {**ORG, "org_organizational_unit_ids": ["123456789012"]},
        'holdfast.org_organizational_unit_ids = "123456789012": each must be an OU id such as ou-ab12-cd345678, or a root id such as r-ab12',
    ),
    "org: unknown region": (
        {**ORG, "org_regions": ["us-east-1", "eu-central-9"]},
        f'holdfast.org_regions = "eu-central-9": unknown region; the eu-central regions are eu-central-1, eu-central-2 {KNOWN}',
    ),
    "org: a typo in a region": (
        {**ORG, "org_regions": ["us-est-1"]},
        f'holdfast.org_regions = "us-est-1": unknown region; did you mean \'us-east-1\' or \'us-west-1\'? {KNOWN}',
    ),
    "org: a region is not a zone": (
        {**ORG, "org_regions": ["us-east-1a"]},
        f'holdfast.org_regions = "us-east-1a": unknown region; that is an Availability Zone of \'us-east-1\' {KNOWN}',
    ),
    "org: an unknown region with nothing close": (
        {**ORG, "org_regions": ["mars"]},
        f'holdfast.org_regions = "mars": unknown region {KNOWN}',
    ),
    "org: admin account of 11 digits": (
        {**ORG, "org_admin_account": "11111111111"},
        'holdfast.org_admin_account = "11111111111": must be an AWS account id of 12 digits, or null',
    ),
    "org: admin account as a number": (
        {**ORG, "org_admin_account": 111111111111},
        "holdfast.org_admin_account = 111111111111: must be an AWS account id of 12 digits, or null",
    ),
    "org: an admin principal of another account": (
        {**ORG, "org_admin_principals": ["arn:aws:iam::222222222222:role/oncall"]},
        'holdfast.org_admin_principals = ["arn:aws:iam::222222222222:role/oncall"]: each must be a role of '
        "org_admin_account (111111111111); arn:aws:iam::222222222222:role/oncall is not",
    ),
    "org: an admin principal that is no role ARN": (
        {**ORG, "org_admin_principals": ["arn:aws:iam::111111111111:user/alice"]},
        'holdfast.org_admin_principals = "arn:aws:iam::111111111111:user/alice": each must be an IAM role ARN such as '
        "arn:aws:iam::111122223333:role/oncall",
    ),
    "org: an admin principal tag without a value": (
        {**ORG, "org_admin_principal_tag": "oncall"},
        'holdfast.org_admin_principal_tag = "oncall": must be a tag `KEY=VALUE`, key 1–128 and value 0–256 characters '
        "of letters, digits, spaces and _ . : / = + - @",
    ),
    "org: an admin principal tag beside named principals": (
        {**ORG, "org_admin_principals": ["arn:aws:iam::111111111111:role/oncall"], "org_admin_principal_tag": "a=b"},
        'holdfast.org_admin_principal_tag = "a=b": must be null when org_admin_principals names roles: one or the other',
    ),
    "org: organization id": ({**ORG, "org_id": "ou-ab12"}, 'holdfast.org_id = "ou-ab12": must be an organization id such as o-a1b2c3d4e5, or null'),
    "org: call as": ({**ORG, "org_call_as": "ADMIN"}, 'holdfast.org_call_as = "ADMIN": must be one of SELF, DELEGATED_ADMIN'),
    "org: concurrency": ({**ORG, "org_max_concurrent_percentage": 0}, "holdfast.org_max_concurrent_percentage = 0: must be an integer from 1 to 100"),
    "org: failure tolerance": (
        {**ORG, "org_failure_tolerance_percentage": 101},
        "holdfast.org_failure_tolerance_percentage = 101: must be an integer from 0 to 100",
    ),
    "org: retain is a boolean": (
        {**ORG, "org_retain_stacks_on_account_removal": "yes"},
        'holdfast.org_retain_stacks_on_account_removal = "yes": must be true or false',
    ),
    "org: an override's value is checked with the whole settings": (
        {**ORG, "org_overrides": [{"name": "prod", "organizational_unit_ids": ["ou-ab12-aaaaaaaa"], "settings": {"mode": "on"}}]},
        'holdfast.org_overrides[0].settings.mode = "on": must be one of auto, recommend, off',
    ),
    "org: an override's settings must make a valid whole": (
        {**ORG, "org_overrides": [{"name": "prod", "accounts": ["222222222222"],
                                   "settings": {"recover_success_share": 0.5, "detect_failure_share": 0.1}}]},
        "holdfast.org_overrides[0].settings.recover_success_share = 0.5: must be at least 1 - detect_failure_share (0.9), "
        "so that recovery needs fewer failures than impairment",
    ),
    "org: an override names OUs or accounts, not both": (
        {**ORG, "org_overrides": [{"name": "prod", "organizational_unit_ids": ["ou-ab12-aaaaaaaa"], "accounts": ["222222222222"],
                                   "settings": {"mode": "recommend"}}]},
        'holdfast.org_overrides[0] = {"name": "prod", "organizational_unit_ids": ["ou-ab12-aaaaaaaa"], "accounts": ["222222222222"], '
        '"settings": {"mode": "recommend"}}: must name either organizational_unit_ids or accounts (one of them)',
    ),
    "org: an OU gets one set of settings": (
        {**ORG, "org_overrides": [{"name": "prod", "organizational_unit_ids": ["ou-ab12-cd345678"], "settings": {"mode": "recommend"}}]},
        'holdfast.org_overrides[0].organizational_unit_ids = "ou-ab12-cd345678": is named in org_organizational_unit_ids '
        "already: an OU gets one set of settings",
    ),
    "org: an account gets one set of settings": (
        {**ORG, "org_overrides": [{"name": "a", "accounts": ["222222222222"], "settings": {"mode": "auto"}},
                                  {"name": "b", "accounts": ["222222222222"], "settings": {"mode": "off"}}]},
        'holdfast.org_overrides[1].accounts = "222222222222": is named in org_overrides[0] already: an account gets one set of settings',
    ),
    "org: an override that changes nothing": (
        {**ORG, "org_overrides": [{"name": "same", "accounts": ["222222222222"], "settings": {"mode": "recommend"}}]},
        'holdfast.org_overrides[0].settings = {"mode": "recommend"}: gives the same settings as the base settings: name its OUs or accounts there',
    ),
    "org: an override may not move the StackSets": (
        {**ORG, "org_overrides": [{"name": "prod", "accounts": ["222222222222"], "settings": {"org_regions": ["us-east-1"]}}]},
        'holdfast.org_overrides[0].settings.org_regions = ["us-east-1"]: is the organization\'s own (where and how the '
        "StackSets deploy): set it at the top level",
    ),
    "org: an override's name": (
        {**ORG, "org_overrides": [{"name": "prod env", "accounts": ["222222222222"], "settings": {"mode": "off"}}]},
        'holdfast.org_overrides[0].name = "prod env": must be letters, digits and hyphens, up to 32, a letter first',
    ),
    "org: overrides need OUs": (
        {"org_overrides": [{"name": "prod", "accounts": ["222222222222"], "settings": {"mode": "off"}}]},
        "holdfast.org_organizational_unit_ids = []: must name at least one OU (or the root) when org_overrides is set",
    ),
    "readiness every 1 to 24 hours": ({"readiness_hours": 0}, "holdfast.readiness_hours = 0: must be an integer from 1 to 24"),
    "game day: alarm name": ({"game_day_stop_alarm": ""}, 'holdfast.game_day_stop_alarm = "": must be a CloudWatch alarm name (1–255 printable characters) or null'),
    "game day: duration": ({"game_day_stop_alarm": "slo", "game_day_duration_minutes": 181}, "holdfast.game_day_duration_minutes = 181: must be an integer from 1 to 180"),
    "game day: lambda errors is a boolean": (
        {"game_day_stop_alarm": "slo", "game_day_lambda_errors": 1},
        "holdfast.game_day_lambda_errors = 1: must be true or false",
    ),
    "game day: bucket name": (
        {"game_day_stop_alarm": "slo", "game_day_lambda_config_bucket": "My_Bucket"},
        'holdfast.game_day_lambda_config_bucket = "My_Bucket": must be an S3 bucket name (3–63 lowercase letters, digits, dots, hyphens), or null',
    ),
    "ledger table name": ({"ledger_table_name": "a b"}, 'holdfast.ledger_table_name = "a b": must be a DynamoDB table name (3–255 letters, digits, _ . -), or null'),
    "game day: zones are zones, not a region": (
        {"game_day_stop_alarm": "slo", "game_day_availability_zones": ["us-east-1"]},
        'holdfast.game_day_availability_zones = "us-east-1": each must be an Availability Zone name such as us-east-1a or an ID such as use1-az1',
    ),
    "org: game day alarms by account": (
        {**ORG, "org_game_day_stop_alarms": {"1234": "slo"}},
        'holdfast.org_game_day_stop_alarms = {"1234": "slo"}: must be an object of {"ACCOUNT": "alarm name"}, '
        'ACCOUNT 12 digits, each alarm 1–255 printable characters',
    ),
    # across keys
    "org: member game days without OUs": (
        {"org_game_day_stop_alarms": {"123456789012": "slo"}},
        "holdfast.org_organizational_unit_ids = []: must name at least one OU (or the root) when org_game_day_stop_alarms is set",
    ),
    "org: regions without OUs": (
        {"org_regions": ["us-east-1"]},
        "holdfast.org_organizational_unit_ids = []: must name at least one OU (or the root) when org_regions is set",
    ),
    "org: OUs without regions": (
        {**ORG, "org_regions": []},
        "holdfast.org_regions = []: must name at least one region when org_organizational_unit_ids is set",
    ),
    "org: regions of two partitions": (
        {**ORG, "org_regions": ["us-east-1", "us-gov-west-1"]},
        'holdfast.org_regions = ["us-east-1", "us-gov-west-1"]: must all be in one partition, not aws, aws-us-gov',
    ),
    "org: OUs without the admin account": (
        {k: v for k, v in ORG.items() if k != "org_admin_account"},
        "holdfast.org_admin_account = null: required when org_organizational_unit_ids is set: the account that deploys the StackSet",
    ),
    "org: OUs without the organization id": (
        {k: v for k, v in ORG.items() if k != "org_id"},
        "holdfast.org_id = null: required when org_organizational_unit_ids is set: the organization's id (o-…)",
    ),
    "game day: settings without the stop alarm": (
        {"game_day_duration_minutes": 30},
        "holdfast.game_day_stop_alarm = null: required when game_day_duration_minutes is set: "
        "FIS needs a stop condition, the alarm that ends the rehearsal when it hurts",
    ),
    "game day: lambda errors without the extension's bucket": (
        {"game_day_stop_alarm": "slo", "game_day_lambda_errors": True},
        "holdfast.game_day_lambda_config_bucket = null: required when game_day_lambda_errors is true: "
        "the FIS Lambda extension's configuration bucket",
    ),
    "dns failover count at least routing count": (
        {"nlb_dns_failover_minimum_healthy_count": 1, "nlb_routing_minimum_healthy_count": 2},
        "holdfast.nlb_dns_failover_minimum_healthy_count = 1: must be `off` or at least nlb_routing_minimum_healthy_count (2)",
    ),
    "dns failover percentage at least routing percentage": (
        {"nlb_dns_failover_minimum_healthy_percentage": 40},
        "holdfast.nlb_dns_failover_minimum_healthy_percentage = 40: must be `off` or at least nlb_routing_minimum_healthy_percentage (50)",
    ),
    # the object itself
    "a typo is named, with the key it probably meant": (
        {"esm_flor": 3},
        "holdfast.esm_flor = 3: unknown key; did you mean 'esm_floor'?",
    ),
    "a key in another spelling is named, with the key it meant": (
        {"Hold-Minutes": 3},
        "holdfast.Hold-Minutes = 3: unknown key; did you mean 'hold_minutes'?",
    ),
}


@pytest.mark.parametrize("raw, message", RULES.values(), ids=RULES.keys())
def test_a_bad_value_fails_with_key_value_and_what_is_allowed(raw, message):
    with pytest.raises(SettingsError) as raised:
        Settings.from_mapping(raw)
    assert str(raised.value) == message


def test_every_key_has_a_rule_with_a_bad_value():
    """A key added to Settings without a case here would slip through unchecked."""
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert all(isinstance(f.metadata.get("rule"), Rule) and f.metadata.get("doc") for f in dataclasses.fields(Settings))
    assert fields - {key for raw, _ in RULES.values() for key in raw} == set()


def test_an_unknown_key_with_nothing_close_lists_the_known_keys():
    with pytest.raises(SettingsError, match=r"^holdfast\.colour = 1: unknown key; known keys: asg_processes, .*tick_budget_seconds$"):
        Settings.from_mapping({"colour": 1})


def test_settings_must_be_an_object():
    with pytest.raises(SettingsError, match=r"^holdfast = \[1, 2\]: must be a JSON object of settings$"):
        Settings.from_mapping([1, 2])


def test_settings_json_must_parse():
    with pytest.raises(SettingsError, match=r'^holdfast = "\{bad": is not valid JSON \(Expecting property name'):
        Settings.from_json("{bad")


def test_off_is_accepted_where_it_is_allowed_and_ec2_is_always_watched():
    s = Settings.from_mapping(
        {"nlb_dns_failover_minimum_healthy_count": "off", "nlb_routing_minimum_healthy_percentage": "off", "health_services": ["DYNAMODB"]}
    )
    assert (s.nlb_dns_failover_minimum_healthy_count, s.nlb_routing_minimum_healthy_percentage) == ("off", "off")
    assert s.health_services == ("EC2", "DYNAMODB")


def test_a_whole_org_is_accepted():
    settings = Settings.from_mapping({**ORG, "org_organizational_unit_ids": ["ou-ab12-cd345678", "r-ab12"]})
    assert settings.org_regions == ("us-east-1", "eu-west-1")
    assert settings.org_organizational_unit_ids == ("ou-ab12-cd345678", "r-ab12")
    assert Settings.from_json(settings.to_json()) == settings


# The rules whose every key is a field: what a construct user can pass to Settings(...).
TYPED = {name: (raw, message) for name, (raw, message) in RULES.items()
         if set(raw) <= {f.name for f in dataclasses.fields(Settings)}}


def _python(value):
    """A JSON value as a Python user writes it against the annotations: tuples for lists,
    Target for a target."""
    if isinstance(value, list):
        return tuple(_python(v) for v in value)
    if isinstance(value, dict) and set(value) == {"account", "region"}:
        return Target(**value)
    return value


@pytest.mark.parametrize("raw, message", TYPED.values(), ids=TYPED.keys())
def test_settings_made_in_python_fail_as_from_mapping_does(raw, message):
    """Settings(...) is what an IDE offers a construct user: it is checked on construction,
    with from_mapping's message, whether lists come as lists or as tuples."""
    with pytest.raises(SettingsError) as as_json:
        Settings(**raw)
    assert str(as_json.value) == message
    typed = {key: _python(value) for key, value in raw.items()}
    with pytest.raises(SettingsError) as as_python:
        Settings(**typed)
    assert str(as_python.value) == message


def test_every_per_key_rule_is_checked_in_python_too():
    assert set(RULES) - set(TYPED) == {
        "cap steps are gone, said so",
        "a typo is named, with the key it probably meant",
        "a key in another spelling is named, with the key it meant",
    }
    assert set(_REMOVED) == {"esm_cap_steps"}


def test_settings_made_in_python_are_canonical():
    """Typed values come out as from_mapping makes them, so both compare equal."""
    made = Settings(targets=[{"account": "123456789012", "region": "us-east-1"}], gating_alarms=["slo"],
                    drain_raise_fraction=1, drain_downstream_alarms={"*": ["db"]})
    assert made == Settings.from_mapping(made.to_mapping())
    assert made.targets == (Target("123456789012", "us-east-1"),) and made.gating_alarms == ("slo",)
    assert made.drain_raise_fraction == 1.0 and isinstance(made.drain_raise_fraction, float)
    assert dataclasses.replace(made, hold_minutes=5).hold_minutes == 5
    with pytest.raises(SettingsError, match=r"^holdfast\.hold_minutes = 0: must be an integer from 1 to 1440$"):
        dataclasses.replace(made, hold_minutes=0)
