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

from holdfast.core.drain.constants import (  # noqa: F401
    LAMBDA_MAX_CONCURRENCY, LAMBDA_MIN_CAP, OK, ALARM, INSUFFICIENT_DATA, ALARM_STATES, WARNING, CRITICAL, START, RAISE, HOLD, CUT, RESTORE, Constants, DEFAULTS, constants_from,
)
from holdfast.core.drain.inputs import (  # noqa: F401
    Datapoint, Alarm, Facts, _FACT_FIELDS, Reading,
)
from holdfast.core.drain.evidence import (  # noqa: F401
    GOOD, UNKNOWN, _RANK, Health, duration_thresholds, noise, slower, lower, own_speed, raise_below, consumer_health, _ignored, counts, errors_above, dependency_back,
)
from holdfast.core.drain.baseline import (  # noqa: F401
    Minute, median, _quartile, first_anomaly, baseline_end, baseline,
)
from holdfast.core.drain.controller import (  # noqa: F401
    CapState, CapDecision, raise_to, describe_raises, ceiling, _floor, baseline_need, implausible, carried_before, start, cut_target, probe_minute, decide, _remembered, _forgotten,
)
from holdfast.core.drain.forecast import (  # noqa: F401
    Forecast, per_batch_rate, forecast, ramp_forecast, measured_forecast,
)
from holdfast.core.drain.record import (  # noqa: F401
    WAIT, _iso, _when, _forecast_dict, _forecast_from, Last, Drain, Step, advance,
)
