"""What a handler needs from its environment, built once per container, never at import.

Environment (contracts §1): HOLDFAST_SETTINGS, HOLDFAST_LEDGER_TABLE (and AWS_REGION,
which boto3 reads). Tests and the demo inject their own Shell through each handler's
`use(shell)`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..aws import Clients
from ..clock import Clock, SystemClock
from ..ledger import DEFAULT_TABLE
from ..settings import ENV_VAR, Settings

LEDGER_TABLE_ENV = "HOLDFAST_LEDGER_TABLE"


@dataclass
class Shell:
    clients: Clients
    settings: Settings
    table: str
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def from_env(cls) -> "Shell":
        return cls(
            clients=Clients(),
            settings=Settings.from_json(os.environ.get(ENV_VAR)),
            table=os.environ.get(LEDGER_TABLE_ENV, DEFAULT_TABLE),
        )
