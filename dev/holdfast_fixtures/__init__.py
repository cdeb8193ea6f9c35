"""Test-support code that is not shipped: AWS-rule emulations, proxies, fleet builders, models."""
