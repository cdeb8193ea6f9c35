"""Holdfast's settings: typed, frozen, documented, validated.

Settings come from the `holdfast` object in `cdk.json` context. The stack validates
them at synth and hands them to the functions as JSON in the HOLDFAST_SETTINGS
environment variable; the CLI takes the same object from a file. Every key has a
default, every bad value fails with a message that names the key, the value and what
is allowed, and an unknown key (a typo) is an error, never silently ignored.

Pure: no boto3, no clock. `python -m holdfast.settings` prints the README table.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from holdfast.core.signals import PROBE_API_CALLS

CONTEXT_KEY = "holdfast"
ENV_VAR = "HOLDFAST_SETTINGS"

MODES = ("auto", "recommend", "off")
ASG_PROCESSES = (
    "Launch",
    "Terminate",
    "AddToLoadBalancer",
    "AlarmNotification",
    "AZRebalance",
    "HealthCheck",
    "InstanceRefresh",
    "ReplaceUnhealthy",
    "ScheduledActions",
)
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
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TAG_KEY = re.compile(r"^[\w.:/=+\-@ ]{1,128}$")
_TAG_VALUE = re.compile(r"^[\w.:/=+\-@ ]{0,256}$")


class SettingsError(ValueError):
    """A setting is wrong. The message names the key, the value and what is allowed."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key = key
        self.value = value
        self.allowed = allowed
        where = f"{CONTEXT_KEY}.{key}" if key else CONTEXT_KEY
        super().__init__(f"{where} = {json.dumps(value, default=str)}: {allowed}")


def _doc(text: str, **extra: Any) -> dict:
    return {"doc": text, **extra}


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


@dataclass(frozen=True)
class Settings:
    """Every Holdfast setting, with its default. Construct with `Settings.from_mapping`."""

    selector: str = field(
        default="holdfast:protect=true",
        metadata=_doc("Opt-in tag `KEY=VALUE`. Holdfast touches only resources that carry it."),
    )
    mode: str = field(
        default="auto",
        metadata=_doc("`auto` acts; `recommend` decides and reports but changes nothing; `off` does nothing."),
    )
    targets: tuple[Target, ...] = field(
        default=(),
        metadata=_doc(
            "Deployment targets, a list of `{\"account\": \"123456789012\", \"region\": \"us-east-1\"}`. "
            "One stack each; empty means the CLI's default environment."
        ),
    )
    asg_processes: tuple[str, ...] = field(
        default=("ReplaceUnhealthy", "AZRebalance"),
        metadata=_doc("Auto Scaling processes suspended while engaged."),
    )
    esm_floor: int = field(
        default=2,
        metadata=_doc("SQS event source mapping MaximumConcurrency while engaged (2–1000). An owner cap below it stays."),
    )
    hold_minutes: int = field(
        default=10,
        metadata=_doc("Hold after each recovery step before the next (1–1440)."),
    )
    capacity_hold_minutes: int = field(
        default=30,
        metadata=_doc("Launches must be normal this long before capacity-removing automation resumes (1–1440)."),
    )
    async_max_event_age_seconds: int = field(
        default=900,
        metadata=_doc("Lambda async MaximumEventAgeInSeconds while engaged (60–21600); never raised."),
    )
    async_max_retry_attempts: int = field(
        default=1,
        metadata=_doc("Lambda async MaximumRetryAttempts while engaged (0–2); never raised."),
    )
    nlb_dns_failover_minimum_healthy_count: int | str = field(
        default=OFF,
        metadata=_doc("NLB `dns_failover.minimum_healthy_targets.count` while engaged: `off` or 1–1000. `off` keeps zones in DNS."),
    )
    nlb_dns_failover_minimum_healthy_percentage: int | str = field(
        default=OFF,
        metadata=_doc("NLB `dns_failover.minimum_healthy_targets.percentage` while engaged: `off` or 1–100."),
    )
    nlb_routing_minimum_healthy_count: int = field(
        default=1,
        metadata=_doc("NLB `unhealthy_state_routing.minimum_healthy_targets.count` while engaged: 1–1000."),
    )
    nlb_routing_minimum_healthy_percentage: int | str = field(
        default=50,
        metadata=_doc("NLB `unhealthy_state_routing.minimum_healthy_targets.percentage` while engaged: `off` or 1–100. Below it, traffic goes to all targets."),
    )
    gating_alarms: tuple[str, ...] = field(
        default=(),
        metadata=_doc("CloudWatch alarm names that must all be OK before a stage advances."),
    )
    # ---- the drain: a feedback cap controller per mapping (holdfast.core.drain_control) ----
    drain_downstream_alarms: Mapping[str, tuple[str, ...]] = field(
        default_factory=dict,
        metadata=_doc(
            "Per mapping, the alarms on what its consumer writes to (latency or error SLOs of its database): "
            "`{\"KEY\": [\"alarm\", ...]}`, KEY a function name, queue name, mapping UUID or `*` (every mapping). "
            "An alarm in ALARM cuts the cap. Also read from the tag `holdfast:downstream-alarms` "
            "(names separated by spaces) on the mapping or its function."
        ),
    )
    drain_warning_alarms: Mapping[str, tuple[str, ...]] = field(
        default_factory=dict,
        metadata=_doc(
            "As `drain_downstream_alarms`, for warnings (latency approaching the SLO): in ALARM they stop raises, "
            "never cut. Tag `holdfast:downstream-warnings`."
        ),
    )
    drain_raise_fraction: float = field(
        default=0.125,
        metadata=_doc(
            "After the slow start (the first warning or cut), the cap rises by this share of the drain's starting cap "
            "(the consumer's pre-event concurrency) per datapoint at baseline measured at it (0.01–1); the slow start "
            "raises by at least as much. 1/8: near a knee one raise does not carry latency from below a warning to "
            "past the SLO in the recovery model."
        ),
    )
    drain_raise_share_of_cap: float = field(
        default=0.11,
        metadata=_doc(
            "... and at least this share of the cap in force, rounded down (0–0.5), so a drain far above its start "
            "is not held to a step sized for its start. 0.11: the widest raise that cannot jump from below a warning "
            "to past the SLO when they are as far apart as in the recovery model (the SLO's concurrency 1.118× the "
            "warning's)."
        ),
    )
    drain_start_steps_above: int = field(
        default=1,
        metadata=_doc(
            "The drain starts this many raise steps above the pre-event concurrency (0–4). One step from a level "
            "the downstream carried is the bound any raise keeps, and saves a raise interval where the backlog "
            "costs most (0.02–0.04 of the ratio to the lower bound in the model); two jumped a warning band."
        ),
    )
    drain_cut_factor: float = field(
        default=0.7,
        metadata=_doc(
            "On a downstream alarm the cap is multiplied by this, from the cap in force when the alarming datapoint "
            "was measured (0.1–0.95). 0.7 takes a cap 40 % over the knee back below it in one cut, and gives back "
            "less than halving would."
        ),
    )
    drain_caught_up_slack_seconds: int = field(
        default=10,
        metadata=_doc(
            "Caught up = the oldest message within this many seconds of its pre-event age (0–3600). Small on "
            "purpose: a queue 30 s behind keeps a standing backlog, and uncapping a mapping over one next to a "
            "database near its knee collapsed it in the model."
        ),
    )
    drain_restore_after_minutes: int = field(
        default=15,
        metadata=_doc(
            "Caught up this long before the owner's original cap (often none) comes back (0–1440): a hold plus the "
            "longest CloudWatch lag, so no restore rests on one late datapoint."
        ),
    )
    drain_remember_alarm_minutes: int = field(
        default=30,
        metadata=_doc(
            "After a cut, raises stop one below the cap that alarmed for this long, then probe once more: the "
            "downstream may have scaled (0–1440)."
        ),
    )
    drain_stale_minutes: int = field(
        default=10,
        metadata=_doc(
            "A datapoint older than this is missing: the cap holds, never rises, on stale evidence (1–60). "
            "CloudWatch publishes within 1–3 minutes; 10 covers a late period or two."
        ),
    )
    drain_slow_start_factor: float = field(
        default=1.5,
        metadata=_doc(
            "While every signal of a mapping is at its baseline the cap is multiplied by this per datapoint measured "
            "at it (slow start, 1.1–4); after the first warning or cut it rises additively. Past a knee the time per "
            "message grows as concurrency ÷ knee, so one step overshoots by at most this: 1.5 stays short of a client "
            "timeout that 2 reached in the recovery model."
        ),
    )
    drain_duration_warning_ratio: float = field(
        default=1.08,
        metadata=_doc(
            "Built-in evidence, no alarm needed: the consumer's time per message (Duration's sum ÷ the queue's "
            "NumberOfMessagesReceived, so full batches are not read as slow ones) at this ratio to its pre-event "
            "median is a warning (1.01–3): raises stop, and a warning on a second datapoint at the same cap steps "
            "back. Past a downstream's knee the ratio is concurrency ÷ knee: 1.08 is 8 % past it. Widened to 1 + 3 × "
            "the baseline's own spread for a noisier consumer."
        ),
    )
    drain_duration_critical_ratio: float = field(
        default=1.2,
        metadata=_doc(
            "... and at this ratio critical (1.02–5, above the warning): the cap is cut to the concurrency that carried "
            "the minute's goodput at the baseline time per message (the knee when the downstream is saturated)."
        ),
    )
    drain_timeout_warning_share: float = field(
        default=0.5,
        metadata=_doc("The mean invocation's Duration at this share of the function's timeout is a warning (0.1–0.95)."),
    )
    drain_timeout_critical_share: float = field(
        default=0.8,
        metadata=_doc("... and at this share critical (0.2–1, above the warning): batches are about to time out."),
    )
    drain_failure_critical_share: float = field(
        default=0.05,
        metadata=_doc(
            "Messages received and not deleted (SQS NumberOfMessagesReceived against NumberOfMessagesDeleted: what "
            "ReportBatchItemFailures leaves with Errors at 0), or Errors ÷ Invocations, this far above the pre-event "
            "share is critical (0.01–1); a percentage point above it is a warning."
        ),
    )
    drain_warning_step_back: float = field(
        default=0.05,
        metadata=_doc("A warning that persists (a second datapoint at the same cap) lowers the cap by this share (0.01–0.5)."),
    )
    drain_pre_event_minutes: int = field(
        default=30,
        metadata=_doc(
            "The window before the hold from which each mapping's pre-event facts are read: ConcurrentExecutions "
            "(where the drain starts), the oldest-message age (its baseline), Errors, and the queue's rates "
            "for the forecast (5–1440)."
        ),
    )
    # ---- the replay: old work at a bounded rate, after the live queues caught up ----
    replay_messages_per_second: int = field(
        default=10,
        metadata=_doc(
            "MaxNumberOfMessagesPerSecond of each replay's StartMessageMoveTask (1–500, SQS's maximum). Low on "
            "purpose: replayed messages add to the live arrivals, and a drained consumer's spare capacity is what "
            "is left; a replay cancelled by an alarm restarts at half the rate."
        ),
    )
    replay_max_attempts: int = field(
        default=3,
        metadata=_doc(
            "Starts per replay source before Holdfast gives up and leaves the messages where they are, reported "
            "(1–10). Each cancel on an alarm costs one."
        ),
    )
    replay_expired_events_to: str | None = field(
        default=None,
        metadata=_doc(
            "Queue ARN that Holdfast's expired-events queue is replayed to (its records are Lambda's on-failure "
            "records, the event under `requestPayload`); null: not replayed, kept 14 days. The queue must carry "
            "the tag `holdfast:replay=true`. Owners' dead-letter queues opt in with that tag (on the DLQ and its "
            "source queue) and go back to their source queue."
        ),
    )
    detect_min_groups: int = field(
        default=3,
        metadata=_doc("Impaired needs capacity-class launch failures from at least this many groups (1–100)."),
    )
    detect_min_zones: int = field(
        default=2,
        metadata=_doc("… spanning at least this many Availability Zones (1–10)."),
    )
    detect_window_minutes: int = field(
        default=10,
        metadata=_doc("… within this many minutes (1–120)."),
    )
    recover_quiet_minutes: int = field(
        default=15,
        metadata=_doc("Recovered needs launches, probes and health checks quiet (below) for this long (1–1440)."),
    )
    detect_failure_share: float = field(
        default=0.5,
        metadata=_doc("Impaired by launches also needs those capacity-class failures to be at least this share of the window's capacity failures and successful launches (0.01–1)."),
    )
    recover_success_share: float = field(
        default=0.9,
        metadata=_doc("Recovery needs successful launches to be at least this share in every window for `recover_quiet_minutes` (failures from fewer groups or zones than impairment needs are routine and not counted), and a successful launch since the quiet began (with an AWS Health issue open: from `detect_min_groups` groups in `detect_min_zones` zones) (0.5–1)."),
    )
    drain_max_error_share: float = field(
        default=0.05,
        metadata=_doc("The drain stage ends only while each watched consumer function's Errors stay at or below this share of its Invocations over the hold (0–1); each mapping's cap is its own controller's."),
    )
    drain_max_throttle_share: float = field(
        default=0.05,
        metadata=_doc("… and its Throttles at or below this share of its invocation attempts (0–1)."),
    )
    health_services: tuple[str, ...] = field(
        default=("EC2",),
        metadata=_doc("AWS Health services whose open issue in this region means impaired. EC2 is always included."),
    )
    probe_endpoints: tuple[str, ...] = field(
        default=("dynamodb.{region}.amazonaws.com", "ec2.{region}.amazonaws.com"),
        metadata=_doc("Host names resolved by the DNS probe each tick; `{region}` is replaced. An empty answer is a failure."),
    )
    probe_api_services: tuple[str, ...] = field(
        default=("dynamodb", "ec2"),
        metadata=_doc("Services probed with one cheap read-only call each tick (dynamodb, ec2, autoscaling, lambda, sqs)."),
    )
    probe_timeout_seconds: float = field(
        default=2.0,
        metadata=_doc("Timeout of each probe (0.1–10)."),
    )
    probe_failure_ratio: float = field(
        default=0.5,
        metadata=_doc("A probe target (one host's DNS, one service's API) failing more than this share of its results within `detect_window_minutes` means impaired (0–1, exclusive of 1)."),
    )
    readiness_hours: int = field(
        default=6,
        metadata=_doc(
            "Hours between scheduled readiness checks (1–24): doctor's read-only checks run by themselves in the "
            "account and region; a failed or missed run alarms (`ReadinessChecksFailed`), `status` shows the last."
        ),
    )
    schedule_minutes: int = field(
        default=1,
        metadata=_doc("Reconciler schedule period (1–60)."),
    )
    tick_budget_seconds: int = field(
        default=45,
        metadata=_doc("Time a tick may spend walking resources; the rest continues next tick (10–600). An engaging "
                      "tick keeps walking while it has engage work and Lambda time (up to its 15-minute timeout, "
                      "less 30 s); relaxing keeps this budget."),
    )
    rewalk_minutes: int = field(
        default=5,
        metadata=_doc("While a kind is held in posture, its walk is repeated this often (1–1440): the bulk listings "
                      "again, per-resource reads only for what they show changed, so resources created or opted in "
                      "during a long hold, or set back by an IaC apply, are protected too."),
    )
    stuck_after_failures: int = field(
        default=3,
        metadata=_doc("A resource whose engage or restore failed on this many walks in a row (one a tick at most) "
                      "no longer holds its stage back: it is reported, counted in the ResourcesStuck metric and "
                      "listed by `holdfast status` with the command that fixes it (1–100)."),
    )
    lambda_writes_per_second: float = field(
        default=10.0,
        metadata=_doc("Client-side rate for Lambda control-plane calls, reads included; AWS allows about 15/s for all of them together, so the default leaves room for the account's own deploys (1–15)."),
    )
    max_resources: int = field(
        default=5000,
        metadata=_doc("Blast-radius limit: refuse to act when the selector matches more resources (1–100000)."),
    )
    signal_ttl_hours: int = field(
        default=48,
        metadata=_doc("Signals expire from the ledger by TTL after this long (1–720)."),
    )
    notification_email: str | None = field(
        default=None,
        metadata=_doc("E-mail subscribed to stage-change notifications (optional)."),
    )
    log_retention_days: int = field(
        default=90,
        metadata=_doc("Controllers' log retention, one of CloudWatch Logs' periods (1, 3, 5, 7, 14, 30, 60, 90, …)."),
    )
    org_organizational_unit_ids: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "Organization: OUs (`ou-…`) or the root (`r-…`) whose accounts get Holdfast from a service-managed "
            "StackSet (the `HoldfastOrg` stack), new accounts included. Empty: no StackSet."
        ),
    )
    org_regions: tuple[str, ...] = field(
        default=(),
        metadata=_doc("Organization: regions every account gets a Holdfast stack in, each with its own ledger; one partition."),
    )
    org_admin_account: str | None = field(
        default=None,
        metadata=_doc(
            "Organization: the management or delegated-administrator account (12 digits) that deploys the StackSet "
            "and may assume `HoldfastReadOnly` in every account."
        ),
    )
    org_id: str | None = field(
        default=None,
        metadata=_doc("Organization: its id (`o-…`); only its accounts may read the function code the StackSet deploys."),
    )
    org_call_as: str = field(
        default="SELF",
        metadata=_doc("Organization: `SELF` when `org_admin_account` is the management account, `DELEGATED_ADMIN` otherwise."),
    )
    org_max_concurrent_percentage: int = field(
        default=25,
        metadata=_doc("Organization: share of accounts a StackSet operation deploys to at once, per region (1–100)."),
    )
    org_failure_tolerance_percentage: int = field(
        default=10,
        metadata=_doc("Organization: share of accounts that may fail, per region, before the operation stops there (0–100)."),
    )
    org_retain_stacks_on_account_removal: bool = field(
        default=False,
        metadata=_doc(
            "Organization: keep an account's Holdfast stacks when it leaves the OUs. `false` deletes them "
            "(the ledger table is retained either way)."
        ),
    )
    org_overrides: tuple[OrgOverride, ...] = field(
        default=(),
        metadata=_doc(
            "Organization: other settings for some OUs or accounts, a list of `{\"name\": \"prod\", "
            "\"organizational_unit_ids\": [\"ou-…\"] or \"accounts\": [\"123456789012\"], \"settings\": {\"mode\": \"recommend\"}}`. "
            "Each is a StackSet of its own (`Holdfast-<name>`) with the base settings and its changes, validated at synth; "
            "the base StackSet leaves its accounts out. An OU or account is named once."
        ),
    )
    game_day_stop_alarm: str | None = field(
        default=None,
        metadata=_doc(
            "Game day: name of the CloudWatch alarm (this account and region) that stops the FIS rehearsal. "
            "Setting it adds the experiment template to the stack."
        ),
    )
    game_day_duration_minutes: int = field(
        default=20,
        metadata=_doc("Game day: how long FIS fails the selected groups' launches in every zone (1–180)."),
    )
    game_day_lambda_errors: bool = field(
        default=False,
        metadata=_doc(
            "Game day: also fail invocations (`aws:lambda:invocation-error`) of functions tagged "
            "`holdfast:fis-extension=true`, which must carry the FIS Lambda extension."
        ),
    )
    game_day_lambda_config_bucket: str | None = field(
        default=None,
        metadata=_doc("Game day: the S3 bucket the FIS Lambda extension reads its configuration from; needed with `game_day_lambda_errors`."),
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

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> "Settings":
        """Validate a raw mapping (cdk.json context, JSON file, env) into Settings."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise SettingsError("", raw, "must be a JSON object of settings")
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key in raw:
            if key in _REMOVED:
                _REMOVED[key](key, raw[key])
            if key not in known:
                close = difflib.get_close_matches(str(key).replace("-", "_").lower(), known, n=1, cutoff=0.8)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
                raise SettingsError(str(key), raw[key], f"unknown key{hint}")
        values = {name: _CHECKS[name](name, raw[name]) for name in raw}
        settings = cls(**values)
        _check_whole(settings)
        return settings

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


# ---- per-key checks ------------------------------------------------------------------


def _int(lo: int, hi: int, *, off: bool = False):
    allowed = f"must be {'`off` or ' if off else ''}an integer from {lo} to {hi}"

    def check(key: str, value: Any) -> int | str:
        if off and value == OFF:
            return OFF
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise SettingsError(key, value, allowed)
        return value

    return check


def _number(lo: float, hi: float, *, hi_open: bool = False):
    allowed = f"must be a number from {lo} to {hi}{' (exclusive)' if hi_open else ''}"

    def check(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(key, value, allowed)
        if not lo <= value <= hi or (hi_open and value >= hi):
            raise SettingsError(key, value, allowed)
        return float(value)

    return check


def _choice(options: tuple):
    def check(key: str, value: Any):
        if value not in options:
            raise SettingsError(key, value, f"must be one of {', '.join(map(str, options))}")
        return value

    return check


def _str_list(item_check=None, *, allowed: str = "must be a list of strings", min_len: int = 0):
    def check(key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SettingsError(key, value, allowed)
        if len(value) < min_len:
            raise SettingsError(key, value, f"{allowed}, at least {min_len}")
        if len(set(value)) != len(value):
            raise SettingsError(key, value, f"{allowed}, without duplicates")
        if item_check:
            for item in value:
                item_check(key, item)
        return tuple(value)

    return check


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
    if not isinstance(value, list):
        raise SettingsError(key, value, allowed)
    targets = []
    for item in value:
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
        raise SettingsError(key, value, allowed)
    return tuple(targets)


def _pattern(pattern: re.Pattern, allowed: str, *, optional: bool = True):
    def check(key: str, value: Any) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not pattern.match(value):
            raise SettingsError(key, value, allowed)
        return value

    return check


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


_OVERRIDE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")


def _org_overrides(key: str, value: Any) -> tuple[OrgOverride, ...]:
    """The shape of each override; what its settings mean is checked with the whole (_check_org)."""
    allowed = ('must be a list of {"name", "organizational_unit_ids" or "accounts", "settings"}: '
               "a name of letters, digits and hyphens (up to 32, a letter first), OU ids or 12-digit account ids, "
               "and an object of settings other than the org_ keys")
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
            ous = _str_list(_ou, allowed="must be a non-empty list of OU ids (ou-…) or root ids (r-…)", min_len=1)(
                f"{where}.organizational_unit_ids", ous)
        if accounts is not None:
            if not isinstance(accounts, list) or not accounts or not all(isinstance(a, str) and _ACCOUNT.match(a) for a in accounts) \
                    or len(set(accounts)) != len(accounts):
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
        if not isinstance(name, str) or not name or not isinstance(alarms, list) or not alarms:
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


def _removed(why: str):
    def check(key: str, value: Any):
        raise SettingsError(key, value, why)

    return check


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


def _host(key: str, host: str) -> None:
    if not re.match(r"^[A-Za-z0-9{}.\-]+$", host) or "." not in host:
        raise SettingsError(key, host, "each endpoint must be a host name such as dynamodb.{region}.amazonaws.com")


# Keys that were settings once: named with what replaced them, not as a typo.
_REMOVED = {
    "esm_cap_steps": _removed(
        "was removed: the drain no longer raises caps along a ladder but with a feedback controller per mapping; "
        "see the drain_* settings"),
}

# The services an API probe can call (holdfast.core.signals.PROBE_API_CALLS).
PROBE_API_SERVICES = tuple(PROBE_API_CALLS)

_CHECKS = {
    "selector": _selector,
    "mode": _choice(MODES),
    "targets": _targets,
    "asg_processes": _str_list(_choice(ASG_PROCESSES), allowed=f"must be a list of Auto Scaling processes ({', '.join(ASG_PROCESSES)})", min_len=1),
    "esm_floor": _int(2, 1000),
    "hold_minutes": _int(1, 1440),
    "capacity_hold_minutes": _int(1, 1440),
    "async_max_event_age_seconds": _int(60, 21600),
    "async_max_retry_attempts": _int(0, 2),
    "nlb_dns_failover_minimum_healthy_count": _int(1, 1000, off=True),
    "nlb_dns_failover_minimum_healthy_percentage": _int(1, 100, off=True),
    "nlb_routing_minimum_healthy_count": _int(1, 1000),
    "nlb_routing_minimum_healthy_percentage": _int(1, 100, off=True),
    "gating_alarms": _str_list(allowed="must be a list of CloudWatch alarm names"),
    "drain_downstream_alarms": _alarm_map,
    "drain_warning_alarms": _alarm_map,
    "drain_raise_fraction": _number(0.01, 1),
    "drain_cut_factor": _number(0.1, 0.95),
    "drain_raise_share_of_cap": _number(0, 0.5),
    "drain_start_steps_above": _int(0, 4),
    "drain_caught_up_slack_seconds": _int(0, 3600),
    "drain_restore_after_minutes": _int(0, 1440),
    "drain_remember_alarm_minutes": _int(0, 1440),
    "drain_stale_minutes": _int(1, 60),
    "drain_pre_event_minutes": _int(5, 1440),
    "drain_slow_start_factor": _number(1.1, 4),
    "drain_duration_warning_ratio": _number(1.01, 3),
    "drain_duration_critical_ratio": _number(1.02, 5),
    "drain_timeout_warning_share": _number(0.1, 0.95),
    "drain_timeout_critical_share": _number(0.2, 1),
    "drain_failure_critical_share": _number(0.01, 1),
    "drain_warning_step_back": _number(0.01, 0.5),
    "replay_messages_per_second": _int(1, 500),
    "replay_max_attempts": _int(1, 10),
    "replay_expired_events_to": _queue_arn,
    "detect_min_groups": _int(1, 100),
    "detect_min_zones": _int(1, 10),
    "detect_window_minutes": _int(1, 120),
    "recover_quiet_minutes": _int(1, 1440),
    "detect_failure_share": _number(0.01, 1),
    "recover_success_share": _number(0.5, 1),
    "drain_max_error_share": _number(0, 1),
    "drain_max_throttle_share": _number(0, 1),
    "health_services": _str_list(_health_service, allowed="must be a list of AWS Health service names such as EC2"),
    "probe_endpoints": _str_list(_host, allowed="must be a list of host names"),
    "probe_api_services": _str_list(_choice(PROBE_API_SERVICES), allowed=f"must be a list of services ({', '.join(PROBE_API_SERVICES)})"),
    "probe_timeout_seconds": _number(0.1, 10),
    "probe_failure_ratio": _number(0, 1, hi_open=True),
    "schedule_minutes": _int(1, 60),
    "readiness_hours": _int(1, 24),
    "tick_budget_seconds": _int(10, 600),
    "rewalk_minutes": _int(1, 1440),
    "stuck_after_failures": _int(1, 100),
    "lambda_writes_per_second": _number(1, 15),
    "max_resources": _int(1, 100000),
    "signal_ttl_hours": _int(1, 720),
    "notification_email": _email,
    "log_retention_days": _choice(LOG_RETENTION_DAYS),
    "org_organizational_unit_ids": _str_list(_ou, allowed="must be a list of OU ids (ou-…) or root ids (r-…)"),
    "org_regions": _str_list(_region, allowed="must be a list of AWS regions such as us-east-1"),
    "org_admin_account": _pattern(_ACCOUNT, "must be an AWS account id of 12 digits, or null"),
    "org_id": _pattern(_ORG_ID, "must be an organization id such as o-a1b2c3d4e5, or null"),
    "org_call_as": _choice(ORG_CALL_AS),
    "org_max_concurrent_percentage": _int(1, 100),
    "org_failure_tolerance_percentage": _int(0, 100),
    "org_retain_stacks_on_account_removal": _bool,
    "org_overrides": lambda key, value: _org_overrides(key, value),
    "game_day_stop_alarm": _alarm_name,
    "game_day_duration_minutes": _int(1, 180),
    "game_day_lambda_errors": _bool,
    "game_day_lambda_config_bucket": _pattern(_BUCKET, "must be an S3 bucket name (3–63 lowercase letters, digits, dots, hyphens), or null"),
}


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
    _check_org(s)
    _check_game_day(s)
    if "EC2" not in s.health_services:
        object.__setattr__(s, "health_services", ("EC2",) + s.health_services)


ORG_KEYS = ("org_regions", "org_admin_account", "org_id")


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
    override_settings(s)


def override_settings(s: Settings) -> dict[str, Settings]:
    """Each override's whole settings (the base with its changes), by name, validated:
    a wrong value names `org_overrides[i].settings.<key>`; an OU or account named twice,
    or an override that changes nothing another set does not already have, is refused."""
    base = {k: v for k, v in s.to_mapping().items() if not k.startswith("org_") and k != "targets"}
    seen_ous = {ou: "org_organizational_unit_ids" for ou in s.org_organizational_unit_ids}
    seen_accounts: dict[str, str] = {}
    names: set[str] = set()
    out: dict[str, Settings] = {}
    sets: dict[str, str] = {Settings.from_mapping(base).to_json(): "the base settings"}
    for i, o in enumerate(s.org_overrides):
        where = f"org_overrides[{i}]"
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
    defaults = Settings()
    if s.game_day_lambda_errors and s.game_day_lambda_config_bucket is None:
        raise SettingsError(
            "game_day_lambda_config_bucket", None, "required when game_day_lambda_errors is true: the FIS Lambda extension's configuration bucket"
        )
    if s.game_day_stop_alarm is None:
        for key in ("game_day_duration_minutes", "game_day_lambda_errors", "game_day_lambda_config_bucket"):
            if getattr(s, key) != getattr(defaults, key):
                raise SettingsError(
                    "game_day_stop_alarm",
                    None,
                    f"required when {key} is set: FIS needs a stop condition, the alarm that ends the rehearsal when it hurts",
                )


def markdown_table() -> str:
    """The README's settings table, generated from the dataclass so the two cannot drift."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    defaults = Settings().to_mapping()
    for f in dataclasses.fields(Settings):
        default = json.dumps(defaults[f.name])
        rows.append(f"| `{f.name}` | `{default}` | {f.metadata['doc']} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - exercised by the README test
    print(markdown_table())
