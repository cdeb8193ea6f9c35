#!/usr/bin/env python3
"""The CDK app: validates the `holdfast` context settings and creates the stacks.

One stack per settings target (`cdk deploy --all` covers them all), or one stack in
the CLI's default environment when no target is named. With
`org_organizational_unit_ids` set, the organization's stacks as well (a code bucket
per region and the StackSet, `holdfast_cdk.org`), and no default stack. A bad setting
stops synth with a message naming the key, the value and what is allowed.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

import aws_cdk as cdk

from holdfast.settings import CONTEXT_KEY, Settings, SettingsError
from holdfast_cdk import HoldfastStack
from holdfast_cdk.org import org_stacks

DEFAULT_STACK = "Holdfast"


def settings_from(app: cdk.App) -> Settings:
    # An object from cdk.json, or the JSON string `cdk synth -c holdfast='{...}'` passes.
    return Settings.from_context(app.node.try_get_context(CONTEXT_KEY))


def build_app(context: Mapping[str, Any] | None = None, **app_kwargs: Any) -> cdk.App:
    """The app with its stacks; tests call this with a context dict, in process."""
    app = cdk.App(context=dict(context) if context is not None else None, **app_kwargs)
    settings = settings_from(app)
    if settings.targets:
        for target in settings.targets:
            HoldfastStack(
                app,
                f"{DEFAULT_STACK}-{target.account}-{target.region}",
                settings=settings,
                env=cdk.Environment(account=target.account, region=target.region),
            )
    if settings.org_organizational_unit_ids:
        org_stacks(app, settings)
    if not settings.targets and not settings.org_organizational_unit_ids:
        HoldfastStack(
            app,
            DEFAULT_STACK,
            settings=settings,
            env=cdk.Environment(
                account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
            ),
        )
    return app


def main() -> None:
    try:
        app = build_app()
    except SettingsError as err:
        sys.exit(f"Holdfast settings: {err}")
    app.synth()


if __name__ == "__main__":
    main()
