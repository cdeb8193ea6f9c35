"""Holdfast: keep an account's own automation from turning a regional outage into a long one."""

__version__ = "0.1.0"
