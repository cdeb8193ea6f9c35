"""A client-side rate limit shared by threads (Lambda's control plane: ~15 requests/s in all)."""

from __future__ import annotations

import threading
import time
from typing import Callable


class TokenBucket:
    """A client-side rate limit shared by threads (Lambda's control plane: ~15 writes/s in all)."""

    def __init__(self, rate: float, *, burst: float = 1.0, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._monotonic = monotonic
        self._sleep = sleep
        self._last = monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        """Wait until a token is free, then spend it."""
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait:
            self._sleep(wait)
