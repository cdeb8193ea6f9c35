"""`holdfast doctor`'s checks: they live in holdfast.readiness, where the scheduled
readiness function (holdfast.handlers.readiness) runs them too."""

from holdfast.readiness import (  # noqa: F401  (the names doctor and its tests use)
    POWERTOOLS_LAYER_PARAMETER,
    POWERTOOLS_VERSION,
    READ_VERBS,
    RECONCILER_HANDLER,
    TAG_KEYS,
    TAG_WRITES,
    Check,
    controller_permissions,
    expired_queue,
    health_rule,
    kind_requests,
    kind_writes,
    powertools_layer,
    reconciler_role,
    sample_arn,
    settings_drift,
)
