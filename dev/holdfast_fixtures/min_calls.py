"""The fewest API calls a correct engage or full restore needs, per kind and service, and
the floor each quota sets on the time they take.

A model, from the AWS API references, of what cannot be skipped:

Reads (bulk wherever an API lists in bulk):
- asg: DescribeAutoScalingGroups with a `tag:KEY` filter, 100 groups a page, suspended
  processes and tags included.
- esm: ListEventSourceMappings, 100 a response whatever MaxItems says (its API
  reference), over every mapping of the account. Then one ListTags per SQS mapping
  (`esm_tags="listtags"`, the default): a mapping's own tags both select it (when its
  function's do not) and carry its record, which an engage while the ledger was
  unreachable wrote nowhere else, so even a mapping its function selects needs them
  before a write (reading none would re-record an owner's change as the original:
  nothing an owner changed is lost). `esm_tags="tagging"` counts instead a GetResources
  page of 100 per mapping selected by its own tag and no ListTags: what it would cost if
  the Tagging API's index could be trusted for the records, which it cannot (AWS updates
  it asynchronously: it may lag a tag written or removed), so it is a what-if, not the
  minimum. (This model's first version made "tagging" the default; the issue's "about
  350 s" counts the ListTags.) `esm_tags="index"` is what Holdfast does: those
  GetResources pages as an index (the API "support[s] all resource types" but those its
  reference names, mappings not among them), and every ListTags still made, after the
  caps of the mappings it lists (`lambda_before_caps`). The function's reserved
  concurrency (a cap above it only throttles; below the floor the mapping is skipped): one GetFunction per
  distinct function of a mapping the floor lowers (`esm_lowered_functions`), on
  GetFunction's own 100/s budget — there is no bulk read of it.
- async: GetResources (lambda:function, 100 a page) finds the functions and their tags;
  there is no bulk read of async configs, so one GetFunctionEventInvokeConfig each; and
  one ListAliases each (an alias with no async config of its own is engaged with one:
  only ListAliases names it), on engage only, in the walk's later phase after every
  listed config is engaged (they delay no cap; they count toward the total). A walk
  that spans ticks lists a few functions' aliases twice (steps finished past the one
  the deadline stopped): not counted, as no correct engage needs them.
- nlb: GetResources (elasticloadbalancing:targetgroup) for the tags; DescribeTargetGroups
  (400 a page, every group of the account) for the protocol; one
  DescribeTargetGroupAttributes each.
- restore reads the records from the ledger (one Query page per 1 MB, a few thousand
  small records) rather than a tag read per resource, and lists each kind (a record may
  be on a tag only: engaged while the ledger was unreachable): the same listings as
  engage, less the per-resource reads the ledger makes moot. Before each relaxing write
  a fresh read of what it decides from (never overwrite an owner's change):
  GetEventSourceMapping per mapping (the listing is minutes old by then),
  GetFunctionEventInvokeConfig per async config, DescribeTargetGroupAttributes per
  target group; Auto Scaling's listing is the read (ResumeProcesses names only the
  processes Holdfast suspended, so it cannot undo an owner's change). A mapping the
  ledger holds no record for has its tags read (ListTags), as on engage.

Writes, only for resources that need one (`engaged`: the engage outcomes "engaged"):
- the setting: one call per resource (SuspendProcesses / ResumeProcesses,
  UpdateEventSourceMapping, Put/Update/DeleteFunctionEventInvokeConfig,
  ModifyTargetGroupAttributes): no API takes several resources;
- the write-ahead record on the resource (write-ahead), two tags: batched where the API
  takes several resources: Auto Scaling CreateOrUpdateTags / DeleteTags, 25 tags a call
  (12 groups of 2 tags; DeleteTags assumed to take as many); ELB AddTags, 20 ARNs a
  call but one tag set for all of them, so one call per 20 groups with the same record;
  RemoveTags, 20 ARNs (same keys); Lambda TagResource / UntagResource, one resource a
  call. With `tag_record=False` the model counts a record kept in the ledger alone.
- the ledger record: one DynamoDB write per resource (a conditional put on engage, a
  delete on restore). DynamoDB's quotas are far above these rates: it never sets a floor.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

RECORD_TAGS = 2                 # holdfast:original, holdfast:applied
ASG_TAGS_PER_CALL = 25          # CreateOrUpdateTags takes at most 25 tags a call (Auto Scaling API reference); DeleteTags assumed the same
ELB_ARNS_PER_TAG_CALL = 20      # AddTags / RemoveTags
PAGE = {"asg": 100, "esm": 100, "tagging": 100, "nlb": 400}


@dataclass
class Fleet:
    """What the model needs to know about the fleet and the engage that ran on it."""

    selected: Mapping[str, int]                 # kind -> selected resources
    engaged: Mapping[str, int]                  # kind -> resources that needed a write
    all_mappings: int                           # every mapping in the account (listing)
    all_target_groups: int                      # every target group in the account (listing)
    esm_by_own_tag: int                         # selected mappings selected by their own tag
    esm_lowered_functions: int = 0              # distinct functions of mappings the floor lowers
    nlb_records: Iterable[int] = field(default_factory=list)   # engaged groups per distinct record


def _pages(n: int, size: int) -> int:
    return max(1, math.ceil(n / size)) if n else 1


def engage(f: Fleet, *, esm_tags: str = "listtags", tag_record: bool = True) -> dict[str, Counter[str]]:
    """kind -> Counter("service:Operation" -> calls) of the fewest calls of a correct engage."""
    if esm_tags not in ("tagging", "listtags", "index"):
        raise ValueError("esm_tags is 'tagging', 'listtags' or 'index'")
    out: dict[str, Counter[str]] = {}
    n, e = f.selected.get("asg", 0), f.engaged.get("asg", 0)
    out["asg"] = Counter({
        "autoscaling:DescribeAutoScalingGroups": _pages(n, PAGE["asg"]),
        "autoscaling:SuspendProcesses": e,
        "autoscaling:CreateOrUpdateTags": math.ceil(e * RECORD_TAGS / ASG_TAGS_PER_CALL) if tag_record else 0,
        "dynamodb:PutItem": e,
    })
    e = f.engaged.get("esm", 0)
    esm = Counter({
        "lambda:ListEventSourceMappings": _pages(f.all_mappings, PAGE["esm"]),
        "lambda:GetFunction": f.esm_lowered_functions,
        "lambda:UpdateEventSourceMapping": e,
        "lambda:TagResource": e if tag_record else 0,
        "dynamodb:PutItem": e,
    })
    if esm_tags in ("listtags", "index"):
        esm["lambda:ListTags"] = f.all_mappings
    if esm_tags in ("tagging", "index") and f.esm_by_own_tag:
        esm["tagging:GetResources"] = _pages(f.esm_by_own_tag, PAGE["tagging"])
    out["esm"] = esm
    n, e = f.selected.get("async", 0), f.engaged.get("async", 0)
    out["async"] = Counter({
        "tagging:GetResources": _pages(n, PAGE["tagging"]),   # also gives esm its functions' tags
        "lambda:GetFunctionEventInvokeConfig": n,
        "lambda:ListAliases": n,
        "lambda:PutOrUpdateFunctionEventInvokeConfig": e,
        "lambda:TagResource": e if tag_record else 0,
        "dynamodb:PutItem": e,
    })
    n, e = f.selected.get("nlb", 0), f.engaged.get("nlb", 0)
    records = list(f.nlb_records) or ([e] if e else [])
    out["nlb"] = Counter({
        "tagging:GetResources": _pages(n, PAGE["tagging"]),
        "elasticloadbalancing:DescribeTargetGroups": _pages(f.all_target_groups, PAGE["nlb"]),
        "elasticloadbalancing:DescribeTargetGroupAttributes": n,
        "elasticloadbalancing:ModifyTargetGroupAttributes": e,
        "elasticloadbalancing:AddTags": sum(math.ceil(g / ELB_ARNS_PER_TAG_CALL) for g in records) if tag_record else 0,
        "dynamodb:PutItem": e,
    })
    return {k: +c for k, c in out.items()}


def lambda_before_caps(f: Fleet, *, esm_tags: str = "listtags") -> int:
    """The Lambda control-plane calls (GetFunction has its own budget) an engage cannot avoid
    before its last mapping's cap: the listing and every cap, and without the index the
    ListTags of every mapping its function's tag does not select (any of them may be one its
    own tag selects); with it ("index"), none: the mappings it lists are capped first, each
    with one call, and their ListTags follow the caps."""
    by_function = f.selected.get("esm", 0) - f.esm_by_own_tag
    reads = 0 if esm_tags in ("index", "tagging") else f.all_mappings - by_function
    return _pages(f.all_mappings, PAGE["esm"]) + reads + f.engaged.get("esm", 0)


def restore(f: Fleet, *, tag_record: bool = True) -> dict[str, Counter[str]]:
    """kind -> the fewest calls of a full restore of what `engage` engaged."""
    out: dict[str, Counter[str]] = {}
    ledger_pages = 1   # one Query page holds thousands of small records; counted once, under asg
    n, e = f.selected.get("asg", 0), f.engaged.get("asg", 0)
    out["asg"] = Counter({
        "dynamodb:Query": ledger_pages,
        "autoscaling:DescribeAutoScalingGroups": _pages(n, PAGE["asg"]),
        "autoscaling:ResumeProcesses": e,
        "autoscaling:DeleteTags": math.ceil(e * RECORD_TAGS / ASG_TAGS_PER_CALL) if tag_record else 0,
        "dynamodb:DeleteItem": e,
    })
    e = f.engaged.get("esm", 0)
    out["esm"] = Counter({
        "lambda:ListEventSourceMappings": _pages(f.all_mappings, PAGE["esm"]),
        "lambda:ListTags": max(0, f.all_mappings - e),      # no ledger record: a record may be on the tag only
        "lambda:GetEventSourceMapping": e,                   # the fresh read before the write
        "lambda:UpdateEventSourceMapping": e,
        "lambda:UntagResource": e if tag_record else 0,
        "dynamodb:DeleteItem": e,
    })
    e = f.engaged.get("async", 0)
    out["async"] = Counter({
        # The functions' tags (a record on a tag only); the engaged configs' ARNs are in the ledger.
        "tagging:GetResources": _pages(f.selected.get("async", 0), PAGE["tagging"]),
        "lambda:GetFunctionEventInvokeConfig": e,            # the fresh read before the write
        "lambda:PutOrDeleteFunctionEventInvokeConfig": e,
        "lambda:UntagResource": e if tag_record else 0,
        "dynamodb:DeleteItem": e,
    })
    e = f.engaged.get("nlb", 0)
    out["nlb"] = Counter({
        "tagging:GetResources": _pages(f.selected.get("nlb", 0), PAGE["tagging"]),
        "elasticloadbalancing:DescribeTargetGroupAttributes": e,
        "elasticloadbalancing:ModifyTargetGroupAttributes": e,
        "elasticloadbalancing:RemoveTags": math.ceil(e / ELB_ARNS_PER_TAG_CALL) if tag_record else 0,
        "dynamodb:DeleteItem": e,
    })
    return {k: +c for k, c in out.items()}


def by_service(per_kind: Mapping[str, Mapping[str, int]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for calls in per_kind.values():
        for op, n in calls.items():
            out[op.split(":")[0]] += n
    return out


def floor_seconds(calls: int, rate: float, burst: float = 0.0) -> float:
    """The least time `calls` take through a token bucket of `rate`/s that starts with `burst`."""
    return max(0.0, calls - burst) / rate if calls else 0.0
