"""The services an API probe may name are the ones the probes can call: the settings'
choice is derived from the probes' calls (declared once, in holdfast.core.signals)."""

from __future__ import annotations

from holdfast import settings
from holdfast.core.signals import PROBE_API_CALLS
from holdfast.observation import probes


def test_the_settings_accept_exactly_the_services_the_probes_call():
    assert probes.API_CALLS is PROBE_API_CALLS
    assert settings.PROBE_API_SERVICES == tuple(PROBE_API_CALLS)
