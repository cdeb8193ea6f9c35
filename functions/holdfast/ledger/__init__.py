"""The ledger: one DynamoDB table, on demand, that holds Holdfast's durable state.

Key schema: partition key `pk` (S), sort key `sk` (S); TTL attribute `expires_at`
(epoch seconds). Item families, each owned by one module:

| pk                          | sk                         | module              |
|-----------------------------|----------------------------|---------------------|
| `RES`                       | `<arn>`                    | ledger.resources    |
| `SIGNAL#<yyyy-mm-ddThh>`    | `<iso time>#<signal id>`   | ledger.signals      |
| `HEALTH`                    | `<eventArn>#<commId>`      | ledger.signals      |
| `PLAN`                      | `CURRENT` / `GEN#<gen:012>`| ledger.plan         |
| `PLAN`                      | `LEASE#<controller>`       | ledger.leases       |
| `PLAN`                      | `ENGAGE-WALK` / `TICK-TRIGGER` | ledger.claims   |
| `CONTROL`                   | `PAUSE` / `ADVANCE` / `HELD` | ledger.control    |
| `CONTROL`                   | `EVACUATION#<plan ARN>`    | ledger.control      |
| `BUDGET`                    | `<budget>#<controller>`    | ledger.budget_board |
| `STUCK`                     | `<arn>`                    | ledger.failures     |
| `WALK`                      | `<gen:012>#<marker>`       | ledger.walks        |
| `DRAIN` / `REPLAY`          | `<mapping arn>` / `<queue arn>` | ledger.drain   |
| `WAVES`                     | `capacity#<gen:012>`       | ledger.drain        |
| `PLAN`                      | `VERDICT`                  | ledger.verdict      |
| `READINESS`                 | `LAST`                     | ledger.readiness    |

Beside the families: ledger.store (`Ledger`, below), ledger.conditions (every conditional
write's named condition, with the race it prevents), ledger.table (create the table where
it is missing) and ledger.summary (one region's ledger at a glance, for `status
--all-accounts`). tests/architecture/test_rules.py fails when a module is missing here.

Old plans and signals leave by TTL only; nothing deletes the active plan or the
original record of an engaged resource.

`Ledger` (ledger/store.py) is one tick's ledger: the Runtime builds it (a command builds
its own the same way, `Runtime.ledger()`), every family function takes it
(`plan.read(ledger)`, `control.set_paused(ledger, ...)`) and makes its DynamoDB calls
through it, and the tick's readers share its one Query of the resource records and of
the drain's records.
"""

from __future__ import annotations

DEFAULT_TABLE = "holdfast-ledger"
PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expires_at"

from holdfast.ledger.store import Ledger  # noqa: E402  (after PK and SK, which it imports)

__all__ = ["DEFAULT_TABLE", "PK", "SK", "TTL_ATTRIBUTE", "Ledger"]
