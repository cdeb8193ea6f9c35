"""The stages whose work is more than one walk toward a posture, as the reconciler runs them
each tick: the drain (a feedback cap controller per mapping, `drain.py`) and the replay
(old work moved back at a bounded rate, `replay.py`). Each reads in bulk (holdfast
.observation), decides with the pure core (holdfast.core.drain, holdfast.core
.replay), and keeps its per-resource records in the ledger (holdfast.ledger.drain), every
write conditional on the plan generation."""
