"""`holdfast doctor`'s checks: they live in holdfast.observation.readiness, where the
scheduled readiness function (holdfast.handlers.readiness) runs them too."""

from holdfast.observation.readiness import (  # noqa: F401  (the names doctor and its tests use)
    POWERTOOLS_LAYER_PARAMETER,
    POWERTOOLS_VERSION,
    RECONCILER_HANDLER,
    TAG_KEYS,
    Check,
    controller_permissions,
    expired_queue,
    health_rule,
    kind_requests,
    powertools_layer,
    reconciler_role,
    sample_arn,
    settings_drift,
)
