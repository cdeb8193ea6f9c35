"""The drain: one SQS event source mapping's cap during the drain stage, decided from
what its queue, its function and its downstream show. Pure: stdlib only, no clock, no SDK.

The reasoning lives in docs/drain.md; the modules, one idea each:

- constants.py   the controller's few constants (`Constants`), states and actions
- inputs.py      what a tick is given: `Facts` from before the event, a `Reading`
- baseline.py    the pre-event baseline, from before the earliest sign of trouble
- evidence.py    the consumer's own evidence, and whether the dependency is back
- controller.py  the cap controller: `start`, `decide` and its rungs
- forecast.py    how long a drain takes
- record.py      one mapping's drain carried between ticks (`Drain`, `advance`)
- estimate.py    the arithmetic of `holdfast drain-estimate`
"""

from __future__ import annotations

from holdfast.core.drain.baseline import (  # noqa: F401
    Minute,
    baseline,
    baseline_end,
    first_anomaly,
    median,
)
from holdfast.core.drain.constants import (  # noqa: F401
    ALARM,
    ALARM_STATES,
    CRITICAL,
    CUT,
    DEFAULTS,
    HOLD,
    INSUFFICIENT_DATA,
    LAMBDA_MAX_CONCURRENCY,
    LAMBDA_MIN_CAP,
    OK,
    RAISE,
    RESTORE,
    START,
    WARNING,
    Constants,
    constants_from,
)
from holdfast.core.drain.controller import (  # noqa: F401
    PAID,
    PLATEAU,
    RUNGS,
    UNSURE,
    CapDecision,
    CapState,
    Measure,
    Tick,
    Verdict,
    arrivals_need,
    at_cap,
    baseline_need,
    carried_before,
    ceiling,
    climb,
    critical_levels,
    cut_target,
    decide,
    describe_raises,
    implausible,
    known_good,
    owners_limit,
    paid,
    probe_minute,
    raise_to,
    reference,
    remembered_for,
    slow_start_exit,
    start,
    step_share,
)
from holdfast.core.drain.evidence import (  # noqa: F401
    GOOD,
    UNKNOWN,
    Health,
    _ignored,
    consumer_health,
    counts,
    dependency_back,
    errors_above,
    noise,
)
from holdfast.core.drain.forecast import (  # noqa: F401
    Forecast,
    forecast,
    measured_forecast,
    per_batch_rate,
    ramp_forecast,
)
from holdfast.core.drain.inputs import (  # noqa: F401
    Alarm,
    Datapoint,
    Facts,
    Reading,
)
from holdfast.core.drain.record import (  # noqa: F401
    WAIT,
    Drain,
    Last,
    Step,
    advance,
)
