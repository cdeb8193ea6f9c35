"""Test-support code that is not shipped: AWS-rule emulations, models, proxies."""
