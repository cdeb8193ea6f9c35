"""Fixtures for the actuator tests; builders live in fleet.py."""

from __future__ import annotations

import pytest

from holdfast.settings import Settings


@pytest.fixture
def settings() -> Settings:
    return Settings()


from tests.support.fleet import aws_semantics  # noqa: E402,F401  (a fixture)
