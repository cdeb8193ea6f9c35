"""The engine: the fleet-level walks (engage, relax, release, status) over every selected
resource, one actuator per kind.

- `fleet`: Engine, its walks and their Report; TickEngine and WalkReport, the engine as
  a tick uses it (holdfast.reconciler).
- `bookkeeping`: where an engage walk stands and what the next walk of a kind may pass
  over (a candidate's position, the cursor, settled candidates, the walk keys a re-walk
  compares listings with), owned by the engine, read by no actuator.
"""

from holdfast.engine.bookkeeping import position
from holdfast.engine.fleet import SERVICE_OF, WRITERS, Engine, Report, TickEngine, WalkReport

__all__ = ["SERVICE_OF", "WRITERS", "Engine", "Report", "TickEngine", "WalkReport", "position"]
