"""Progress lines for a stderr that is not a terminal (CI, SSM Run Command, a log file).

A terminal gets one line rewritten in place (Context.progress). Elsewhere a rewritten line
is noise, and a walk of several minutes that prints nothing looks hung; so a line is
printed at most every `every` seconds (and when a kind is done), with the time elapsed
and, from each kind's rate so far, an estimate of the time left for it.

The engine's messages are `"<verb> <kind>: <done>/<total>"` while it walks and free text
otherwise ("list asg"); only the first form carries an estimate.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime
from typing import TextIO

STEP = re.compile(r"^(?P<verb>\w+) (?P<kind>[\w-]+): (?P<done>\d+)/(?P<total>\d+)$")


def duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `1 h 10 min`: an estimate reads better without decimals."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class Progress:
    def __init__(self, out: TextIO, every: float, clock):
        self.out, self.every, self.clock = out, every, clock
        self._lock = threading.Lock()
        self._start: datetime | None = None
        self._last: datetime | None = None

    def step(self, message: str) -> None:
        if not message:   # the terminal's "clear the line": nothing to say here
            return
        now = self.clock.now()
        with self._lock:
            self._start = self._start or now
            m = STEP.match(message)
            edge = False
            estimate = ""
            if m:
                done, total = int(m["done"]), int(m["total"])
                edge = done == total
                if 0 < done < total:
                    # Kinds of different services walk at once, each from about the start.
                    rate = (now - self._start).total_seconds() / done
                    estimate = f", about {duration(rate * (total - done))} left for {m['kind']}"
                elif done == total:
                    estimate = f", {m['kind']} done"
            due = self._last is None or (now - self._last).total_seconds() >= self.every
            if not (due or edge):
                return
            self._last = now
            elapsed = duration((now - self._start).total_seconds())
            self.out.write(f"holdfast: progress: {message} ({elapsed} elapsed{estimate})\n")
            self.out.flush()
