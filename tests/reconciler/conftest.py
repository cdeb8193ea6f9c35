"""Fixtures for the reconciler tests: the harness (tests/support/harness.py)."""

from tests.support.harness import harness  # noqa: F401  (a fixture)
