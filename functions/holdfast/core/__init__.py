"""The functional core: Holdfast's decisions and its domain model, pure.

No boto3, botocore or Powertools import, no clock read, no environment read
(.importlinter and tests/architecture keep it so). Everything here takes what was
observed, what was saved, the settings and `now`, and returns plain data:

- model.py     resources, records, outcomes, guards (what actuators exchange)
- kinds.py     the resource kinds, each declared once
- errors.py    Holdfast's errors, each saying whether retrying helps
- policy.py    the stage policy: which plan should be in force
- progress.py  what a tick records after walking a kind
- restore.py   what a restore writes back
- tags.py      the write-ahead tag codec
- signals.py, classify.py, detector.py   events -> signals -> verdict
- drain/       the drain stage's cap controller, its evidence, forecast and record,
               and the backlog arithmetic of `holdfast drain-estimate` (drain/estimate.py)
"""
