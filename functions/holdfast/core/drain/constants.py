"""The drain controller's constants and the names of its states and actions."""

from __future__ import annotations

from dataclasses import dataclass

LAMBDA_MAX_CONCURRENCY = 1000   # an SQS mapping's most concurrent batches
LAMBDA_MIN_CAP = 2              # MaximumConcurrency is 2–1000

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
ALARM_STATES = (OK, ALARM, INSUFFICIENT_DATA)
WARNING, CRITICAL = "warning", "alarm"   # Alarm.severity: a warning holds, an alarm cuts

START, RAISE, HOLD, CUT, RESTORE = "start", "raise", "hold", "cut", "restore"


@dataclass(frozen=True)
class Constants:
    """The controller's few constants, with why each default is what it is."""

    # Additive step = max(raise_min, ceil(raise_fraction × start cap)). A raise must not
    # carry latency from under the warning threshold past the SLO in one step, or the
    # drain spends the CloudWatch lag over the SLO before the alarm can cut it. 1/8 of what
    # the consumer ran at before the event doubles it in 8 raises (about 25 minutes at one
    # raise per fresh datapoint); in the recovery model it never passed the SLO for any knee
    # from 18 to 60 req/s, where 3/16 did for 3 knees in 41. Slower to find a knee far above
    # the pre-event load: the price of never overshooting it.
    raise_fraction: float = 0.125
    raise_min: int = 1
    # ... and at least this share of the cap in force (rounded down), so a drain far above
    # its start is not stuck at a step sized for its start. 0.11: the widest raise that
    # cannot jump from below a warning to past the SLO when the two are as far apart as
    # the recovery model's (150 and 250 ms over 700 ms of work: the SLO's concurrency is
    # 1.118× the warning's); past 1.118× it could.
    raise_share_of_cap: float = 0.11
    # The drain starts this many steps above the pre-event concurrency. One step from a
    # level the downstream carried is the same bound as any raise (it cannot jump a
    # warning band a raise cannot), and it saves a raise interval at the start, where the
    # backlog costs most: in the recovery model 0.04 of the ratio to the lower bound.
    start_steps_above: int = 1
    # Multiplicative decrease on an alarm: 0.7 takes a cap that overshot the knee by 40 %
    # back below it in one cut, and gives back less than halving (TCP's 0.5) would.
    cut_factor: float = 0.7
    # The lowest cap the controller sets: Holdfast's esm_floor default and Lambda's minimum.
    floor: int = 2
    # "Back at baseline" = the oldest-message age within this many seconds of its pre-event
    # value. Small on purpose: a queue whose age stands at half a minute is keeping up with a
    # standing backlog, not caught up, and a mapping without a cap scales up on any message
    # left over (in the recovery model, restoring "no cap" over such a backlog next to a
    # database near its knee collapsed it).
    caught_up_slack_seconds: float = 10.0
    # Caught up this long before the owner's original comes back: the default hold (10 min)
    # plus the longest CloudWatch lag, so a restore never rests on one lagging datapoint.
    restore_after_seconds: float = 900.0
    # The period of the datapoints the shell reads (one minute, as the queue and Lambda publish).
    period_seconds: int = 60
    # A datapoint whose minute ended longer ago than this is stale: treated as missing.
    stale_seconds: float = 600.0
    # How far back the history of caps is kept for attributing late datapoints.
    history_seconds: float = 3600.0
    # After a cut, raises stop one below the cap that alarmed (TCP's ssthresh) for this long,
    # so AIMD does not walk back into the same alarm every few minutes; after it, one probe:
    # the downstream may have scaled.
    remember_alarm_seconds: float = 1800.0
    # ... doubled each time the re-probe finds the same limit again, at most this many times
    # (30 min, then 1, 2 and 4 h): a limit that stays put is crossed four times in a drain
    # of hours, not every half hour.
    remember_doublings: int = 3
    # Errors count as above their pre-event level when their share of Invocations is more
    # than this above the pre-event share (a percentage point: noise in a small sample of
    # a low error rate does not stop a drain; a failing dependency is far above it).
    error_share_slack: float = 0.01
    # For the forecast only: how often a raise comes — one period for the datapoint to be
    # measured at the new cap, plus CloudWatch's publication lag (1–3 minutes, 2 typical).
    raise_interval_seconds: float = 180.0

    # ---- built-in evidence: what the consumer itself shows, no alarm needed ----
    # Slow start: while every signal is at its baseline the cap is probed this many times
    # higher, for one whole minute, then goes back to the cap judged at baseline until the
    # probe's minute is published and judged (CloudWatch's lag is 2–4 minutes; a cap held
    # through it would spend them all past a knee it crossed). Good: the probe's cap is
    # kept and the next probe goes up from it; a warning or critical: the slow start ends
    # at the knee the probe measured. So a knee crossed costs one datapoint. A closed pool
    # of consumers past its downstream's knee takes concurrency ÷ knee times as long per
    # message, so a probe overshoots by at most this factor: 1.75 keeps the recovery
    # model's 1 s client timeout unreached (0.8 s of work takes 1.4 s, the call 0.7 s);
    # 1.5 found a knee 4× the pre-event load one probe later (0.02 of the ratio to the
    # lower bound), 2.0 reaches 0.9 s.
    slow_start_factor: float = 1.75
    # A paid probe whose time per message is more than this share above the drain's fastest
    # minute ends the slow start (TCP's HyStart++ leaves slow start on a round trip 1/8
    # above its minimum, before any loss): a downstream that queues is near its capacity,
    # and one more × 1.75 probe can tip it, the more so when another consumer shares it.
    slow_start_exit_rise: float = 0.125
    # Time per message (Duration's sum ÷ NumberOfMessagesReceived, so a full batch is not
    # read as a slow one) against its baseline: a warning stops raises (and, persisting,
    # steps back), critical cuts. Past a knee the ratio is concurrency ÷ knee, so 1.08 is
    # 8 % past it and 1.20 is 20 %. Each is raised to 1 + 3 and 1 + 5 times the baseline's
    # own spread (median absolute deviation ÷ median) for a consumer noisier than that.
    duration_warning_ratio: float = 1.08
    duration_critical_ratio: float = 1.20
    # The mean invocation's Duration against the function's timeout: a consumer near its
    # timeout fails whole batches.
    timeout_warning_share: float = 0.5
    timeout_critical_share: float = 0.8
    # Messages received and not deleted (a failed item with ReportBatchItemFailures, a
    # failed batch, a timeout), as a share of those received, this far above the baseline
    # share: critical (a warning above it by `error_share_slack`).
    failure_critical_slack: float = 0.05
    # A warning on two datapoints measured at the same cap steps back by this share of it,
    # or, when the consumer's own evidence warned, to the concurrency that carried that
    # minute's goodput at the baseline time per message (Little's law: past a knee, the
    # knee), if that is lower; never by more than a cut (`cut_factor`).
    warning_step_back: float = 0.05
    # A raise paid when the messages deleted a minute rose by at least this share of the
    # raise's proportion (a cap 20 % higher: deletions 10 % higher). Kleinrock's power,
    # goodput ÷ delay, is greatest where a raise's goodput grows by half its proportion:
    # below it more of each added batch waits on the downstream than works.
    pay_share: float = 0.5
    # Where the owner's critical alarm reports its metric's values (`Alarm.levels`), the slow
    # start ends at the cap the metric's rise with the goodput puts at this share of its
    # threshold (controller.owners_limit), not on a probe past it.
    owner_level_target: float = 0.9
    # The cut on the built-in evidence goes to the concurrency that would carry the
    # measured goodput at the baseline time per message (Little's law: the knee when the
    # downstream is saturated), times this margin; never below half the cap it measured.
    knee_margin: float = 0.95
    # A pre-event concurrency more than this many times what the baseline arrivals need
    # (arrivals × time per message), plus two batches, is implausible (a retry storm in
    # the window): the drain starts from the need instead, and searches.
    plausible_start_factor: float = 2.0
    # A drain that cannot finish is a finding, not a wait: reported stalled when its
    # oldest-message age has not fallen for this long while behind, or when it runs past its
    # forecast by `stall_forecast_factor`. A stalled mapping keeps the cap last judged safe
    # and stops holding the later stages.
    stall_seconds: float = 1800.0
    stall_forecast_factor: float = 3.0

    def __post_init__(self):
        checks = (
            (0 < self.raise_fraction <= 1, "raise_fraction must be in (0, 1]"),
            (isinstance(self.raise_min, int) and self.raise_min >= 1, "raise_min must be an integer ≥ 1"),
            (0 <= self.raise_share_of_cap <= 1, "raise_share_of_cap must be in [0, 1]"),
            (isinstance(self.start_steps_above, int) and 0 <= self.start_steps_above <= 8, "start_steps_above must be an integer from 0 to 8"),
            (0 < self.cut_factor < 1, "cut_factor must be in (0, 1)"),
            (isinstance(self.floor, int) and LAMBDA_MIN_CAP <= self.floor <= LAMBDA_MAX_CONCURRENCY, "floor must be an integer from 2 to 1000"),
            (self.caught_up_slack_seconds >= 0, "caught_up_slack_seconds must be ≥ 0"),
            (self.restore_after_seconds >= 0, "restore_after_seconds must be ≥ 0"),
            (isinstance(self.period_seconds, int) and self.period_seconds > 0, "period_seconds must be a positive integer"),
            (self.stale_seconds > 0, "stale_seconds must be > 0"),
            (self.history_seconds >= self.stale_seconds, "history_seconds must be ≥ stale_seconds"),
            (self.remember_alarm_seconds >= 0, "remember_alarm_seconds must be ≥ 0"),
            (isinstance(self.remember_doublings, int) and 0 <= self.remember_doublings <= 10,
             "remember_doublings must be an integer from 0 to 10"),
            (self.raise_interval_seconds > 0, "raise_interval_seconds must be > 0"),
            (0 <= self.error_share_slack <= 1, "error_share_slack must be in [0, 1]"),
            (1 < self.slow_start_factor <= 4, "slow_start_factor must be in (1, 4]"),
            (0 < self.slow_start_exit_rise <= 1, "slow_start_exit_rise must be in (0, 1]"),
            (1 < self.duration_warning_ratio < self.duration_critical_ratio, "duration ratios must be 1 < warning < critical"),
            (0 < self.timeout_warning_share < self.timeout_critical_share <= 1, "timeout shares must be 0 < warning < critical ≤ 1"),
            (0 < self.failure_critical_slack <= 1, "failure_critical_slack must be in (0, 1]"),
            (0 < self.warning_step_back < 1, "warning_step_back must be in (0, 1)"),
            (0 < self.pay_share < 1, "pay_share must be in (0, 1)"),
            (0 < self.owner_level_target <= 1, "owner_level_target must be in (0, 1]"),
            (0.5 <= self.knee_margin <= 1, "knee_margin must be in [0.5, 1]"),
            (self.plausible_start_factor >= 1, "plausible_start_factor must be ≥ 1"),
            (self.stall_seconds >= 300, "stall_seconds must be ≥ 300"),
            (self.stall_forecast_factor > 1, "stall_forecast_factor must be > 1"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"drain control constants: {message}")


DEFAULTS = Constants()


def constants_from(settings) -> Constants:
    """The controller's constants from Holdfast's settings (holdfast.settings.Settings: the
    drain_* keys and esm_floor); the defaults of both are the same numbers."""
    return Constants(
        raise_fraction=float(settings.drain_raise_fraction),
        raise_share_of_cap=float(settings.drain_raise_share_of_cap),
        start_steps_above=settings.drain_start_steps_above,
        cut_factor=float(settings.drain_cut_factor),
        floor=settings.esm_floor,
        caught_up_slack_seconds=float(settings.drain_caught_up_slack_seconds),
        restore_after_seconds=60.0 * settings.drain_restore_after_minutes,
        remember_alarm_seconds=60.0 * settings.drain_remember_alarm_minutes,
        stale_seconds=60.0 * settings.drain_stale_minutes,
        slow_start_factor=float(settings.drain_slow_start_factor),
        duration_warning_ratio=float(settings.drain_duration_warning_ratio),
        duration_critical_ratio=float(settings.drain_duration_critical_ratio),
        timeout_warning_share=float(settings.drain_timeout_warning_share),
        timeout_critical_share=float(settings.drain_timeout_critical_share),
        failure_critical_slack=float(settings.drain_failure_critical_share),
        warning_step_back=float(settings.drain_warning_step_back),
        stall_seconds=60.0 * settings.drain_stall_minutes,
        stall_forecast_factor=float(settings.drain_stall_forecast_factor),
    )
