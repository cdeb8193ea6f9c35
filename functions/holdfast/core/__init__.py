"""Holdfast's pure core: decisions over plain data, no AWS SDK, no clock, no environment."""
