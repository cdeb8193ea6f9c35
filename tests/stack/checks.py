"""cdk-nag's findings and cfn-lint's errors for the stack tests, with each app synthesized
once.

- `synth`: an app synthesized once, read by every check of its stacks. `Template.from_stack`
  and `Annotations.from_stack` each synthesize the whole app again (`force`): every stack
  of it, CDK's own template validation included, for every call.
- `nag_errors`: cdk-nag's AwsSolutions errors on a stack, read from that one synthesis;
  the same messages `Annotations.from_stack(stack).find_error("*", AwsSolutions-.*)`
  reads from its own (the stack artifact's), filtered the same way.
- `cfn_lint` and `cfn_lint_errors`: `cfnlint.api.lint` with its default rules on one
  template, as each test called it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from aws_cdk.cx_api import CloudAssembly, SynthesisMessage, SynthesisMessageLevel

NAG = re.compile("AwsSolutions-.*")   # as Match.string_like_regexp("AwsSolutions-.*"): a search


@dataclass
class Synth:
    assembly: CloudAssembly

    def template_json(self, stack: Stack) -> dict:
        artifact = self.assembly.get_stack_artifact(stack.artifact_id)
        return json.loads((Path(self.assembly.directory) / artifact.template_file).read_text())

    def template(self, stack: Stack) -> Template:
        """What `Template.from_stack(stack)` returns, from this synthesis."""
        return Template.from_json(self.template_json(stack))

    def nag_findings(self, stack: Stack) -> list[SynthesisMessage]:
        """cdk-nag's AwsSolutions errors on the stack: what `find_error("*", NAG)` finds."""
        return [m for m in self.assembly.get_stack_artifact(stack.artifact_id).messages
                if m.level == SynthesisMessageLevel.ERROR and isinstance(m.entry.data, str) and NAG.search(m.entry.data)]

    def nag_errors(self, stack: Stack) -> list[str]:
        """The same, as `id: data`."""
        return [f"{m.id}: {m.entry.data}" for m in self.nag_findings(stack)]


def synth(app: App) -> Synth:
    """The app synthesized once (the assembly a test reads after other tests changed the
    app is still this one: what the fixture built)."""
    return Synth(app.synth())


def cfn_lint(template: dict, regions: list[str]) -> list:
    """Every cfn-lint match on the template. cfn-lint is imported here, not with this module:
    it brings sympy and networkx (about 900 modules), which every pytest worker would
    otherwise compile and import while collecting tests/stack/, though one runs them."""
    from cfnlint.api import ManualArgs, lint

    return lint(json.dumps(template), config=ManualArgs(regions=list(regions)))


def cfn_lint_errors(template: dict, regions: list[str]) -> list[str]:
    """cfn-lint's errors on the template, as `rule message`."""
    return [f"{m.rule.id} {m.message}" for m in cfn_lint(template, regions) if m.rule.severity == "error"]
