"""The capacity stage's waves: which Auto Scaling groups get their processes back this tick.

Pure: no boto3, no clock. While ReplaceUnhealthy is suspended, instances that fail their
EC2 or ELB health checks are still marked unhealthy, and such a mark never clears by
itself; when ReplaceUnhealthy resumes, Auto Scaling terminates every marked instance
first and launches the replacements after (EC2 Auto Scaling User Guide, "How suspended
processes affect other processes" and "Health checks for instances in an Auto Scaling
group"). Resuming every group at once after an event would terminate, at once and in
every group, every instance marked during the hold: the capacity cliff Holdfast exists
to prevent, moved to the end. So the capacity stage (holdfast.stages.capacity) asks
`decide` each tick, and carries out its Step:

1. **Reset what is healthy now.** Before a group is resumed, each of its instances marked
   Unhealthy whose health checks pass now (`Group.healthy_now`: its EC2 status, and its
   target health in every target group when the group uses ELB health checks, read by
   the shell) is set Healthy again (`Step.resets`); the rest are left to replace.
2. **Waves.** A wave takes groups, fewest instances left to replace first, while it holds
   at most `capacity_wave_groups_percent` of the stage's groups and
   `capacity_wave_instances_percent` of the instances left to replace (always at least one
   group, so every wave makes progress). The next wave waits `capacity_wave_minutes`.
3. **Step back on launch failures.** A group resumed in an earlier wave with a
   capacity-class launch failure after its wave is engaged again (`Step.step_back`: its
   processes suspended, written ahead as any engage): its replacements cannot launch, so
   it must not terminate more. The next wave then waits `capacity_wave_minutes` from that
   failure and takes one group; a group stepped back, or whose own launches fail, joins a
   later wave once it has had no capacity failure for `capacity_wave_minutes`.

A wave is recorded (`Step.record`, before any write) and then carried out: a tick that
stops after the record is followed by one that finishes the recorded wave (its groups
still held) before it waits for the next. The stage is finished when no group is held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping


@dataclass(frozen=True)
class Group:
    """One Auto Scaling group as the capacity stage sees it this tick."""

    arn: str
    name: str
    held: bool                        # Holdfast's record is on it: its processes are still held
    marked: tuple[str, ...] = ()      # its instances marked Unhealthy
    # Of `marked`, the instances whose health checks pass now; None: not read this tick.
    healthy_now: tuple[str, ...] | None = None
    failed_at: datetime | None = None   # its latest capacity-class launch failure, if any

    @property
    def to_replace(self) -> int:
        """The instances a resume would terminate: marked and not healthy now (all of the
        marked ones while their health is unread)."""
        return len(self.marked) - len(self.healthy_now or ())


@dataclass(frozen=True)
class Wave:
    number: int
    at: datetime
    groups: tuple[str, ...]
    marked: int          # instances marked Unhealthy in its groups
    reset: int           # of those, set Healthy again before the resume
    to_replace: int      # left to replace: what the resume terminates (and Auto Scaling replaces)

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "at": self.at.isoformat(), "groups": list(self.groups),
                "marked": self.marked, "reset": self.reset, "to_replace": self.to_replace}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Wave":
        return cls(int(raw["number"]), datetime.fromisoformat(raw["at"]), tuple(raw["groups"]),
                   int(raw["marked"]), int(raw["reset"]), int(raw["to_replace"]))


@dataclass(frozen=True)
class Waves:
    """The stage's record: its waves so far, and the groups stepped back (ARN -> when)."""

    generation: int
    total: int                        # groups held when the stage's first wave was decided
    waves: tuple[Wave, ...] = ()
    stepped_back: Mapping[str, datetime] = field(default_factory=dict)

    @property
    def last(self) -> Wave | None:
        return self.waves[-1] if self.waves else None

    def resumed_at(self, arn: str) -> datetime | None:
        """When `arn`'s latest wave began (None: in no wave yet)."""
        return max((w.at for w in self.waves if arn in w.groups), default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "total": self.total, "waves": [w.to_dict() for w in self.waves],
                "stepped_back": {a: t.isoformat() for a, t in sorted(self.stepped_back.items())}}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Waves":
        return cls(int(raw["generation"]), int(raw["total"]), tuple(Wave.from_dict(w) for w in raw.get("waves") or ()),
                   {a: datetime.fromisoformat(t) for a, t in (raw.get("stepped_back") or {}).items()})

    def totals(self) -> dict[str, int]:
        """Marked, reset and left to replace over every wave: what `holdfast stage` says."""
        return {"waves": len(self.waves), "groups": sum(len(w.groups) for w in self.waves),
                "marked": sum(w.marked for w in self.waves), "reset": sum(w.reset for w in self.waves),
                "to_replace": sum(w.to_replace for w in self.waves), "stepped_back": len(self.stepped_back)}


@dataclass(frozen=True)
class Step:
    """What the stage does this tick, in order: write `record` (when `write`), engage
    `step_back` again, set `resets` Healthy, resume `resume`."""

    record: Waves
    write: bool = False
    step_back: tuple[str, ...] = ()
    resets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # group ARN -> instance ids
    resume: tuple[str, ...] = ()
    # A wave is due and these groups' instance health must be read first (then decide again).
    read_health: tuple[str, ...] = ()
    waiting: str | None = None
    finished: bool = False
    wave: Wave | None = None          # the wave started (or finished) this tick


def decide(groups: list[Group], record: Waves | None, now: datetime, settings, *, generation: int,
           stuck: frozenset[str] = frozenset()) -> Step:
    """This tick's step of the capacity stage (see the module docstring). `stuck`: groups
    whose restore keeps failing; they are left out of the waves and do not keep the stage
    from finishing (the reconciler retries stuck restores once the kind is done)."""
    by_arn = {g.arn: g for g in groups}
    held = [g for g in groups if g.held and g.arn not in stuck]
    record = record if record is not None and record.generation == generation else \
        Waves(generation, total=len(held))
    hold = timedelta(minutes=settings.capacity_wave_minutes)

    # Step back: a resumed group whose launches failed after its wave is held again (and
    # again next tick, should the engage not have landed).
    back = tuple(sorted(g.arn for g in groups if not g.held and g.failed_at is not None
                        and (r := record.resumed_at(g.arn)) is not None and g.failed_at > r))
    if back:
        stepped = {**record.stepped_back, **{a: by_arn[a].failed_at for a in back}}
        changed = stepped != dict(record.stepped_back)
        record = replace(record, stepped_back=stepped)
        return Step(record, write=changed, step_back=back,
                    waiting=f"stepped back: {len(back)} group(s) whose replacements failed to launch are held again")
    if not held:
        return Step(record, finished=True)

    # A wave recorded by a tick that stopped before it resumed every group: finish it.
    last = record.last
    if last is not None:
        unfinished = [by_arn[a] for a in last.groups if a in by_arn and by_arn[a].held and a not in stuck
                      and not (a in record.stepped_back and record.stepped_back[a] >= last.at)]
        if unfinished:
            unread = tuple(sorted(g.arn for g in unfinished if g.marked and g.healthy_now is None))
            if unread:
                return Step(record, read_health=unread)
            return _carry_out(record, unfinished, last, write=False)

    # The hold between waves, from the last wave or the last step back.
    latest = max([t for t in [last.at if last else None, *record.stepped_back.values()] if t is not None],
                 default=None)
    if latest is not None and now - latest < hold:
        left = hold - (now - latest)
        return Step(record, waiting=f"next wave in {left.total_seconds() / 60:.1f} min "
                                    f"(capacity_wave_minutes {settings.capacity_wave_minutes})")
    ready = [g for g in held if g.failed_at is None or now - g.failed_at >= hold]
    if not ready:
        return Step(record, waiting=f"{len(held)} held group(s) with capacity-class launch failures in the last "
                                    f"{settings.capacity_wave_minutes} min: no wave until their launches succeed")
    unread = tuple(sorted(g.arn for g in ready if g.marked and g.healthy_now is None))
    if unread:
        return Step(record, read_health=unread)

    wave = _pick(ready, held, record, settings, after_step_back=bool(record.stepped_back) and (
        last is None or max(record.stepped_back.values()) > last.at))
    number = (last.number if last else 0) + 1
    started = Wave(number, now, tuple(g.arn for g in wave), sum(len(g.marked) for g in wave),
                   sum(len(g.healthy_now or ()) for g in wave), sum(g.to_replace for g in wave))
    record = replace(record, waves=record.waves + (started,))
    return _carry_out(record, wave, started, write=True)


def _pick(ready: list[Group], held: list[Group], record: Waves, settings, *, after_step_back: bool) -> list[Group]:
    """The next wave: fewest instances to replace first, within both shares, at least one."""
    total = max(record.total, len(held))
    max_groups = 1 if after_step_back else max(1, math.ceil(total * settings.capacity_wave_groups_percent / 100))
    to_replace = sum(g.to_replace for g in held)
    max_instances = math.floor(to_replace * settings.capacity_wave_instances_percent / 100)
    wave: list[Group] = []
    replacing = 0
    for g in sorted(ready, key=lambda g: (g.to_replace, g.arn)):
        if len(wave) >= max_groups:
            break
        if wave and replacing + g.to_replace > max_instances:
            break
        wave.append(g)
        replacing += g.to_replace
    return wave


def _carry_out(record: Waves, groups: list[Group], wave: Wave, *, write: bool) -> Step:
    resets = {g.arn: tuple(sorted(g.healthy_now or ())) for g in groups if g.healthy_now}
    return Step(record, write=write, resets=resets, resume=tuple(g.arn for g in groups), wave=wave)
