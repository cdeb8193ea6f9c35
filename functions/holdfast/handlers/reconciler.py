"""The one-minute tick. Thin entry point until the reconciler issue fills it: it logs
and returns; it changes nothing yet."""

from __future__ import annotations

from aws_lambda_powertools import Logger

logger = Logger(service="holdfast-reconciler")


@logger.inject_lambda_context
def handler(event, context):
    logger.info("tick (reconciler not yet implemented)")
    return {"stage": None}
