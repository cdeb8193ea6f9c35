"""The functional core: Holdfast's decisions and its domain model, pure.

No boto3, botocore or Powertools import, no clock read, no environment read
(.importlinter and tests/architecture keep it so). Everything here takes what was
observed, what was saved, the settings and `now`, and returns plain data:

- model.py       resources, records, outcomes, guards (what actuators exchange)
- kinds/         the resource kinds, each declared once with its audit rule and its words
- errors.py      Holdfast's errors, each saying whether retrying helps
- own.py         Holdfast's own resources: never engaged, whatever their tags
- tags.py        the write-ahead tag codec
- restore.py     what a restore writes back
- pollers.py     a provisioned mapping's cap, as event pollers
- signals.py, classify.py, ec2_errors.py, detector.py   events -> signals -> verdict
- policy.py      the stage policy: which plan should be in force
- evidence.py    the built-in evidence the stage gates read
- gates.py       each stage's built-in gate over that evidence
- progress.py    what a tick records after walking a kind
- order.py       the order of an engage walk: the most harm capped first
- capacity.py    the capacity stage's waves
- replay.py      the replay stage: old work back at a bounded rate
- release.py     an operator's release request, and what the reconciler decides about it
- evacuation.py  a Region switch evacuation, as Holdfast sees it
- announce.py    a stage change as an operator reads it
- audit.py       `holdfast audit`'s findings, and the rules that are not a kind's
- drain/         the drain stage's cap controller, its evidence, forecast and record,
                 and the backlog arithmetic of `holdfast drain-estimate` (drain/estimate.py)

tests/architecture/test_rules.py fails when a module of the core is missing here.
"""
