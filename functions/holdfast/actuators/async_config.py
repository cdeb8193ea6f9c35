"""Lambda async invoke configs: fewer retries, and a shorter event age only where what
expires is kept.

One resource per *qualifier that has a config*, and per alias: each version and alias
has its own event invoke config, and events sent to `fn:live` follow `live`'s, not the
function's (ListFunctionEventInvokeConfigs lists them all, one call per selected
function). The unqualified config ($LATEST's) is the function's ARN, and is engaged
whether or not it exists yet; `arn:...:function:fn:live` is alias `live`'s, engaged
whether or not it has one too. A version without a config of its own is not one of them
(versions are invoked by number far less often than through an alias; listing them would
cost one more call per function again).

Which config an alias (or version) without one of its own follows, when invoked
asynchronously, AWS's documentation does not say. What it does say: each of "a
function, a version, or an alias" has its own config (Lambda Developer Guide,
"Configuring error handling settings for Lambda asynchronous invocations",
https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-configuring.html), and
"By default, Lambda retries an asynchronous invocation twice if the function returns an
error. It retains events in a queue for up to six hours" (API reference,
PutFunctionEventInvokeConfig,
https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionEventInvokeConfig.html).
Neither page, nor the API reference of Get/Update/ListFunctionEventInvokeConfigs, nor the
Developer Guide's pages on asynchronous invocation and on aliases, says whether the unqualified config is inherited. Users' reports point to the
defaults (an alias follows none of the function's config: serverless/serverless#11609,
"with provisioned concurrency you're creating a function alias, and then all settings
apply to this alias"; davidgf/serverless-plugin-canary-deployments#149, settings
"previously only applied to the unqualified ARN instead of the alias"), but they are not
AWS's word. So Holdfast does what is safe either way: an alias without a config of its
own gets one while engaged, with the same bounds as the function's (the posture of a
config with nothing set, i.e. of Lambda's defaults, which are also the most the
unqualified config can allow), so whichever config would otherwise apply, the alias's
retries and event age are bounded. Its original is recorded ahead as "no config"
(`config: False`, its values None), so the restore *deletes* the alias's config
(DeleteFunctionEventInvokeConfig with the Qualifier) rather than Putting one. A config
its owner put on the alias while engaged is theirs: each value that differs from what
Holdfast wrote is drift, kept and reported, and the restore Puts the owner's values back
instead of deleting (the rule of every kind; one limit, as for the unqualified config: an
owner value equal to Holdfast's reads as Holdfast's). An alias deleted while engaged is
vanished: its record's tags, which its function carries, go, then the ledger's copy.

Only ListAliases names an alias with no config: one more call per selected function, on
the one Lambda budget every call spends. So the listing (`candidates`) names the configs
alone, plus any qualifier whose record is on its function's tags with no config (a walk
stopped between the record and the Put: it is finished first, with the listed configs),
and the aliases are listed in the walk's later phase (`late_keys`, `late_candidates`;
holdfast.engine.bookkeeping): one step per function in ARN order, only once every listed
config is engaged (those carry the harm already known; no ListAliases delays their
caps), each alias engaged as its function's step finds it. A walk the deadline stops in
that phase leaves a cursor there (core.order.late_position: the last function whose
aliases were all engaged), and the next tick's walk passes over the settled configs and
resumes after it: across ticks, each function's aliases are listed once per plan
generation (a few twice: steps the tick's writers finished past the one the deadline
stopped), and a re-walk lists only those of functions no walk of the generation finished
(one newly selected, or whose listing failed). An alias created during a hold on a function
already listed is engaged at the next plan's walk, not by a re-walk. ListAliases that
fails for a function (the selector gone, the permission missing) leaves its configs
engaged and the walk going on: the step's own outcome (`aliases:<function ARN>`,
skipped, `notes["aliases"]`) says which aliases were left out, and the kind is not held
back. A relax lists aliases only to name one whose record key is a hash.

Keys (None = not set, so Lambda's default applies: 21,600 s and 2 retries):
`config` (whether the qualifier has an event invoke config at all), `max_age`,
`max_retries`, `on_failure` (the on-failure destination ARN). `OnSuccess` is read
but never managed.

Engaging never drops an event silently:
- retries are lowered to the setting (an owner value already lower stays);
- the event age is shortened only where an expired event is kept: the owner has an
  on-failure destination, or Holdfast's expired-events queue is attached as one; or
  where the owner opted in to discarding them, with the tag
  `holdfast:expired-events=discard` on the function (OPT_IN);
- Holdfast's queue is attached only when the owner has no destination. Lambda checks,
  when a destination is written, that the *function's execution role* may send to it
  (InvalidParameterValueException otherwise). When it refuses, or no queue is known,
  only the retries are bounded, the owner's event age is kept, and the outcome says
  why, with the IAM statement that lets the role deliver (`notes["destination"]`).
  The refusal joins the record (`dest_refused`, among the applied values, tag and
  ledger: one more record write, once), so a later walk of the same engagement does not
  ask Lambda again: engaging is idempotent, and a re-walk spends none of Lambda's 15
  calls a second on a write Lambda refused. The next engagement (after a restore) asks
  again, so a grant made meanwhile takes effect then.

The write-ahead record of a qualifier lives on its function's tags (Lambda tags
functions only, not versions or aliases): `holdfast:original` / `holdfast:applied` for
the unqualified config, `holdfast:original:<qualifier>` / `holdfast:applied:<qualifier>`
for a version or alias (a qualifier too long for a 128-character key is named by a hash,
`@<16 hex>`). Each record takes two of the function's 50 tags: one that has no room is
engaged through the ledger record only, or not at all without the ledger, and the
outcome says which (holdfast.actuators.tagged; nothing is changed without a record).
The tags come from the tagging API's index with the candidates: a record seen there that
the ledger does not vouch for is confirmed with ListTags first (`own_tags`).

The API shapes the writes: PutFunctionEventInvokeConfig replaces the whole config,
UpdateFunctionEventInvokeConfig changes only what it names but answers
ResourceNotFoundException when there is no config. So: no config -> Put (and a restore
deletes it); an existing config -> Update with only what changes; a restore Puts the
whole config back, built from the current config with Holdfast's keys decided, so the
owner's destinations and any drift survive.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import replace
from typing import Any, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.actuators.selection import selected, tagged
from holdfast.actuators.tagged import LambdaTagged, TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS, destination_refused, error_code, error_text
from holdfast.core import kinds, restore
from holdfast.core.audit import AuditResult, Progress, retry_mode_finding
from holdfast.core.errors import Conflict, Vanished
from holdfast.core.model import ALREADY, ENGAGED, SKIPPED, Candidate, Outcome, Record, Resource, StalePlan
from holdfast.core.tags import APPLIED_KEY, ORIGINAL_KEY, TagError, decode
from holdfast.iam import uses

logger = logging.getLogger(__name__)

DEFAULT_MAX_AGE = 21600
DEFAULT_MAX_RETRIES = 2
MANAGED = ("config", "max_age", "max_retries", "on_failure")
# The owner's opt-in to a shorter event age with no destination: expired events are dropped.
OPT_IN_KEY, OPT_IN_DISCARD = "holdfast:expired-events", "discard"
_UNREAD = object()      # a relax candidate's config, read just before its relax
LATEST = "$LATEST"
MAX_TAGS = 50           # per Lambda function (Lambda quotas: tags per resource)
MAX_KEY = 128           # characters in a tag key
# In a record's applied values: Lambda refused Holdfast's queue as this config's on-failure
# destination in this engagement. Not a setting (no original): a restore writes nothing for it.
REFUSED = "dest_refused"
# The outcome of a later-phase step whose ListAliases failed: "aliases:<function ARN>".
ALIASES = "aliases:"


def record_keys(qualifier: str | None) -> tuple[str, str]:
    """The tag keys that carry the record of one qualifier's config on its function."""
    if qualifier in (None, LATEST):
        return ORIGINAL_KEY, APPLIED_KEY
    name = qualifier
    if len(f"{ORIGINAL_KEY}:{qualifier}") > MAX_KEY:
        # "@" is allowed in tag keys and never in an alias name ([a-zA-Z0-9-_]+): no collision.
        name = "@" + hashlib.sha256(qualifier.encode()).hexdigest()[:16]
    return f"{ORIGINAL_KEY}:{name}", f"{APPLIED_KEY}:{name}"


def split(arn: str) -> tuple[str, str | None]:
    """(the function's unqualified ARN, the qualifier or None)."""
    parts = arn.split(":")
    if len(parts) > 7 and parts[7] not in ("", LATEST):
        return ":".join(parts[:7]), parts[7]
    return ":".join(parts[:7]), None


def _destination(config: Mapping[str, Any], which: str) -> str | None:
    return ((config.get("DestinationConfig") or {}).get(which) or {}).get("Destination") or None


def _request(values: Mapping[str, Any]) -> dict[str, Any]:
    """Put/Update parameters for the given values (None = leave out)."""
    out: dict[str, Any] = {}
    if values.get("max_age") is not None:
        out["MaximumEventAgeInSeconds"] = values["max_age"]
    if values.get("max_retries") is not None:
        out["MaximumRetryAttempts"] = values["max_retries"]
    destinations = {
        which: {"Destination": values[key]}
        for which, key in (("OnSuccess", "on_success"), ("OnFailure", "on_failure"))
        if values.get(key)
    }
    if destinations:
        out["DestinationConfig"] = destinations
    return out


def _stamp(value: Any) -> float | None:
    """A config's LastModified as a number (botocore gives a datetime)."""
    if value is None:
        return None
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


def grant(role_arn: str, queue_arn: str, kms_key: str | None) -> dict[str, Any]:
    """What lets a function's execution role deliver expired events to `queue_arn`: the
    policy statements, and the AWS CLI command that attaches them as an inline policy.

    SendMessage on the queue; with a customer-managed KMS key on the queue, also
    kms:GenerateDataKey and kms:Decrypt on that key, which a producer needs (SQS Developer
    Guide, "Key management"). The AWS managed key (alias/aws/sqs) needs no statement."""
    statements: list[dict[str, Any]] = [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue_arn}]
    if kms_key and kms_key != "alias/aws/sqs":
        partition, region, account = queue_arn.split(":")[1], queue_arn.split(":")[3], queue_arn.split(":")[4]
        kms = {"Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"]}
        if kms_key.startswith("arn:"):
            kms["Resource"] = kms_key
        elif kms_key.startswith("alias/"):
            # An alias in Resource does not name the key; the condition does (kms:ResourceAliases).
            kms.update(Resource=f"arn:{partition}:kms:{region}:{account}:key/*",
                       Condition={"ForAnyValue:StringEquals": {"kms:ResourceAliases": kms_key}})
        else:
            kms["Resource"] = f"arn:{partition}:kms:{region}:{account}:key/{kms_key}"
        statements.append(kms)
    document = {"Version": "2012-10-17", "Statement": statements}
    role_name = role_arn.rsplit("/", 1)[-1]
    command = (f"aws iam put-role-policy --role-name {role_name} --policy-name holdfast-expired-events "
               f"--policy-document '{json.dumps(document, separators=(',', ':'))}'")
    return {"role": role_arn, "policy": document, "command": command}


class AsyncConfigActuator(LambdaTagged, TaggedActuator):
    spec = kinds.ASYNC
    service = "lambda"
    restore_needs_tag = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, Any]] = {}     # arn -> why a destination was not attached
        self._tagged: dict[str, Record] = {}           # arn -> the record this run wrote on its tags
        self._kms: tuple[str | None] | None = None      # the expired-events queue's KMS key, once read
        self._modified: dict[str, float | None] = {}    # arn -> the config's LastModified after Holdfast's write

    # ---- discovery -------------------------------------------------------------------

    @uses("lambda:ListFunctionEventInvokeConfigs", by=("reconciler", "cli", "readonly", "readiness"))
    def candidates(self) -> list[Candidate]:
        """Each selected function's unqualified config, every qualifier that has one, and
        every qualifier whose record its function's tags carry but that has no config (a
        walk stopped between the record and the Put). The aliases with no config and no
        record are found later in the walk (`late_candidates`)."""
        return sorted(self._list_configs(tagged(self.clients, self.settings, "lambda:function").items(), engage=True),
                      key=lambda c: c.arn)

    def _list_configs(self, functions, *, engage: bool = False) -> list[Candidate]:
        """The configs of `functions` ((arn, tags) each), and the qualifiers whose record is
        on their function's tags but whose config is not listed. `engage`: those are listed
        as having no config (the listing names every config), their names from the tags
        alone (a hashed key is left to the later phase, which names it by ListAliases);
        otherwise (a relax's) each is read just before its relax (an alias whose config
        its owner deleted, or an alias gone), a hashed key named by ListAliases."""
        client = self.clients("lambda")
        found = []
        for arn, tags in sorted(functions):
            try:
                configs = [c for page in client.get_paginator("list_function_event_invoke_configs").paginate(FunctionName=arn)
                           for c in page.get("FunctionEventInvokeConfigs", [])]
                recorded = self._recorded_qualifiers(arn, tags, name_hashed=not engage)
            except client.exceptions.ResourceNotFoundException:
                continue  # deleted since the tagging index listed it
            by_qualifier = {split(c["FunctionArn"])[1]: c for c in configs}
            found.append(Candidate(arn, (tags, by_qualifier.pop(None, None), None)))
            found += [Candidate(f"{arn}:{q}", (tags, c, q)) for q, c in by_qualifier.items()]
            found += [Candidate(f"{arn}:{q}", (tags, None if engage else _UNREAD, q))
                      for q in recorded if q not in by_qualifier]
        return found

    # ---- the later phase: aliases with no config of their own -------------------------

    def late_keys(self, listed: list[Candidate]) -> list[str]:
        """The later phase of an engage walk (holdfast.engine.bookkeeping): one step per
        listed function, in ARN order, each one ListAliases. It runs only once every config
        the listing named is engaged, and resumes across ticks after the last function
        whose aliases were all engaged (the kind's cursor)."""
        return sorted(c.arn for c in listed if c.listed[2] is None)

    def late_candidates(self, function: str, listed: Mapping[str, Candidate]) -> tuple[list[Candidate], Outcome | None]:
        """The aliases of `function` that the listing did not name (no config of their own,
        no record): each engaged with one (the module doc). When they cannot be listed,
        none, and an outcome that says so (`notes["aliases"]`); the function's configs are
        engaged all the same, and the walk goes on."""
        tags = listed[function].listed[0] if function in listed else {}
        try:
            names = self._aliases(function)
        except self.clients("lambda").exceptions.ResourceNotFoundException:
            return [], None   # deleted since it was listed
        except AWS_ERRORS as err:
            logger.warning("aliases of %s not listed: %s; its configs are engaged, its aliases without one are not",
                           function, error_text(err))
            return [], Outcome(self.kind, f"{ALIASES}{function}", SKIPPED, name=f"{function.split(':')[6]} (aliases)",
                               notes={"aliases": {
                                   "why": f"its aliases could not be listed ({error_text(err)}): an alias of it "
                                          "with no async config of its own is not engaged",
                                   "fix": ("grant lambda:ListAliases on the function (the reconciler's policy allows "
                                           "it on functions carrying the selector); the kind's next walk of a plan, "
                                           "or its re-walk, lists them again")}})
        return [Candidate(f"{function}:{q}", (tags, None, q)) for q in names if f"{function}:{q}" not in listed], None

    @uses("lambda:ListAliases", by=("reconciler", "cli", "readonly", "readiness"))
    def _aliases(self, arn: str) -> list[str]:
        """The names of the function's aliases (ListAliases, paginated)."""
        client = self.clients("lambda")
        return sorted(a["Name"] for page in client.get_paginator("list_aliases").paginate(FunctionName=arn)
                      for a in page.get("Aliases", []))

    def _recorded_qualifiers(self, arn: str, tags: Mapping[str, str], *, name_hashed: bool) -> list[str]:
        """The qualifiers whose record is on the function's tags. `name_hashed`: a hashed
        key's alias is named through ListAliases, asked only when there is one (an error
        leaves it unnamed: the ledger's record names it, or a later relax)."""
        prefix = f"{ORIGINAL_KEY}:"
        names = [k[len(prefix):] for k in tags if k.startswith(prefix)]
        found = [n for n in names if not n.startswith("@")]
        hashed = {n for n in names if n.startswith("@")}
        if hashed and name_hashed:
            try:
                aliases = self._aliases(arn)
            except AWS_ERRORS:
                aliases = []
            found += [a for a in aliases if record_keys(a)[0][len(prefix):] in hashed]
        return sorted(found)

    @uses("lambda:ListFunctions", "lambda:ListFunctionEventInvokeConfigs", by=("cli",))
    def audit(self, found: AuditResult, say: Progress) -> None:
        """Every function's unqualified async invoke config, and its SDK retry mode."""
        client = self.clients("lambda")
        try:
            functions = list(pages(client, "list_functions", "Functions"))
        except AWS_ERRORS as err:
            unreadable(found, "Lambda functions", err)
            return
        for n, function in enumerate(functions, 1):
            say(f"reading Lambda functions {n}/{len(functions)}")
            found.add(retry_mode_finding(function))
            try:
                configs = list(pages(client, "list_function_event_invoke_configs", "FunctionEventInvokeConfigs",
                                     FunctionName=function["FunctionName"]))
            except AWS_ERRORS as err:
                if error_code(err) == "ResourceNotFoundException":
                    continue  # deleted since it was listed: nothing left to audit
                unreadable(found, f"async invoke config of {function['FunctionName']}", err)
                continue
            # The config of the function itself: its ARN bare or with :$LATEST, not a version's or an alias's.
            arns = {function["FunctionArn"], f"{function['FunctionArn']}:{LATEST}"}
            config = next((c for c in configs if c.get("FunctionArn") in arns), None)
            found.add(self.spec.audit_rule(function, config, self.settings, self.clients.region))

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """The most retries first (each is another invocation against a dependency that
        is down), then the longest event age (how long old events keep coming back); an
        engaged config's original values."""
        _tags, config, _qualifier = candidate.listed
        config = config if isinstance(config, Mapping) else {}
        original = original or {}
        retries = original.get("max_retries", config.get("MaximumRetryAttempts"))
        age = original.get("max_age", config.get("MaximumEventAgeInSeconds"))
        return (DEFAULT_MAX_RETRIES if retries is None else int(retries)) * 100_000 + \
            int(DEFAULT_MAX_AGE if age is None else age)

    def relax_candidates(self, recorded: set[str]) -> list[Candidate]:
        """The candidates a relax needs: only functions with a record, on their tags (the
        tagging index's) or in the ledger (`recorded`), and of those only the configs
        recorded. A function whose tags carry a record the ledger does not account for has
        its configs listed (ListFunctionEventInvokeConfigs), as an engage lists them; a
        config the ledger names is read by `read` just before it is relaxed (one
        GetFunctionEventInvokeConfig, which is also its fresh read). Functions with no
        record anywhere cost no Lambda call."""
        by_function: dict[str, set[str]] = {}
        for arn in recorded:
            by_function.setdefault(split(arn)[0], set()).add(arn)
        found, listed = [], []
        for arn, tags in sorted(tagged(self.clients, self.settings, "lambda:function").items()):
            ledger = by_function.get(arn, set())
            on_tags = {k for k in tags if k.startswith(ORIGINAL_KEY)}
            if on_tags - {record_keys(split(a)[1])[0] for a in ledger}:
                listed.append((arn, tags))   # a record only its tags show: list its configs
                continue
            found += [Candidate(a, (tags, _UNREAD, split(a)[1])) for a in sorted(ledger)]
        return sorted(found + self._list_configs(listed), key=lambda c: c.arn)

    def read(self, candidate: Candidate) -> Resource | None:
        tags, config, qualifier = candidate.listed
        if config is _UNREAD:
            config = self._config(candidate.arn, qualifier)
            if config is None and qualifier is not None and self.ledger.cached(candidate.arn) is not None \
                    and not self._qualifier_exists(split(candidate.arn)[0], qualifier):
                # The alias (or version) is gone, and its config with it: vanished (the walk
                # forgets the ledger's record, forget_vanished its tags first). A record on the
                # tags only is restored as it is: nothing to write, its tags removed.
                return None
            resource = self._resource(candidate.arn, qualifier, config, tags)
            # Read just now, before the relax that follows: that read is the fresh one.
            return replace(resource, confirmed=False, ref={**resource.ref, "fresh": True})
        # The tags come from the tagging API's index: a record there is confirmed before use.
        return replace(self._resource(candidate.arn, qualifier, config, tags), confirmed=False)

    @uses("lambda:GetFunctionEventInvokeConfig", by=("reconciler", "cli", "readonly", "readiness"))
    def _config(self, arn: str, qualifier: str | None) -> Mapping[str, Any] | None:
        client = self.clients("lambda")
        try:
            return client.get_function_event_invoke_config(
                FunctionName=split(arn)[0], **({"Qualifier": qualifier} if qualifier else {}))
        except client.exceptions.ResourceNotFoundException:
            return None

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        tags, config, qualifier = candidate.listed
        return self._resource(candidate.arn, qualifier, config, tags).current

    def listed_tags_all(self, candidate: Candidate) -> Mapping[str, str]:
        return candidate.listed[0]   # its function's: a qualifier's config is Holdfast's when its function is

    def listed_tags(self, candidate: Candidate) -> Mapping[str, str]:
        tags, _config, qualifier = candidate.listed
        return self._record_tags(tags, qualifier)

    @uses("lambda:ListTags", by=("reconciler", "cli", "readonly", "readiness"))
    def own_tags(self, resource: Resource) -> Mapping[str, str]:
        tags = self._call("list_tags", Resource=resource.ref["function"])["Tags"]
        return self._record_tags(tags, resource.ref.get("qualifier"))

    @staticmethod
    def _record_tags(tags: Mapping[str, str], qualifier: str | None) -> dict[str, str]:
        """This qualifier's record among its function's tags, under the generic keys."""
        original, applied = record_keys(qualifier)
        return {k: tags[t] for k, t in ((ORIGINAL_KEY, original), (APPLIED_KEY, applied)) if t in tags}

    @uses("lambda:GetFunctionEventInvokeConfig", by=("reconciler", "cli", "readonly", "readiness"))
    def fresh(self, resource: Resource) -> Resource:
        """The config read again just before a restore, which Puts the whole config: built
        from this read, it keeps whatever the owner changed meanwhile (an OnSuccess
        destination, say)."""
        if resource.ref.get("fresh"):
            return resource   # read by `read` moments ago, just before this relax
        qualifier = resource.ref.get("qualifier")
        config = self._config(resource.ref["function"], qualifier)
        again = self._resource(resource.arn, qualifier, config, {})
        return replace(resource, current={**again.current, "discard_expired": resource.current.get("discard_expired")})

    @uses("lambda:GetFunction", "lambda:GetFunctionEventInvokeConfig", by=("reconciler", "cli", "readonly", "readiness"))
    def get(self, arn: str) -> Resource | None:
        client = self.clients("lambda")
        function, qualifier = split(arn)
        try:
            tags = client.get_function(FunctionName=function).get("Tags", {})
        except client.exceptions.ResourceNotFoundException:
            return None
        try:
            config = client.get_function_event_invoke_config(
                FunctionName=function, **({"Qualifier": qualifier} if qualifier else {}))
        except client.exceptions.ResourceNotFoundException:
            if qualifier is not None and not self._qualifier_exists(function, qualifier):
                return None  # the alias or version is gone, and its config with it
            config = None
        return self._resource(arn, qualifier, config, tags)

    @uses("lambda:GetFunction", by=("reconciler", "cli", "readonly", "readiness"))
    def _qualifier_exists(self, function: str, qualifier: str) -> bool:
        client = self.clients("lambda")
        try:
            client.get_function(FunctionName=function, Qualifier=qualifier)
            return True
        except client.exceptions.ResourceNotFoundException:
            return False

    def _resource(self, arn: str, qualifier: str | None, config: Mapping[str, Any] | None,
                  tags: Mapping[str, str]) -> Resource:
        current = {
            "config": config is not None,
            "max_age": (config or {}).get("MaximumEventAgeInSeconds"),
            "max_retries": (config or {}).get("MaximumRetryAttempts"),
            "on_failure": _destination(config or {}, "OnFailure"),
            "on_success": _destination(config or {}, "OnSuccess"),
            # The owner's opt-in (a tag on the function), read with the config: not written.
            "discard_expired": tags.get(OPT_IN_KEY) == OPT_IN_DISCARD,
        }
        original, applied = record_keys(qualifier)
        record_tags = self._record_tags(tags, qualifier)
        current[REFUSED] = _refused(record_tags)
        function = split(arn)[0]
        name = function.split(":")[6] + (f":{qualifier}" if qualifier else "")
        ref = {"function": function, "qualifier": qualifier, "tag_keys": sorted(tags),
               "modified": _stamp((config or {}).get("LastModified"))}
        resource = make_resource(self.kind, arn, name, current, record_tags, ref, selected=selected(self.settings, tags))
        # The function's tags but this record's own two count toward its 50 (other qualifiers' records too).
        return replace(resource, tag_count=sum(1 for k in tags if not k.lower().startswith("aws:")
                                               and k not in (original, applied)))

    # ---- a function recreated under its name -----------------------------------------

    def identity_after_write(self, resource: Resource, tagged: bool) -> dict[str, Any] | None:
        """The config's LastModified as Holdfast's write left it, whether the record is on
        the function's tags, and for an alias its RevisionId: a function's ARN is its name,
        and an alias's its function's and its own, so one deleted and recreated is another
        resource at the same ARN, and Lambda names no creation id to tell them apart."""
        with self._lock:
            if resource.arn not in self._modified:
                return None
            identity = {"tagged": tagged, "modified": self._modified.pop(resource.arn)}
        revision = self._alias_revision(resource)
        if revision is not None:
            identity["revision"] = revision
        return identity

    @uses("lambda:GetAlias", by=("reconciler", "cli"))
    def _alias_revision(self, resource: Resource) -> str | None:
        """The RevisionId of the alias `resource` is the config of ("a unique identifier that
        changes when you update the alias", GetAlias); None for the unqualified config, a
        version (Lambda numbers versions in sequence: a deleted one's number is not published
        again), an alias gone, or a read that failed (then the record holds, as before)."""
        qualifier = resource.ref.get("qualifier")
        if not qualifier or qualifier.isdigit():   # an alias name is never all digits
            return None
        try:
            return self._call("get_alias", FunctionName=resource.ref["function"], Name=qualifier).get("RevisionId")
        except (ClientError, BotoCoreError, Vanished):
            return None

    def recreated(self, resource: Resource, ledger: Record) -> Resource | None:
        """Whether the ledger's record is of a function, or an alias, since deleted and
        created again.

        Nothing needs asking while the config is the one Holdfast's last write left (the
        same LastModified). An alias lives on its function, and so does its record (Lambda
        tags functions only): its RevisionId decides. The one recorded after Holdfast's
        write means the same alias (its owner changed the config: their change is drift,
        kept); another, with another config, means an alias created again under its name.
        One limit: an owner who both updated the alias (repointed it, as a deployment does)
        and rewrote its config while engaged reads as a recreation, and the config as they
        left it becomes the original.

        Deleting a function deletes its tags, versions, aliases and async configs. So when
        the record says its tag was written, the function's own tags (ListTags) show no
        record for this qualifier, and the config is another, the record is of a function
        gone: retired, and this one engaged afresh, never restored to a stranger's values.
        A tag an IaC apply stripped from the same function leaves the config as Holdfast
        wrote it: the record holds, and its tag is written again. Two limits: a record that
        was never on a tag (a function with no room for it) cannot be told from a recreated
        one, so it holds; and a function whose owner both rewrote its config and had the
        tag stripped reads as recreated, so its config as the owner left it becomes the
        original.

        The resource comes back with its tags confirmed: a record still on them is the
        retired alias's, which `retire_tag` removes."""
        identity = ledger.identity or {}
        if identity.get("modified") == resource.ref.get("modified"):
            return None
        if identity.get("revision") is not None:
            revision = self._alias_revision(resource)
            if revision is not None:
                if revision == identity["revision"]:
                    return None
                return resource if resource.confirmed else self.confirm(resource)
        if not identity.get("tagged") or resource.record is not None:
            return None
        if not resource.confirmed:
            resource = self.confirm(resource)   # the index may not show a tag yet; the function's own tags do
        return resource if resource.record is None else None

    def retire_tag(self, resource: Resource) -> None:
        """An alias's record is on its function's tags, which outlive the alias."""
        if resource.record is not None:
            self._untag(resource, [ORIGINAL_KEY, APPLIED_KEY])

    def record_on_resource(self, resource: Resource) -> bool:
        """The policy's restore statements name the unqualified record's tag: a version's or
        an alias's record tag alone does not let a restore write without the selector."""
        return ORIGINAL_KEY in (resource.ref.get("tag_keys") or ())

    # ---- the posture -----------------------------------------------------------------

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        s = self.settings
        changes: dict[str, Any] = {}
        max_retries = current.get("max_retries")
        if (DEFAULT_MAX_RETRIES if max_retries is None else max_retries) > s.async_max_retry_attempts:
            changes["max_retries"] = s.async_max_retry_attempts
        kept = current.get("on_failure") is not None      # expired events go to the owner's destination
        if not kept and self.expired_queue_arn and not current.get(REFUSED):
            changes["on_failure"] = self.expired_queue_arn
            kept = True
        max_age = current.get("max_age")
        if (kept or current.get("discard_expired")) and (DEFAULT_MAX_AGE if max_age is None else max_age) > s.async_max_event_age_seconds:
            changes["max_age"] = s.async_max_event_age_seconds
        if changes and not current.get("config"):
            changes["config"] = True
        return changes

    def known(self, resource: Resource):
        """The base's, with a refusal the ledger's copy of the record holds in `current` too
        (the tag's is there from `_resource`): the posture then asks Lambda no more."""
        resource, record = super().known(resource)
        if record is not None and record.applied.get(REFUSED) and not resource.current.get(REFUSED):
            resource = replace(resource, current={**resource.current, REFUSED: True})
        return resource, record

    def plan(self, resource: Resource) -> Outcome:
        outcome = super().plan(resource)
        self._note_unkept(resource, outcome)
        return outcome

    def forget_vanished(self, arn: str, guard) -> Outcome:
        """An alias (or version) gone: its record's tags are on its function, which outlives
        it, so they go first (behind the guard, best effort), then the ledger's copy."""
        function, qualifier = split(arn)
        if qualifier is not None:
            try:
                guard()
                self._call("untag_resource", Resource=function, TagKeys=list(record_keys(qualifier)))
            except (ClientError, BotoCoreError, Vanished, StalePlan):
                # The function gone too, the write not allowed, or a stale plan (the base says
                # so): a tag left is read by a later relax, which finds the alias gone again.
                pass
        return super().forget_vanished(arn, guard)

    def engage(self, resource: Resource) -> Outcome:
        outcome = super().engage(resource)
        with self._lock:
            held = self._held.pop(resource.arn, None)
        if held is not None:
            # Lambda refused Holdfast's destination: only what was written is reported.
            outcome.changes = {k: v for k, v in outcome.changes.items() if k in held["written"]}
            outcome.notes["destination"] = held["note"]
            if not held["written"] and outcome.action == ENGAGED:
                outcome.action = ALREADY
            self._record_refusal(resource, outcome)
        else:
            self._note_unkept(resource, outcome)
        return outcome

    def _record_refusal(self, resource: Resource, outcome: Outcome) -> None:
        """Grow the record just written ahead with the refusal, on both copies it is on.
        Best effort: a record write that fails leaves the refusal unrecorded, and the next
        walk asks Lambda again (one refused write, nothing lost)."""
        with self._lock:
            on_tag = self._tagged.pop(resource.arn, None)
        base = restore.merge(on_tag, self.ledger.cached(resource.arn))
        if base is None:
            return
        marked = Record(base.kind, base.arn, base.original, restore.grow_applied(base.applied, {REFUSED: True}))
        try:
            if on_tag is not None:
                self._write_tag(replace(resource, record=on_tag), marked)
            if self.ledger.cached(resource.arn) is not None:
                self.ledger.put_original(marked, resource.name)
        except (ClientError, BotoCoreError, Vanished, Conflict) as err:   # the engage itself succeeded
            outcome.notes["destination"] = {**outcome.notes.get("destination", {}),
                                            "unrecorded": f"the refusal was not recorded ({error_text(err)}): "
                                                          "the next walk asks Lambda again"}

    def _note_unkept(self, resource: Resource, outcome: Outcome) -> None:
        """Say why an event age was kept: no destination could be attached."""
        current = resource.current
        if current.get("on_failure") or self.expired_queue_arn or current.get("discard_expired"):
            return
        age = current.get("max_age") or DEFAULT_MAX_AGE
        if age > self.settings.async_max_event_age_seconds:
            outcome.notes["destination"] = {
                "why": ("no expired-events queue is known (Holdfast's stack publishes it in SSM under "
                        "/holdfast/<stack>/expired-queue-arn; or pass --expired-queue-arn): event age kept at "
                        f"{age} s so no event is dropped; retries bounded"),
                "opt_in": f"tag the function {OPT_IN_KEY}={OPT_IN_DISCARD} to shorten the age and drop what expires",
            }

    # ---- writes ----------------------------------------------------------------------

    @uses(
        "lambda:PutFunctionEventInvokeConfig",
        "lambda:UpdateFunctionEventInvokeConfig",
        "lambda:DeleteFunctionEventInvokeConfig",
        by=("reconciler", "cli"),
    )
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        try:
            self._send(resource, values, restoring=restoring)
        except ClientError as err:
            if restoring or values.get("on_failure") != self.expired_queue_arn or not destination_refused(err):
                raise
            # Lambda will not attach Holdfast's queue: bound the retries only, keep the age
            # (unless the owner opted in to dropping expired events), and say what to grant.
            fallback = {k: v for k, v in values.items()
                        if k not in ("on_failure", "max_age") or (k == "max_age" and resource.current.get("discard_expired"))}
            if set(fallback) <= {"config"}:
                fallback = {}
            if fallback:
                self._send(resource, fallback, restoring=False)
            note = {"why": f"Lambda refused the expired-events queue as on-failure destination ({error_text(err)}): "
                           f"event age kept at {resource.current.get('max_age') or DEFAULT_MAX_AGE} s, retries bounded",
                    **self._grant(resource),
                    "then": ("Holdfast asks Lambda again at the next engagement; to attach the queue in this one, "
                             f"grant the role, then `holdfast release {resource.arn}` and `holdfast engage`")}
            with self._lock:
                self._held[resource.arn] = {"written": set(fallback) - {"config"}, "note": note}

    def _send(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        current = resource.current
        target = {**current, **values}
        whole = _request(target)
        where = {"FunctionName": resource.ref["function"]}
        if resource.ref.get("qualifier"):
            where["Qualifier"] = resource.ref["qualifier"]
        if not target["config"] and not whole:
            self._call("delete_function_event_invoke_config", **where)
            return
        if restoring or not current["config"]:
            answer = self._call("put_function_event_invoke_config", **where, **whole)
        else:
            changed = _request(values)
            if "on_failure" in values:
                # DestinationConfig is one member: name both destinations so OnSuccess stays.
                changed["DestinationConfig"] = whole["DestinationConfig"]
            answer = self._call("update_function_event_invoke_config", **where, **changed)
        if not restoring:
            with self._lock:
                self._modified[resource.arn] = _stamp((answer or {}).get("LastModified"))

    @uses("lambda:GetFunction", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", by=("reconciler", "cli", "readonly", "readiness"))
    def _grant(self, resource: Resource) -> dict[str, Any]:
        """The statement the function's role needs; best effort (a read that fails leaves
        the statement without the role or the key, and says so)."""
        queue = self.expired_queue_arn
        try:
            role = self.clients("lambda").get_function(FunctionName=resource.ref["function"])["Configuration"]["Role"]
        except (ClientError, BotoCoreError, KeyError):
            role = "<the function's execution role>"
        if self._kms is None:
            try:
                sqs = self.clients("sqs")
                parts = queue.split(":")
                url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
                attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"]).get("Attributes", {})
                self._kms = (attributes.get("KmsMasterKeyId"),)
            except (ClientError, BotoCoreError):
                self._kms = (None,)
        return grant(role, queue, self._kms[0])

    # ---- the record, on the function's tags ------------------------------------------

    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        original, applied = record_keys(resource.ref.get("qualifier"))
        named = {original: tags[ORIGINAL_KEY], applied: tags[APPLIED_KEY]}
        have = set(resource.ref.get("tag_keys") or ())
        if len(have | set(named)) > MAX_TAGS:
            raise TagError(f"{resource.ref['function']} has {len(have)} tags: no room for the two of this record "
                           f"(Lambda allows {MAX_TAGS} per function); nothing changed")
        super()._tag(_Function(resource), named)
        with self._lock:   # what is on the tags now, should Lambda refuse the destination (_record_refusal)
            self._tagged[resource.arn] = Record(self.kind, resource.arn, decode(tags[ORIGINAL_KEY]),
                                                decode(tags[APPLIED_KEY]))

    def _untag(self, resource: Resource, keys: list[str]) -> None:
        original, applied = record_keys(resource.ref.get("qualifier"))
        mapping = {ORIGINAL_KEY: original, APPLIED_KEY: applied}
        super()._untag(_Function(resource), [mapping.get(k, k) for k in keys])


def _refused(record_tags: Mapping[str, str]) -> bool:
    """Whether the record among `record_tags` says Lambda refused Holdfast's destination."""
    try:
        return bool(decode(record_tags.get(APPLIED_KEY, "")).get(REFUSED))
    except TagError:
        return False


class _Function:
    """The function that carries a qualifier's record, as the tag writes see it."""

    def __init__(self, resource: Resource):
        self.arn = resource.ref["function"]
