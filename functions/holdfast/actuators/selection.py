"""Finding tagged resources in bulk with the Resource Groups Tagging API.

GetResources (100 a page) returns the ARNs carrying the selector tag together with all
their tags, so a kind needs no per-resource ListTags for functions, target groups or
ECS services. It returns nothing for Auto Scaling groups (asg.py filters
DescribeAutoScalingGroups instead). Event source mappings are in it too (AWS: it
supports "all resource types" but those it names), but their index is only an order
and a first guess: their own ListTags confirms each before its record tag (esm.py).
Scalable targets are read with their own service's ListTags (scalable_target.py).
"""

from __future__ import annotations

from holdfast.iam import uses


@uses("tag:GetResources", by=("reconciler", "cli", "readonly", "readiness"))
def tagged(clients, settings, resource_type: str) -> dict[str, dict[str, str]]:
    """ARN -> tags of every resource of `resource_type` (e.g. "lambda:function") carrying the selector."""
    pages = clients("resourcegroupstaggingapi").get_paginator("get_resources").paginate(
        ResourceTypeFilters=[resource_type],
        TagFilters=[{"Key": settings.selector_key, "Values": [settings.selector_value]}],
        ResourcesPerPage=100,
    )
    return {
        item["ResourceARN"]: {t["Key"]: t["Value"] for t in item.get("Tags", [])}
        for page in pages
        for item in page["ResourceTagMappingList"]
    }


def selected(settings, tags: dict[str, str]) -> bool:
    return tags.get(settings.selector_key) == settings.selector_value
