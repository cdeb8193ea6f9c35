"""Fixtures for the scenario suites: the reconciler's harness (tests/support/harness.py)."""

from tests.support.harness import harness  # noqa: F401  (a fixture)
