"""Holdfast's settings: typed, frozen, documented, validated.

Settings come from the `holdfast` object in `cdk.json` context. The stack validates
them at synth and hands them to the functions as JSON in the HOLDFAST_SETTINGS
environment variable; the CLI takes the same object from a file. Every key has a
default, every bad value fails with a message that names the key, the value and what
is allowed, and an unknown key (a typo) is an error, never silently ignored.

Each setting is declared once, `setting(default, rule, doc)`: the rule is both the check
(run by `__post_init__`, so `Settings(...)` in Python is checked as strictly as JSON
through `from_mapping`) and the "allowed" column of docs/settings.md.

Pure: no boto3, no clock. `python -m holdfast.settings` prints the settings table;
dev/settings_page.py writes docs/settings.md around it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from holdfast.core.kinds.asg import PROCESSES as ASG_PROCESSES
from holdfast.core.model import MODES, RECOMMEND
from holdfast.core.signals import PROBE_API_CALLS

CONTEXT_KEY = "holdfast"
ENV_VAR = "HOLDFAST_SETTINGS"

# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
OFF = "off"

# Regions per partition, as botocore 1.44 knows them (tests/settings checks this table
# against botocore's endpoint data, so a new region shows up as a failing test, not as
# "unknown region" at a user's synth). StackSets deploy within one partition.
PARTITION_REGIONS = {
    "aws": (
        "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
        "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
        "ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1",
        "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3",
        "il-central-1", "me-central-1", "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2",
        "us-west-1", "us-west-2",
    ),
    "aws-cn": ("cn-north-1", "cn-northwest-1"),
    "aws-us-gov": ("us-gov-east-1", "us-gov-west-1"),
}
KNOWN_REGIONS = {region: partition for partition, regions in PARTITION_REGIONS.items() for region in regions}
ORG_CALL_AS = ("SELF", "DELEGATED_ADMIN")

_ACCOUNT = re.compile(r"^\d{12}$")
# Organizations' own patterns (CreateOrganizationalUnit / DescribeOrganization): an OU id,
# or the root id, which StackSets also accepts as a deployment target.
_OU = re.compile(r"^(ou-[0-9a-z]{4,32}-[a-z0-9]{8,32}|r-[0-9a-z]{4,32})$")
_ORG_ID = re.compile(r"^o-[a-z0-9]{10,32}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_TABLE = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TAG_KEY = re.compile(r"^[\w.:/=+\-@ ]{1,128}$")
_TAG_VALUE = re.compile(r"^[\w.:/=+\-@ ]{0,256}$")
# An IAM role ARN (IAM's role name and path characters).
_ROLE_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):iam::(\d{12}):role/([\w+=,.@/-]{1,512})$")


class SettingsError(ValueError):
    """A setting is wrong. The message names the key, the value and what is allowed."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key = key
        self.value = value
        self.allowed = allowed
        where = f"{CONTEXT_KEY}.{key}" if key else CONTEXT_KEY
        super().__init__(f"{where} = {json.dumps(value, default=str)}: {allowed}")


@dataclass(frozen=True)
class Target:
    """One deployment target: an account and a region."""

    account: str
    region: str


@dataclass(frozen=True)
class OrgOverride:
    """Settings for some of the organization's accounts: the OUs or the accounts named
    get `changes` over the base settings, from a StackSet of their own (`Holdfast-<name>`)."""

    name: str
    organizational_unit_ids: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    changes_json: str = "{}"   # the keys it changes, canonical JSON (the dataclass stays frozen and hashable)

    @property
    def changes(self) -> dict[str, Any]:
        return json.loads(self.changes_json)

    def to_mapping(self) -> dict[str, Any]:
        where = {"accounts": list(self.accounts)} if self.accounts else {"organizational_unit_ids": list(self.organizational_unit_ids)}
        return {"name": self.name, **where, "settings": self.changes}


# ---- what each setting accepts -----------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """What one setting accepts, declared next to the setting (`setting(default, rule, doc)`).

    `check(key, value)` returns the value in its canonical form (tuples for lists, float
    for numbers) or raises SettingsError with the rule's message; `summary` is the
    settings table's "allowed" column (docs/settings.md). Both come from the same arguments, so the range a
    user reads is the range the check enforces.
    """

    summary: str
    check: Callable[[str, Any], Any]

    def __call__(self, key: str, value: Any) -> Any:
        return self.check(key, value)


def _span(lo: float, hi: float) -> str:
    return f"{lo:g}–{hi:g}"


def integer(lo: int, hi: int, *, off: bool = False) -> Rule:
    allowed = f"must be {'`off` or ' if off else ''}an integer from {lo} to {hi}"

    def check(key: str, value: Any) -> int | str:
        if off and value == OFF:
            return OFF
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise SettingsError(key, value, allowed)
        return value

    return Rule(f"{'`off` or ' if off else ''}integer {_span(lo, hi)}", check)


def number(lo: float, hi: float, *, hi_open: bool = False) -> Rule:
    allowed = f"must be a number from {lo} to {hi}{' (exclusive)' if hi_open else ''}"

    def check(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(key, value, allowed)
        if not lo <= value <= hi or (hi_open and value >= hi):
            raise SettingsError(key, value, allowed)
        return float(value)

    return Rule(f"number {lo:g} to {'below ' if hi_open else ''}{hi:g}", check)


def one_of(options: tuple) -> Rule:
    def check(key: str, value: Any):
        if value not in options:
            raise SettingsError(key, value, f"must be one of {', '.join(map(str, options))}")
        return value

    return Rule(f"one of {', '.join(f'`{o}`' for o in options)}", check)


def str_list(item: Rule | None = None, *, allowed: str = "must be a list of strings", min_len: int = 0,
             summary: str | None = None) -> Rule:
    def check(key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise SettingsError(key, value, allowed)
        if len(value) < min_len:
            raise SettingsError(key, value, f"{allowed}, at least {min_len}")
        if len(set(value)) != len(value):
            raise SettingsError(key, value, f"{allowed}, without duplicates")
        if item:
            for entry in value:
                item(key, entry)
        return tuple(value)

    if summary is None:
        summary = f"list, each {item.summary}" if item else "list of names"
        summary += f", at least {min_len}" if min_len else ""
    return Rule(summary, check)


def pattern(regex: re.Pattern, allowed: str, *, summary: str) -> Rule:
    """A string matching `regex`, or null."""

    def check(key: str, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not regex.match(value):
            raise SettingsError(key, value, allowed)
        return value

    return Rule(f"{summary} or null", check)


def _selector(key: str, value: Any) -> str:
    allowed = "must be a tag `KEY=VALUE`, key 1–128 and value 0–256 characters of letters, digits, spaces and _ . : / = + - @"
    if not isinstance(value, str) or "=" not in value:
        raise SettingsError(key, value, allowed)
    tag_key, tag_value = value.split("=", 1)
    if not _TAG_KEY.match(tag_key) or not _TAG_VALUE.match(tag_value) or tag_key.lower().startswith("aws:"):
        raise SettingsError(key, value, allowed)
    return value


def _targets(key: str, value: Any) -> tuple[Target, ...]:
    allowed = 'must be a list of {"account": 12 digits, "region": e.g. "us-east-1"}, without duplicates'
    if not isinstance(value, (list, tuple)):
        raise SettingsError(key, value, allowed)
    targets = []
    for item in value:
        if isinstance(item, Target):   # Settings(targets=(Target(...),)) in Python
            item = dataclasses.asdict(item)
        if (
            not isinstance(item, Mapping)
            or set(item) != {"account", "region"}
            or not isinstance(item["account"], str)
            or not _ACCOUNT.match(item["account"])
            or not isinstance(item["region"], str)
        ):
            raise SettingsError(key, item, allowed)
        _region(key, item["region"])   # a region that exists, with a hint when it does not
        targets.append(Target(item["account"], item["region"]))
    if len(set(targets)) != len(targets):
        raise SettingsError(key, [dataclasses.asdict(t) for t in targets], allowed)
    return tuple(targets)


def _region(key: str, region: str) -> None:
    if region not in KNOWN_REGIONS:
        siblings = sorted(r for r in KNOWN_REGIONS if r.rsplit("-", 1)[0] == region.rsplit("-", 1)[0])
        close = sorted(difflib.get_close_matches(region, KNOWN_REGIONS, n=2, cutoff=0.8))
        if region[:-1] in KNOWN_REGIONS and region[-1:].isalpha():
            hint = f"; that is an Availability Zone of {region[:-1]!r}"
        elif siblings:
            hint = f"; the {region.rsplit('-', 1)[0]} regions are {', '.join(siblings)}"
        elif close:
            hint = f"; did you mean {' or '.join(map(repr, close))}?"
        else:
            hint = ""
        raise SettingsError(key, region, f"unknown region{hint} (known: the regions of the aws, aws-cn and aws-us-gov partitions)")


def _ou(key: str, ou: str) -> None:
    if not _OU.match(ou):
        raise SettingsError(key, ou, "each must be an OU id such as ou-ab12-cd345678, or a root id such as r-ab12")


def _role_arn(key: str, arn: str) -> None:
    if not _ROLE_ARN.match(arn):
        raise SettingsError(key, arn, "each must be an IAM role ARN such as arn:aws:iam::111122223333:role/oncall")


def _principal_tag(key: str, value: Any) -> str | None:
    if value is None:
        return None
    return _selector(key, value)


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(key, value, "must be true or false")
    return value


def _alarm_name(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 255 or not value.isprintable():
        raise SettingsError(key, value, "must be a CloudWatch alarm name (1–255 printable characters) or null")
    return value


def _alarm_map(key: str, value: Any) -> dict[str, tuple[str, ...]]:
    allowed = ('must be an object of {"KEY": ["alarm name", ...]}, KEY a function name, queue name, '
               'mapping UUID or "*", each list without duplicates')
    if not isinstance(value, Mapping):
        raise SettingsError(key, value, allowed)
    out = {}
    for name, alarms in value.items():
        if not isinstance(name, str) or not name or not isinstance(alarms, (list, tuple)) or not alarms:
            raise SettingsError(key, value, allowed)
        if not all(isinstance(a, str) and 0 < len(a) <= 255 for a in alarms) or len(set(alarms)) != len(alarms):
            raise SettingsError(key, value, allowed)
        out[name] = tuple(alarms)
    return out


_QUEUE_ARN = re.compile(r"^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$")


def _queue_arn(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _QUEUE_ARN.match(value):
        raise SettingsError(key, value, "must be an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME) or null")
    return value


def _email(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _EMAIL.match(value):
        raise SettingsError(key, value, "must be an e-mail address or null")
    return value


def _health_service(key: str, service: str) -> None:
    # EventBridge matches detail.service exactly, and AWS Health spells services in capitals.
    if not re.match(r"^[A-Z0-9_]+$", service):
        raise SettingsError(key, service, "each service must be an AWS Health service code in capitals, such as EC2 or DYNAMODB")


def _zone(key: str, zone: str) -> None:
    # A zone name is its region's name and a letter (us-east-1a, us-west-2-lax-1a for a
    # Local Zone); a zone ID is a region code, "-az" and a number (use1-az1).
    if not re.match(r"^([a-z]{2}(-[a-z0-9]+)+-\d+[a-z]|[a-z]{2,4}\d-[a-z0-9]+-az\d+|[a-z]{2,4}\d-az\d+)$", zone):
        raise SettingsError(key, zone, "each must be an Availability Zone name such as us-east-1a or an ID such as use1-az1")


def _host(key: str, host: str) -> None:
    if not re.match(r"^[A-Za-z0-9{}.\-]+$", host) or "." not in host:
        raise SettingsError(key, host, "each endpoint must be a host name such as dynamodb.{region}.amazonaws.com")


_OVERRIDE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")


def _org_overrides(key: str, value: Any) -> tuple[OrgOverride, ...]:
    """The shape of each override; what its settings mean is checked with the whole (_check_org)."""
    allowed = ('must be a list of {"name", "organizational_unit_ids" or "accounts", "settings"}: '
               "a name of letters, digits and hyphens (up to 32, a letter first), OU ids or 12-digit account ids, "
               "and an object of settings other than the org_ keys")
    if isinstance(value, tuple):   # Settings(org_overrides=(OrgOverride(...),)) in Python
        value = [o.to_mapping() if isinstance(o, OrgOverride) else o for o in value]
    if not isinstance(value, list):
        raise SettingsError(key, value, allowed)
    out = []
    for i, item in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(item, Mapping) or "name" not in item or "settings" not in item or \
                set(item) - {"name", "organizational_unit_ids", "accounts", "settings"}:
            raise SettingsError(where, item, allowed)
        if not isinstance(item["name"], str) or not _OVERRIDE_NAME.match(item["name"]):
            raise SettingsError(f"{where}.name", item["name"], "must be letters, digits and hyphens, up to 32, a letter first")
        ous, accounts = item.get("organizational_unit_ids"), item.get("accounts")
        if (ous is None) == (accounts is None):
            raise SettingsError(where, item, "must name either organizational_unit_ids or accounts (one of them)")
        if ous is not None:
            ous = str_list(OU, allowed="must be a non-empty list of OU ids (ou-…) or root ids (r-…)", min_len=1)(
                f"{where}.organizational_unit_ids", ous)
        if accounts is not None:
            if not isinstance(accounts, (list, tuple)) or not accounts or \
                    not all(isinstance(a, str) and _ACCOUNT.match(a) for a in accounts) or len(set(accounts)) != len(accounts):
                raise SettingsError(f"{where}.accounts", accounts, "must be a non-empty list of 12-digit account ids, without duplicates")
        changes = item["settings"]
        if not isinstance(changes, Mapping) or not changes:
            raise SettingsError(f"{where}.settings", changes, "must be an object with at least one setting")
        for name in changes:
            if str(name).startswith("org_") or name == "targets":
                raise SettingsError(f"{where}.settings.{name}", changes[name],
                                    "is the organization's own (where and how the StackSets deploy): set it at the top level")
        out.append(OrgOverride(item["name"], tuple(ous or ()), tuple(accounts or ()),
                               json.dumps(changes, sort_keys=True, separators=(",", ":"))))
    return tuple(out)


def _account_alarms(key: str, value: Any) -> dict[str, str]:
    allowed = 'must be an object of {"ACCOUNT": "alarm name"}, ACCOUNT 12 digits, each alarm 1–255 printable characters'
    if not isinstance(value, Mapping):
        raise SettingsError(key, value, allowed)
    for account, alarm in value.items():
        if not isinstance(account, str) or not _ACCOUNT.match(account) or not isinstance(alarm, str) \
                or not 1 <= len(alarm) <= 255 or not alarm.isprintable():
            raise SettingsError(key, value, allowed)
    return dict(value)


SELECTOR = Rule("tag `KEY=VALUE`", _selector)
TARGETS = Rule('list of `{"account", "region"}`', _targets)
ORG_OVERRIDES = Rule('list of `{"name", "organizational_unit_ids" or "accounts", "settings"}`', _org_overrides)
ACCOUNT_ALARMS = Rule('`{"ACCOUNT": "alarm"}`', _account_alarms)
ALARM_MAP = Rule('`{"KEY": ["alarm", ...]}`', _alarm_map)
QUEUE_ARN = Rule("SQS queue ARN or null", _queue_arn)
EMAIL = Rule("e-mail address or null", _email)
BOOLEAN = Rule("`true` or `false`", _bool)
ALARM_NAME = Rule("alarm name or null", _alarm_name)
HEALTH_SERVICE = Rule("AWS Health service code (capitals)", _health_service)
HOST = Rule("host name", _host)
ZONE = Rule("zone name or ID", _zone)
OU = Rule("OU or root id", _ou)
ROLE_ARN = Rule("IAM role ARN", _role_arn)
PRINCIPAL_TAG = Rule("principal tag `KEY=VALUE` or null", _principal_tag)
REGION = Rule("region", _region)
# The services an API probe can call (holdfast.core.signals.PROBE_API_CALLS).
PROBE_API_SERVICES = tuple(PROBE_API_CALLS)


def setting(default: Any, rule: Rule, doc: str) -> Any:
    """One setting: its default, what it accepts and what it means, in one place. The
    check (on every construction), the error message and the settings page's row derive from it."""
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"doc": doc, "rule": rule})
    return field(default=default, metadata={"doc": doc, "rule": rule})


# Keys that were settings once: named with what replaced them, not as a typo.
_REMOVED = {
    "esm_cap_steps": (
        "was removed: the drain no longer raises caps along a ladder but with a feedback controller per mapping; "
        "see the drain_* settings"),
}


@dataclass(frozen=True)
class Settings:
    """Every Holdfast setting, with its default. Validated however it is made:
    `Settings(mode="recommend")` in Python raises the same SettingsError as
    `Settings.from_mapping({"mode": "recomend"})` from cdk.json context."""

    selector: str = setting(
        "holdfast:protect=true",
        SELECTOR,
        "Opt-in tag `KEY=VALUE`. Holdfast touches only resources that carry it."
    )
    mode: str = setting(
        RECOMMEND,
        one_of(MODES),
        "`auto` acts; `recommend` decides and reports but changes nothing; `off` does nothing. The default is "
        "`recommend`, so no deploy changes a resource until you choose `auto`; synth prints each stack's mode."
    )
    targets: tuple[Target, ...] = setting(
        (),
        TARGETS,
        "Deployment targets, a list of `{\"account\": \"123456789012\", \"region\": \"us-east-1\"}`. One stack each; "
        "empty means the CLI's default environment."
    )
    asg_processes: tuple[str, ...] = setting(
        ("ReplaceUnhealthy", "AZRebalance"),
        str_list(one_of(ASG_PROCESSES), allowed=f"must be a list of Auto Scaling processes ({', '.join(ASG_PROCESSES)})", min_len=1),
        "Auto Scaling processes suspended while engaged."
    )
    esm_floor: int = setting(
        2,
        integer(2, 1000),
        "SQS event source mapping MaximumConcurrency while engaged. An owner cap below it stays. A mapping in "
        "provisioned mode is held at the MaximumPollers this cap is written as (10 concurrent invokes a poller, "
        "rounded down, at least 2)."
    )
    hold_minutes: int = setting(
        10,
        integer(1, 1440),
        "Hold after each recovery step before the next."
    )
    capacity_hold_minutes: int = setting(
        30,
        integer(1, 1440),
        "Launches must be normal this long before capacity-removing automation resumes."
    )
    capacity_wave_groups_percent: int = setting(
        25,
        integer(1, 100),
        "The capacity stage resumes Auto Scaling groups in waves: at most this share of the stage's groups a wave "
        "(at least one). Resuming ReplaceUnhealthy terminates every instance marked unhealthy while it was suspended."
    )
    capacity_wave_instances_percent: int = setting(
        25,
        integer(1, 100),
        "At most this share of the instances left to replace (marked unhealthy and not healthy now) a wave; a "
        "wave always takes at least one group."
    )
    capacity_wave_minutes: int = setting(
        5,
        integer(1, 1440),
        "Hold between the capacity stage's waves, and after a step back (a resumed group whose replacements fail "
        "to launch is held again)."
    )
    async_max_event_age_seconds: int = setting(
        900,
        integer(60, 21600),
        "Lambda async MaximumEventAgeInSeconds while engaged; never raised."
    )
    async_max_retry_attempts: int = setting(
        1,
        integer(0, 2),
        "Lambda async MaximumRetryAttempts while engaged; never raised."
    )
    nlb_dns_failover_minimum_healthy_count: int | str = setting(
        OFF,
        integer(1, 1000, off=True),
        "NLB `dns_failover.minimum_healthy_targets.count` while engaged. `off` keeps zones in DNS."
    )
    nlb_dns_failover_minimum_healthy_percentage: int | str = setting(
        OFF,
        integer(1, 100, off=True),
        "NLB `dns_failover.minimum_healthy_targets.percentage` while engaged."
    )
    nlb_routing_minimum_healthy_count: int = setting(
        1,
        integer(1, 1000),
        "NLB `unhealthy_state_routing.minimum_healthy_targets.count` while engaged."
    )
    nlb_routing_minimum_healthy_percentage: int | str = setting(
        50,
        integer(1, 100, off=True),
        "NLB `unhealthy_state_routing.minimum_healthy_targets.percentage` while engaged. Below it, traffic "
        "goes to all targets."
    )
    gating_alarms: tuple[str, ...] = setting(
        (),
        str_list(allowed="must be a list of CloudWatch alarm names"),
        "CloudWatch alarm names that must all be OK before a stage advances."
    )
    drain_downstream_alarms: Mapping[str, tuple[str, ...]] = setting(
        {},
        ALARM_MAP,
        "Per mapping, the alarms on what its consumer writes to (latency or error SLOs of its database): "
        "`{\"KEY\": [\"alarm\", ...]}`, KEY a function name, queue name, mapping UUID or `*` (every mapping). An "
        "alarm in ALARM cuts the cap. Also read from the tag `holdfast:downstream-alarms` (names separated by "
        "spaces) on the mapping or its function."
    )
    drain_warning_alarms: Mapping[str, tuple[str, ...]] = setting(
        {},
        ALARM_MAP,
        "As `drain_downstream_alarms`, for warnings (latency approaching the SLO): in ALARM they stop raises, "
        "never cut. Tag `holdfast:downstream-warnings`."
    )
    drain_raise_fraction: float = setting(
        0.125,
        number(0.01, 1),
        "After the slow start (the first warning or cut), the cap rises by this share of the drain's starting cap "
        "(the consumer's pre-event concurrency) per datapoint at baseline measured at it; the slow start raises by "
        "at least as much. 1/8: near a knee one raise does not carry latency from below a warning to past the SLO "
        "in the recovery model."
    )
    drain_raise_share_of_cap: float = setting(
        0.11,
        number(0, 0.5),
        "... and at least this share of the cap in force, rounded down, so a drain far above its start is not "
        "held to a step sized for its start. 0.11: the widest raise that cannot jump from below a warning to "
        "past the SLO when they are as far apart as in the recovery model (the SLO's concurrency 1.118× the "
        "warning's)."
    )
    drain_start_steps_above: int = setting(
        1,
        integer(0, 4),
        "The drain starts this many raise steps above the pre-event concurrency. One step from a level the "
        "downstream carried is the bound any raise keeps, and saves a raise interval where the backlog costs "
        "most (0.02–0.04 of the ratio to the lower bound in the model); two jumped a warning band."
    )
    drain_cut_factor: float = setting(
        0.7,
        number(0.1, 0.95),
        "On a downstream alarm the cap is multiplied by this, from the cap in force when the alarming "
        "datapoint was measured. 0.7 takes a cap 40 % over the knee back below it in one cut, and gives back "
        "less than halving would."
    )
    drain_caught_up_slack_seconds: int = setting(
        10,
        integer(0, 3600),
        "Caught up = the oldest message within this many seconds of its pre-event age. Small on purpose: a "
        "queue 30 s behind keeps a standing backlog, and uncapping a mapping over one next to a database near "
        "its knee collapsed it in the model."
    )
    drain_restore_after_minutes: int = setting(
        15,
        integer(0, 1440),
        "Caught up this long before the owner's original cap (often none) comes back: a hold plus the longest "
        "CloudWatch lag, so no restore rests on one late datapoint."
    )
    drain_remember_alarm_minutes: int = setting(
        30,
        integer(0, 1440),
        "After a cut, raises stop one below the cap that alarmed for this long, then probe once more: the "
        "downstream may have scaled."
    )
    drain_stale_minutes: int = setting(
        10,
        integer(1, 60),
        "A datapoint older than this is missing: the cap holds, never rises, on stale evidence. CloudWatch "
        "publishes within 1–3 minutes; 10 covers a late period or two."
    )
    drain_slow_start_factor: float = setting(
        1.75,
        number(1.1, 4),
        "While every signal of a mapping is at its baseline the cap is probed this many times higher (slow "
        "start): for one whole minute, then back to the cap judged at baseline until that minute is judged, so "
        "a knee crossed costs one datapoint; after the first warning or cut it rises additively. Past a knee the "
        "time per message grows as concurrency ÷ knee, so a probe overshoots by at most this: 1.75 keeps the "
        "recovery model's 1 s client timeout unreached (0.8 s of work takes 1.4 s, its call 0.7 s)."
    )
    drain_duration_warning_ratio: float = setting(
        1.08,
        number(1.01, 3),
        "Where the pre-event baseline ends: a minute whose time per message (Duration's sum ÷ the queue's "
        "NumberOfMessagesReceived) is at this ratio to the window's lower quartile starts the consumer's own "
        "first anomaly, and the baseline ends before it. During the drain the time per message is never judged "
        "against the baseline: how goodput answers the cap is (docs/drain.md)."
    )
    drain_duration_critical_ratio: float = setting(
        1.2,
        number(1.02, 5),
        "Kept above drain_duration_warning_ratio for settings written for earlier versions; the drain no longer "
        "reads it."
    )
    drain_timeout_warning_share: float = setting(
        0.5,
        number(0.1, 0.95),
        "The mean invocation's Duration at this share of the function's timeout is a warning, once the time per "
        "message is past the band raises are allowed in (full batches at the baseline speed are how the timeout "
        "was sized)."
    )
    drain_timeout_critical_share: float = setting(
        0.8,
        number(0.2, 1),
        "... and at this share critical (above the warning): batches are about to time out."
    )
    drain_failure_critical_share: float = setting(
        0.05,
        number(0.01, 1),
        "Messages received and not deleted (SQS NumberOfMessagesReceived against NumberOfMessagesDeleted: what "
        "ReportBatchItemFailures leaves with Errors at 0), or Errors ÷ Invocations, this far above the pre-event "
        "share is critical; a percentage point above it is a warning."
    )
    drain_warning_step_back: float = setting(
        0.05,
        number(0.01, 0.5),
        "A warning that persists (a second datapoint at the same cap) lowers the cap by this share, or, when the "
        "consumer's own minute warned, to the concurrency that carried its goodput at the baseline time per "
        "message if that is lower (never by more than drain_cut_factor); never below the concurrency the "
        "downstream carried before the event."
    )
    drain_stall_minutes: int = setting(
        30,
        integer(5, 1440),
        "A drain whose oldest-message age has not fallen for this long while behind is reported stalled (its reason in "
        "`holdfast stage`): it keeps the cap its controller judges safe and stops holding the later stages "
        "until an operator acts or the evidence clears."
    )
    drain_stall_forecast_factor: float = setting(
        3.0,
        number(1.5, 20.0),
        "A drain still behind after this many times its forecast (made once it has run drain_stall_minutes, on "
        "the throughput measured then) is reported stalled."
    )
    drain_pre_event_minutes: int = setting(
        30,
        integer(5, 1440),
        "The window before the hold from which each mapping's pre-event facts are read: ConcurrentExecutions "
        "(where the drain starts), the oldest-message age (its baseline), Errors, and the queue's rates for "
        "the forecast."
    )
    replay_messages_per_second: int = setting(
        10,
        integer(1, 500),
        "MaxNumberOfMessagesPerSecond of each replay's StartMessageMoveTask (at most 500, SQS's maximum). Low on "
        "purpose: replayed messages add to the live arrivals, and a drained consumer's spare capacity is what "
        "is left; a replay cancelled by an alarm restarts at half the rate."
    )
    replay_max_attempts: int = setting(
        3,
        integer(1, 10),
        "Starts per replay source before Holdfast gives up and leaves the messages where they are, reported. "
        "Each cancel on an alarm costs one."
    )
    replay_expired_events_to: str | None = setting(
        None,
        QUEUE_ARN,
        "Queue ARN that Holdfast's expired-events queue is replayed to (its records are Lambda's on-failure "
        "records, the event under `requestPayload`); null: not replayed, kept 14 days. The queue must carry "
        "the tag `holdfast:replay=true`. Owners' dead-letter queues opt in with that tag (on the DLQ and its "
        "source queue) and go back to their source queue."
    )
    detect_min_groups: int = setting(
        3,
        integer(1, 100),
        "Impaired needs capacity-class launch failures from at least this many groups."
    )
    detect_min_zones: int = setting(
        2,
        integer(1, 10),
        "… spanning at least this many Availability Zones."
    )
    detect_window_minutes: int = setting(
        10,
        integer(1, 120),
        "… within this many minutes."
    )
    recover_quiet_minutes: int = setting(
        15,
        integer(1, 1440),
        "Recovered needs launches, probes and health checks quiet (below) for this long."
    )
    detect_failure_share: float = setting(
        0.5,
        number(0.01, 1),
        "Impaired by launches also needs those capacity-class failures to be at least this share of the "
        "window's capacity failures and successful launches."
    )
    recover_success_share: float = setting(
        0.9,
        number(0.5, 1),
        "Recovery needs successful launches to be at least this share in every window for "
        "`recover_quiet_minutes` (failures from fewer groups or zones than impairment needs are routine and "
        "not counted), and a successful launch since the quiet began (with an AWS Health issue open: from "
        "`detect_min_groups` groups in `detect_min_zones` zones)."
    )
    drain_max_error_share: float = setting(
        0.05,
        number(0, 1),
        "The drain stage ends only while each watched consumer function's Errors stay at or below this share "
        "of its Invocations over the hold; each mapping's cap is its own controller's."
    )
    drain_max_throttle_share: float = setting(
        0.05,
        number(0, 1),
        "… and its Throttles at or below this share of its invocation attempts."
    )
    health_services: tuple[str, ...] = setting(
        ("EC2",),
        str_list(HEALTH_SERVICE, allowed="must be a list of AWS Health service names such as EC2"),
        "AWS Health services whose open issue in this region means impaired. EC2 is always included."
    )
    probe_endpoints: tuple[str, ...] = setting(
        ("dynamodb.{region}.amazonaws.com", "ec2.{region}.amazonaws.com"),
        str_list(HOST, allowed="must be a list of host names"),
        "Host names resolved by the DNS probe each tick; `{region}` is replaced. An empty answer is a "
        "failure."
    )
    probe_api_services: tuple[str, ...] = setting(
        ("dynamodb", "ec2"),
        str_list(one_of(PROBE_API_SERVICES), allowed=f"must be a list of services ({', '.join(PROBE_API_SERVICES)})"),
        "Services probed with one cheap read-only call each tick."
    )
    probe_timeout_seconds: float = setting(
        2.0,
        number(0.1, 10),
        "Timeout of each probe."
    )
    probe_failure_ratio: float = setting(
        0.5,
        number(0, 1, hi_open=True),
        "A probe target (one host's DNS, one service's API) failing more than this share of its results "
        "within `detect_window_minutes` means impaired."
    )
    readiness_hours: int = setting(
        6,
        integer(1, 24),
        "Hours between scheduled readiness checks: doctor's read-only checks run by themselves in the account "
        "and region; a failed or missed run alarms (`ReadinessChecksFailed`), `status` shows the last."
    )
    schedule_minutes: int = setting(
        1,
        integer(1, 60),
        "Reconciler schedule period."
    )
    tick_budget_seconds: int = setting(
        45,
        integer(10, 600),
        "Time a tick may spend walking resources; the rest continues next tick. An engaging tick keeps "
        "walking while it has engage work and Lambda time (up to its 15-minute timeout, less 30 s); relaxing "
        "keeps this budget."
    )
    rewalk_minutes: int = setting(
        5,
        integer(1, 1440),
        "While a kind is held in posture, its walk is repeated this often: the bulk listings again, per-"
        "resource reads only for what they show changed, so resources created or opted in during a long hold, "
        "or set back by an IaC apply, are protected too."
    )
    stuck_after_failures: int = setting(
        3,
        integer(1, 100),
        "A resource whose engage or restore failed on this many walks in a row (one a tick at most) no longer "
        "holds its stage back: it is reported, counted in the ResourcesStuck metric and listed by `holdfast "
        "status` with the command that fixes it."
    )
    controller_reserved_concurrency: int = setting(
        5,
        integer(0, 100),
        "Reserved concurrency of each of Holdfast's own functions (detector, reconciler, readiness), so an account "
        "out of concurrency does not throttle them when they must run; it is also their ceiling. 0 reserves "
        "none. `holdfast doctor` checks that the account's unreserved concurrency leaves room."
    )
    on_delete_while_engaged: str = setting(
        "refuse",
        one_of(("refuse", "restore")),
        "What deleting the stack does while Holdfast holds resources (an account leaving an OU, `cdk destroy` in an "
        "event): `refuse` fails the deletion with how to resume first, keeping the controller; `restore` restores "
        "every engaged resource first, within the teardown function's time, and fails naming what it could not."
    )
    lambda_writes_per_second: float = setting(
        10.0,
        number(1, 15),
        "Client-side rate for Lambda control-plane calls, reads included; AWS allows about 15/s for all of "
        "them together, so the default leaves room for the account's own deploys."
    )
    max_resources: int = setting(
        5000,
        integer(1, 100000),
        "Blast-radius limit: refuse to act when the selector matches more resources "
        "(Holdfast's own, never engaged, are not counted)."
    )
    signal_ttl_hours: int = setting(
        48,
        integer(1, 720),
        "Signals expire from the ledger by TTL after this long."
    )
    notification_email: str | None = setting(
        None,
        EMAIL,
        "E-mail subscribed to stage-change notifications (optional)."
    )
    log_retention_days: int = setting(
        90,
        one_of(LOG_RETENTION_DAYS),
        "Controllers' log retention, one of CloudWatch Logs' periods."
    )
    ledger_table_name: str | None = setting(
        None,
        pattern(_TABLE, "must be a DynamoDB table name (3–255 letters, digits, _ . -), or null", summary="table name"),
        "The ledger's DynamoDB table. null: CloudFormation names it, so stacks side by side and a stack deleted "
        "and deployed again never clash on a retained table. A name: that table, for a stack deployed when the "
        "ledger was always `holdfast-ledger` (keep it so an update does not replace the table), or to bring a "
        "retained ledger back with `cdk import`. The CLI finds the table in SSM at "
        "`/holdfast/<stack name>/ledger-table`."
    )
    org_organizational_unit_ids: tuple[str, ...] = setting(
        (),
        str_list(OU, allowed="must be a list of OU ids (ou-…) or root ids (r-…)"),
        "Organization: OUs (`ou-…`) or the root (`r-…`) whose accounts get Holdfast from a service-managed "
        "StackSet (the `HoldfastOrg` stack), new accounts included. Empty: no StackSet."
    )
    org_regions: tuple[str, ...] = setting(
        (),
        str_list(REGION, allowed="must be a list of AWS regions such as us-east-1"),
        "Organization: regions every account gets a Holdfast stack in, each with its own ledger; one "
        "partition."
    )
    org_admin_account: str | None = setting(
        None,
        pattern(_ACCOUNT, "must be an AWS account id of 12 digits, or null", summary="account id"),
        "Organization: the management or delegated-administrator account (12 digits) that deploys the "
        "StackSet and may assume `HoldfastReadOnly` in every account."
    )
    org_admin_principals: tuple[str, ...] = setting(
        (),
        str_list(ROLE_ARN, allowed="must be a list of IAM role ARNs of org_admin_account"),
        "Organization: the roles of `org_admin_account` that may assume `HoldfastReadOnly` and `HoldfastOperator` "
        "in every account. Empty (and no `org_admin_principal_tag`): only `HoldfastAdmin`, a role of Holdfast's own "
        "that the `HoldfastOrg` stack creates in the admin account; grant your people `sts:AssumeRole` on it."
    )
    org_admin_principal_tag: str | None = setting(
        None,
        PRINCIPAL_TAG,
        "Organization: instead of naming roles, the principals of `org_admin_account` carrying this principal tag "
        "(`KEY=VALUE`, matched as `aws:PrincipalTag/KEY`) may assume `HoldfastReadOnly` and `HoldfastOperator`. "
        "Not together with `org_admin_principals`."
    )
    org_id: str | None = setting(
        None,
        pattern(_ORG_ID, "must be an organization id such as o-a1b2c3d4e5, or null", summary="organization id"),
        "Organization: its id (`o-…`); only its accounts may read the function code the StackSet deploys."
    )
    org_call_as: str = setting(
        "SELF",
        one_of(ORG_CALL_AS),
        "Organization: `SELF` when `org_admin_account` is the management account, `DELEGATED_ADMIN` "
        "otherwise."
    )
    org_max_concurrent_percentage: int = setting(
        25,
        integer(1, 100),
        "Organization: share of accounts a StackSet operation deploys to at once, per region."
    )
    org_failure_tolerance_percentage: int = setting(
        10,
        integer(0, 100),
        "Organization: share of accounts that may fail, per region, before the operation stops there."
    )
    org_retain_stacks_on_account_removal: bool = setting(
        False,
        BOOLEAN,
        "Organization: keep an account's Holdfast stacks when it leaves the OUs. `false` deletes them (the "
        "ledger table is retained either way)."
    )
    org_overrides: tuple[OrgOverride, ...] = setting(
        (),
        ORG_OVERRIDES,
        "Organization: other settings for some OUs or accounts, a list of `{\"name\": \"prod\", "
        "\"organizational_unit_ids\": [\"ou-…\"] or \"accounts\": [\"123456789012\"], \"settings\": {\"mode\": \"recommend\"}}`. "
        "Each is a StackSet of its own (`Holdfast-<name>`) with the base settings and its changes, validated at synth; "
        "the base StackSet leaves its accounts out. An OU or account is named once."
    )
    org_game_day_stop_alarms: Mapping[str, str] = setting(
        {},
        ACCOUNT_ALARMS,
        "Organization: the member accounts whose stacks get the game day, each with the name of its own stop "
        "alarm in that account (`{\"123456789012\": \"orders-slo\"}`), in every region of `org_regions`. Empty: "
        "no member stack has one (`game_day_stop_alarm` names an alarm of the deploying account only). Member "
        "game days fail launches only, never Lambda invocations."
    )
    game_day_stop_alarm: str | None = setting(
        None,
        ALARM_NAME,
        "Game day: name of the CloudWatch alarm (this account and region) that stops the FIS rehearsal. "
        "Setting it adds the experiment template to the stack."
    )
    game_day_duration_minutes: int = setting(
        20,
        integer(1, 180),
        "Game day: how long FIS fails the selected groups' launches in the game day's zones."
    )
    game_day_availability_zones: tuple[str, ...] = setting(
        (),
        str_list(ZONE, allowed="must be a list of Availability Zone names or IDs such as us-east-1a or use1-az1"),
        "Game day: the zones (names or IDs) whose launches fail. Empty: the zones of the selected groups, which "
        "`holdfast drill` reads and writes into the experiment template before it starts it; synth warns."
    )
    game_day_lambda_errors: bool = setting(
        False,
        BOOLEAN,
        "Game day: also fail invocations (`aws:lambda:invocation-error`) of functions tagged `holdfast:fis-"
        "extension=true`, which must carry the FIS Lambda extension."
    )
    game_day_lambda_config_bucket: str | None = setting(
        None,
        pattern(_BUCKET, "must be an S3 bucket name (3–63 lowercase letters, digits, dots, hyphens), or null", summary="bucket name"),
        "Game day: the S3 bucket the FIS Lambda extension reads its configuration from; needed with "
        "`game_day_lambda_errors`."
    )

    # ---- derived views -------------------------------------------------------------

    @property
    def selector_key(self) -> str:
        return self.selector.split("=", 1)[0]

    @property
    def selector_value(self) -> str:
        return self.selector.split("=", 1)[1]

    def probe_hosts(self, region: str) -> tuple[str, ...]:
        return tuple(h.replace("{region}", region) for h in self.probe_endpoints)

    # ---- construction --------------------------------------------------------------

    def __post_init__(self) -> None:
        # Frozen: the canonical values (tuples, floats, Target) are set past the freeze.
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["rule"](f.name, getattr(self, f.name)))
        _check_whole(self)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> "Settings":
        """Validate a raw mapping (cdk.json context, JSON file, env) into Settings."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise SettingsError("", raw, "must be a JSON object of settings")
        known = {f.name for f in dataclasses.fields(cls)}
        for key in raw:
            if key in _REMOVED:
                raise SettingsError(key, raw[key], _REMOVED[key])
            if key not in known:
                close = difflib.get_close_matches(str(key).replace("-", "_").lower(), known, n=1, cutoff=0.8)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
                raise SettingsError(str(key), raw[key], f"unknown key{hint}")
        return cls(**raw)

    @classmethod
    def from_context(cls, value: Any) -> "Settings":
        """The `holdfast` context value as CDK gives it: an object from cdk.json, or a
        JSON string from `cdk synth -c holdfast='{...}'` (the CLI passes context as strings)."""
        return cls.from_json(value) if isinstance(value, str) else cls.from_mapping(value)

    @classmethod
    def from_json(cls, text: str | None) -> "Settings":
        if not text:
            return cls.from_mapping({})
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise SettingsError("", text[:80], f"is not valid JSON ({err})") from err
        return cls.from_mapping(raw)

    def to_json(self) -> str:
        """The canonical JSON form, which `from_json` reads back to an equal object."""
        return json.dumps(self.to_mapping(), sort_keys=True, separators=(",", ":"))

    def to_mapping(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "targets":
                value = [dataclasses.asdict(t) for t in value]
            elif f.name == "org_overrides":
                value = [o.to_mapping() for o in value]
            elif isinstance(value, Mapping):
                value = {k: list(v) for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def _check_whole(s: Settings) -> None:
    """Rules that relate several keys."""
    # AWS rejects a DNS-failover threshold below the routing threshold (ModifyTargetGroupAttributes).
    for unit in ("count", "percentage"):
        dns = getattr(s, f"nlb_dns_failover_minimum_healthy_{unit}")
        routing = getattr(s, f"nlb_routing_minimum_healthy_{unit}")
        if dns != OFF and routing != OFF and dns < routing:
            raise SettingsError(
                f"nlb_dns_failover_minimum_healthy_{unit}",
                dns,
                f"must be `off` or at least nlb_routing_minimum_healthy_{unit} ({routing})",
            )
    # Hysteresis: the share that holds an impairment is below the share that starts one.
    if 1 - s.recover_success_share > s.detect_failure_share + 1e-9:
        raise SettingsError(
            "recover_success_share", s.recover_success_share,
            f"must be at least 1 - detect_failure_share ({1 - s.detect_failure_share:g}), so that recovery needs fewer "
            "failures than impairment",
        )
    # The drain's built-in evidence: a warning comes before critical.
    for low, high in (("drain_duration_warning_ratio", "drain_duration_critical_ratio"),
                      ("drain_timeout_warning_share", "drain_timeout_critical_share")):
        if getattr(s, high) <= getattr(s, low):
            raise SettingsError(high, getattr(s, high), f"must be above {low} ({getattr(s, low):g})")
    _check_org(s)
    _check_game_day(s)
    if "EC2" not in s.health_services:
        object.__setattr__(s, "health_services", ("EC2",) + s.health_services)


ORG_KEYS = ("org_regions", "org_admin_account", "org_id", "org_game_day_stop_alarms", "org_admin_principals",
            "org_admin_principal_tag")


def _check_org(s: Settings) -> None:
    """A StackSet needs all of: where (OUs), which regions, who deploys it, and which org may read the code."""
    if not s.org_organizational_unit_ids:
        for key in ORG_KEYS + ("org_overrides",):
            if getattr(s, key):
                raise SettingsError(
                    "org_organizational_unit_ids", [], f"must name at least one OU (or the root) when {key} is set"
                )
        return
    if not s.org_regions:
        raise SettingsError("org_regions", [], "must name at least one region when org_organizational_unit_ids is set")
    partitions = sorted({KNOWN_REGIONS[r] for r in s.org_regions})
    if len(partitions) > 1:
        raise SettingsError("org_regions", list(s.org_regions), f"must all be in one partition, not {', '.join(partitions)}")
    for key, what in (("org_admin_account", "the account that deploys the StackSet"), ("org_id", "the organization's id (o-…)")):
        if getattr(s, key) is None:
            raise SettingsError(key, None, f"required when org_organizational_unit_ids is set: {what}")
    # The member roles trust the admin account's principals only: a role of another account
    # named here would widen who may assume them.
    for arn in s.org_admin_principals:
        if _ROLE_ARN.match(arn).group(2) != s.org_admin_account:
            raise SettingsError("org_admin_principals", list(s.org_admin_principals),
                                f"each must be a role of org_admin_account ({s.org_admin_account}); {arn} is not")
        if _ROLE_ARN.match(arn).group(1) != KNOWN_REGIONS[s.org_regions[0]]:
            raise SettingsError("org_admin_principals", list(s.org_admin_principals),
                                f"each must be in the partition of org_regions ({KNOWN_REGIONS[s.org_regions[0]]}); "
                                f"{arn} is not")
    if s.org_admin_principals and s.org_admin_principal_tag is not None:
        raise SettingsError("org_admin_principal_tag", s.org_admin_principal_tag,
                            "must be null when org_admin_principals names roles: one or the other")
    override_settings(s)


def override_settings(s: Settings) -> dict[str, Settings]:
    """Each override's whole settings (the base with its changes), by name, validated:
    a wrong value names `org_overrides[i].settings.<key>`; an OU or account named twice,
    or an override that changes nothing another set does not already have, is refused."""
    base = {k: v for k, v in s.to_mapping().items() if not k.startswith("org_") and k != "targets"}
    if s.game_day_stop_alarm is None:
        # The member game days' duration (org_game_day_stop_alarms) is the organization's,
        # not a game day of the override's own stacks.
        base.pop("game_day_duration_minutes", None)
    seen_ous = {ou: "org_organizational_unit_ids" for ou in s.org_organizational_unit_ids}
    seen_accounts: dict[str, str] = {}
    names: set[str] = set()
    out: dict[str, Settings] = {}
    sets: dict[str, str] = {Settings.from_mapping(base).to_json(): "the base settings"}
    roots = [ou for ou in s.org_organizational_unit_ids if ou.startswith("r-")]
    for i, o in enumerate(s.org_overrides):
        where = f"org_overrides[{i}]"
        if roots and o.organizational_unit_ids:
            # The base StackSet deploys to every account under the root, the override's OU included.
            raise SettingsError(f"{where}.organizational_unit_ids", list(o.organizational_unit_ids),
                                f"is under the organization's root ({roots[0]}), which org_organizational_unit_ids "
                                "targets: its accounts would get two stacks; name the base's OUs instead of the root, "
                                "or override accounts")
        if o.name in names:
            raise SettingsError(f"{where}.name", o.name, "is the name of an earlier override: each StackSet needs its own")
        names.add(o.name)
        for ou in o.organizational_unit_ids:
            if ou in seen_ous:
                raise SettingsError(f"{where}.organizational_unit_ids", ou, f"is named in {seen_ous[ou]} already: an OU gets one set of settings")
            seen_ous[ou] = where
        for account in o.accounts:
            if account in seen_accounts:
                raise SettingsError(f"{where}.accounts", account, f"is named in {seen_accounts[account]} already: an account gets one set of settings")
            seen_accounts[account] = where
        try:
            merged = Settings.from_mapping({**base, **o.changes})
        except SettingsError as err:
            raise SettingsError(f"{where}.settings.{err.key}" if err.key else f"{where}.settings", err.value, err.allowed) from err
        same = sets.get(merged.to_json())
        if same is not None:
            raise SettingsError(f"{where}.settings", o.changes, f"gives the same settings as {same}: name its OUs or accounts there")
        sets[merged.to_json()] = f"{where} ({o.name})"
        out[o.name] = merged
    return out


def _check_game_day(s: Settings) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    if s.game_day_lambda_errors and s.game_day_lambda_config_bucket is None:
        raise SettingsError(
            "game_day_lambda_config_bucket", None, "required when game_day_lambda_errors is true: the FIS Lambda extension's configuration bucket"
        )
    if s.game_day_stop_alarm is None and not s.org_game_day_stop_alarms:
        for key in ("game_day_duration_minutes", "game_day_lambda_errors", "game_day_lambda_config_bucket"):
            if getattr(s, key) != defaults[key]:
                raise SettingsError(
                    "game_day_stop_alarm",
                    None,
                    f"required when {key} is set: FIS needs a stop condition, the alarm that ends the rehearsal when it hurts",
                )


def markdown_table() -> str:
    """The settings table of docs/settings.md, generated from the dataclass so the two cannot drift."""
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    defaults = Settings().to_mapping()
    for f in dataclasses.fields(Settings):
        default = json.dumps(defaults[f.name])
        rows.append(f"| `{f.name}` | `{default}` | {f.metadata['rule'].summary} | {f.metadata['doc']} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - exercised by the settings page's test
    print(markdown_table())
