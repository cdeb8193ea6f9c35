"""`--all-accounts --accounts-file FILE`: c7n-org's accounts file instead of Organizations,
with the same -a/-t/-r filters; each account through the role the file names, in the
regions it names. A file Holdfast cannot act on is exit 2 with a line that names the
account and the key, before any account is touched."""

from __future__ import annotations

import json

import pytest
import yaml  # in the dev venv only (moto's): the subset parser is checked against it

from holdfast.cli import accounts_file, main
from tests.cli.test_org_commands import OTHER, REGION, org  # noqa: F401  (org: a fixture)

FILE = """\
# c7n-org's accounts file, as orgaccounts.py writes it
accounts:
- account_id: '{a}'
  name: search-prod
  role: arn:aws:iam::{a}:role/HoldfastReadOnly
  regions:
  - {region}
  - {other}
  tags:
  - team:search
  - env:prod
- account_id: "{b}"   # quoted either way
  name: payments
  role: 'arn:aws:iam::{b}:role/HoldfastReadOnly'
  regions: [{region}]
  tags: [team:payments, 'env:prod']
  vars:
    charge_code: xyz
"""


def write(tmp_path, org, text=FILE, name="accounts.yml"):
    path = tmp_path / name
    path.write_text(text.format(a=org.a, b=org.b, region=REGION, other=OTHER))
    return str(path)


def status(capsys, *args):
    code = main(["--json", "--region", REGION, "status", "--all-accounts", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_every_account_of_the_file_in_its_own_regions_through_its_role_without_organizations(org, capsys, tmp_path):
    code, doc, err = status(capsys, "--accounts-file", write(tmp_path, org))
    assert code == 0, err
    assert sorted((r["account"], r["region"]) for r in doc["rows"]) == sorted(
        [(org.a, REGION), (org.a, OTHER), (org.b, REGION)])
    assert all(r["error"] is None and r["stage"] == "normal" for r in doc["rows"])
    assert not [op for op in doc["api_calls_by_operation"] if op.startswith("organizations:")]
    assert doc["api_calls_by_operation"]["sts:AssumeRole"] == 2


@pytest.mark.parametrize("filters, expected", [
    (["-a", "payments"], {"payments"}),                   # by name, as c7n-org
    (["-a", "ACCOUNT_A"], {"search-prod"}),               # by id
    (["-t", "env=prod", "-t", "team:search"], {"search-prod"}),
    (["-r", OTHER], {"search-prod", "payments"}),         # -r instead of each account's regions
])
def test_the_same_filters_select_from_the_file(org, capsys, tmp_path, filters, expected):
    names = {org.a: "search-prod", org.b: "payments"}
    filters = [org.a if f == "ACCOUNT_A" else f for f in filters]
    code, doc, err = status(capsys, "--accounts-file", write(tmp_path, org), *filters)
    assert {names[r["account"]] for r in doc["rows"]} == expected, err
    if "-r" in filters:
        assert {r["region"] for r in doc["rows"]} == {OTHER}


def test_a_json_accounts_file_reads_the_same(org, capsys, tmp_path):
    as_json = json.dumps(yaml.safe_load(FILE.format(a=org.a, b=org.b, region=REGION, other=OTHER)))
    code, doc, err = status(capsys, "--accounts-file", write(tmp_path, org, as_json.replace("{", "{{").replace("}", "}}"),
                                                            "accounts.json"))
    assert code == 0 and len(doc["rows"]) == 3, err


def test_the_yaml_subset_reads_a_c7n_org_file_as_pyyaml_does_every_scalar_a_string():
    text = FILE.format(a="111122223333", b="444455556666", region=REGION, other=OTHER)
    assert accounts_file.parse(text) == yaml.safe_load(text)
    assert accounts_file.parse("accounts:\n- account_id: 012345678901\n")["accounts"][0]["account_id"] == "012345678901"


@pytest.mark.parametrize("change, message", [
    (("  regions:\n", "  regoins:\n"), "account 1 (search-prod): unknown key 'regoins'; did you mean 'regions'?"),
    (("  role: 'arn:aws:iam::{b}:role/HoldfastReadOnly'\n", ""), "account 2 (payments): no role: give the ARN of the role"),
    (("  role: 'arn:aws:iam::{b}:role/HoldfastReadOnly'\n", "  profile: payments\n"), "a profile is not assumed"),
    (("  role: 'arn:aws:iam::{b}:", "  role: 'arn:aws:iam::{a}:"), "is not the ARN of a role in account"),
    (("accounts:\n", "acounts:\n"), "unknown key 'acounts'; did you mean 'accounts'?"),
    (("- account_id: '{a}'\n", "- account_id: &id '{a}'\n"), "line 3: anchors"),
    (("  regions: [{region}]\n", "  regions: [nowhere-1]\n"), "'nowhere-1' is not an AWS region"),
])
def test_a_file_holdfast_cannot_act_on_is_exit_2_naming_the_account_and_the_key(org, capsys, tmp_path, change, message):
    path = write(tmp_path, org, FILE.replace(*change))
    code = main(["--region", REGION, "status", "--all-accounts", "--accounts-file", path])
    err = capsys.readouterr().err
    assert code == 2 and message in err.format(), err
    assert "Traceback" not in err


def test_an_accounts_file_has_no_ous_and_goes_with_all_accounts(org, capsys, tmp_path):
    path = write(tmp_path, org)
    assert main(["--region", REGION, "status", "--all-accounts", "--accounts-file", path, "-o", org.prod]) == 2
    assert "an --accounts-file has no OUs" in capsys.readouterr().err
    assert main(["--region", REGION, "status", "--accounts-file", path]) == 2
    assert "go with --all-accounts" in capsys.readouterr().err
