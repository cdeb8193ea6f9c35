"""Requests that AWS applies late: a write one controller sent, held back and applied later.

A relaxing write can land after the controller that sent it has moved on: the SDK's
standard retry mode re-sends a throttled request (up to 3 attempts, with backoff) and one
whose read timed out although the service had already applied it (botocore,
"Retries": a timed-out request is retried as any transient error), so the service may
apply the same request again, later, after another controller's write. `LateRequests`
holds back every call of one operation a client makes (answered at once as accepted, as
botocore takes a `before-call` answer for the service's, or with a read timeout:
`timeout`), and `land()` sends them, in order, when the test says they arrive.

    with LateRequests(a_clients("lambda"), "UpdateEventSourceMapping") as late:
        ...                       # A's cap write is sent and "accepted", not applied
        ...                       # B's tick reads the mapping and writes its own cap
        late.land()               # A's write lands after B's
"""

from __future__ import annotations

from typing import Any


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


class LateRequests:
    """`timeout`: the sender sees its read time out (botocore's ReadTimeoutError, after which
    it gives up), while the service applies the request later (`land`): the request AWS
    had processed. Otherwise it is answered at once, as accepted, and applied later."""

    def __init__(self, client, operation: str, *, answer: dict[str, Any] | None = None, timeout: bool = False):
        self.client, self.operation, self.answer, self.timeout = client, operation, answer or {}, timeout
        self.held: list[dict[str, Any]] = []
        self._events = (f"before-parameter-build.{client.meta.service_model.service_name}.{operation}",
                        f"before-call.{client.meta.service_model.service_name}.{operation}")
        self._on = False

    def __enter__(self) -> "LateRequests":
        self.client.meta.events.register(self._events[0], self._keep)
        self.client.meta.events.register(self._events[1], self._hold)
        self._on = True
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._on:
            self.client.meta.events.unregister(self._events[0], self._keep)
            self.client.meta.events.unregister(self._events[1], self._hold)
            self._on = False

    def _keep(self, params, **_):
        self.held.append(dict(params))

    def _hold(self, **_):
        if self.timeout:
            from botocore.exceptions import ReadTimeoutError

            raise ReadTimeoutError(endpoint_url=self.client.meta.endpoint_url)

        class Accepted:   # botocore takes a before-call answer as the service's
            status_code = 200
            headers: dict = {}

        return Accepted(), dict(self.answer)

    def land(self) -> int:
        """Send every held request now (holding stops); how many were sent."""
        self._stop()
        held, self.held = self.held, []
        for params in held:
            getattr(self.client, _snake(self.operation))(**params)
        return len(held)
