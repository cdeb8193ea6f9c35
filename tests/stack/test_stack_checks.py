"""cdk-nag AwsSolutions and cfn-lint over the synthesized template."""

from __future__ import annotations

import json

from aws_cdk import App, Aspects, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match
from cdk_nag import AwsSolutionsChecks

from holdfast.settings import Settings
from holdfast_cdk import HoldfastStack
from holdfast_cdk import role_policies as policies
from tests.stack.checks import cfn_lint, synth


def test_cdk_nag_has_no_unacknowledged_findings(synthesized):
    assert synthesized.synth.nag_errors(synthesized.stack) == []


def test_the_nag_reading_finds_what_cdk_nag_reports_on_a_stack_that_breaks_its_rules(tmp_path):
    """Every other nag check expects no finding: this one shows the one-synthesis reading
    (tests/stack/checks.py) sees cdk-nag's errors, the same ones `Annotations.from_stack`
    finds by synthesizing again."""
    app = App(outdir=str(tmp_path / "cdk.out"))
    Aspects.of(app).add(AwsSolutionsChecks())
    stack = Stack(app, "Bare")
    s3.Bucket(stack, "Bucket")   # no access logs, no TLS-only policy: AwsSolutions-S1 and -S10
    found = synth(app).nag_errors(stack)
    assert any(f.startswith("/Bare/Bucket/Resource: AwsSolutions-S1:") for f in found), found
    expected = Annotations.from_stack(stack).find_error("*", Match.string_like_regexp("AwsSolutions-.*"))
    assert sorted(found) == sorted(f"{m.id}: {m.entry.data}" for m in expected)


def test_every_nag_acknowledgement_carries_a_reason(synthesized):
    template = synthesized.template.to_json()
    acknowledged = [
        rule
        for resource in template["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert acknowledged, "the stack acknowledges findings; their metadata must be in the template"
    for rule in acknowledged:
        assert len(rule.get("reason", "")) >= 40, rule


def test_cdk_nag_stays_clean_when_every_policy_slot_holds_an_action(tmp_path):
    """The empty statements in policies/ fill up as the code grows: prove now that a
    full policy passes nag, so adding an action never needs a new acknowledgement."""
    for role in ("detector", "reconciler", "readiness"):
        document = policies.read(role)
        for number, statement in enumerate(document["Statement"]):
            statement["Action"] = statement["Action"] or [f"{_service(statement)}:Write{number}"]
        (tmp_path / f"{role}.json").write_text(json.dumps(document))
    app = App(outdir=str(tmp_path / "cdk.out"))
    Aspects.of(app).add(AwsSolutionsChecks())
    stack = HoldfastStack(app, "Full", settings=Settings(), policies_dir=tmp_path)
    done = synth(app)
    template = done.template_json(stack)
    inline = [p for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role" for p in r["Properties"].get("Policies", [])]
    assert len(inline) == 3, "every controller role got its filled policy"
    assert done.nag_errors(stack) == []


def _service(statement: dict) -> str:
    resource = statement["Resource"] if isinstance(statement["Resource"], str) else statement["Resource"][0]
    return resource.split(":")[2] if resource.startswith("arn:") else "ec2"


def test_cfn_lint_finds_no_errors(synthesized):
    matches = cfn_lint(synthesized.template.to_json(), regions=[synthesized.region])
    errors = [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches if m.rule.severity == "error"]
    assert errors == []
