"""Instance health as EC2 Auto Scaling applies it, where moto 5.2.5 does nothing.

AWS (EC2 Auto Scaling User Guide, "Health checks for instances in an Auto Scaling group"):
an instance starts Healthy and is marked Unhealthy when a health check source says so
(EC2 status checks, and Elastic Load Balancing for a group with ELB health checks); an
InService instance marked Unhealthy is replaced. While ReplaceUnhealthy is suspended the
mark is still set and never cleared by itself ("How suspended processes affect other
processes": with ReplaceUnhealthy suspended, HealthCheck still marks instances unhealthy;
when it resumes, Auto Scaling immediately replaces the instances marked while it was
suspended: it terminates them first, then launches their replacements). SetInstanceHealth
with Healthy clears a mark.

moto's health checks never fail, so nothing is ever marked, and ResumeProcesses only
changes the list of suspended processes. `InstanceHealth` gives tests the failing checks:

    with InstanceHealth() as health:
        health.fail("i-0123")      # EC2 status impaired, `unhealthy` in every target group;
                                   # the group marks it (and replaces it now unless
                                   # ReplaceUnhealthy is suspended)
        health.recover("i-0123")   # the checks pass again; the mark stays
        health.terminated          # every instance the emulation terminated, in order

The emulation reads and writes moto's in-process backends (a test's `mock_aws`).
"""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

REPLACE_UNHEALTHY = "ReplaceUnhealthy"


class InstanceHealth:
    def __init__(self, account: str = "123456789012", region: str = "us-east-1"):
        self.account, self.region = account, region
        self.failing: set[str] = set()
        self.terminated: list[str] = []
        self._stack = ExitStack()

    # ---- moto's backends ---------------------------------------------------------------

    def _autoscaling(self):
        from moto.autoscaling.models import autoscaling_backends
        return autoscaling_backends[self.account][self.region]

    def _state(self, instance_id: str):
        for group in self._autoscaling().autoscaling_groups.values():
            for state in group.instance_states:
                if state.instance.id == instance_id:
                    return group, state
        raise KeyError(f"{instance_id} is in no Auto Scaling group")

    @staticmethod
    def _suspended(group) -> bool:
        return REPLACE_UNHEALTHY in {p["ProcessName"] if isinstance(p, dict) else p for p in group.suspended_processes}

    def _replace(self, group) -> None:
        """ReplaceUnhealthy at work: terminate every marked instance, then launch replacements."""
        backend = self._autoscaling()
        for state in [s for s in group.instance_states if s.health_status == "Unhealthy"]:
            self.terminated.append(state.instance.id)
            self.failing.discard(state.instance.id)
            backend.terminate_instance(state.instance.id, should_decrement=False)

    # ---- what a test does ----------------------------------------------------------------

    def fail(self, instance_id: str) -> None:
        group, state = self._state(instance_id)
        self.failing.add(instance_id)
        state.health_status = "Unhealthy"
        if not self._suspended(group):
            self._replace(group)

    def recover(self, instance_id: str) -> None:
        self.failing.discard(instance_id)

    # ---- the patches ---------------------------------------------------------------------

    def __enter__(self) -> "InstanceHealth":
        from moto.autoscaling.models import AutoScalingBackend
        from moto.ec2.models.instances import Instance
        from moto.elbv2.models import FakeHealthStatus, FakeTargetGroup

        health = self
        resume = AutoScalingBackend.resume_processes

        def resume_processes(backend, group_name, scaling_processes):
            resume(backend, group_name, scaling_processes)
            group = backend.autoscaling_groups[group_name]
            if not health._suspended(group):
                health._replace(group)

        health_for = FakeTargetGroup.health_for

        def target_health(group, target, ec2_backend):
            answer = health_for(group, target, ec2_backend)
            if target["Id"] in health.failing and answer.status == "healthy":
                return FakeHealthStatus(target["Id"], answer.port, group.health_check_port, "unhealthy",
                                        "Target.FailedHealthChecks", "Health checks failed")
            return answer

        def status(check):
            def read(instance):
                answer = check.fget(instance)
                if instance.id in health.failing and answer.get("Status") == "ok":
                    return {"Details": [{"Name": "reachability", "Status": "failed"}], "Status": "impaired"}
                return answer
            return property(read)

        self._stack.enter_context(mock.patch.object(AutoScalingBackend, "resume_processes", resume_processes))
        self._stack.enter_context(mock.patch.object(FakeTargetGroup, "health_for", target_health))
        self._stack.enter_context(mock.patch.object(Instance, "instance_status", status(Instance.instance_status)))
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
