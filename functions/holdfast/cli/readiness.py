"""`holdfast doctor`'s checks: they live in holdfast.readiness, where the scheduled
readiness function (holdfast.handlers.readiness) runs them too."""

from holdfast.readiness import (  # noqa: F401  (the names doctor and its tests use)
    DESTINATIONS,
    POWERTOOLS_LAYER_PARAMETER,
    POWERTOOLS_VERSION,
    READ_VERBS,
    RECONCILER_HANDLER,
    TAG_KEYS,
    TAG_WRITES,
    Check,
    controller_permissions,
    destination_checks,
    destinations_unscheduled,
    expired_queue,
    health_rule,
    kind_requests,
    kind_writes,
    powertools_layer,
    reconciler_role,
    sample_arn,
    settings_drift,
    concurrency,
    retained_ledgers,
)
