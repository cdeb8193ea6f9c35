"""The suite never reaches the network (tests/conftest.py `_offline`): a call moto does not
answer fails as it would on a machine without one, whatever the machine has."""

from __future__ import annotations

import socket

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError


def test_a_name_other_than_the_loopbacks_does_not_resolve():
    with pytest.raises(socket.gaierror, match="offline"):
        socket.getaddrinfo("ssm.us-east-1.amazonaws.com", 443)
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_an_aws_call_outside_moto_fails_to_connect_instead_of_reaching_aws():
    ssm = boto3.client("ssm", region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
    with pytest.raises(EndpointConnectionError):
        ssm.get_parameter(Name="/holdfast/settings")
