"""EventBridge signals -> ledger. Thin entry point until the detection issue fills it:
it logs the event's source and detail-type and returns; it records nothing yet."""

from __future__ import annotations

from aws_lambda_powertools import Logger

logger = Logger(service="holdfast-detector")


@logger.inject_lambda_context
def handler(event, context):
    logger.info("signal received (not yet recorded)", extra={"source": event.get("source"), "detail_type": event.get("detail-type")})
    return {"recorded": 0}
