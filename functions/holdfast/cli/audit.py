"""CLI commands: audit (filled by its issue)."""

from __future__ import annotations


def register(sub) -> None:
    """No commands here yet."""
