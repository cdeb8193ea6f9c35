"""Every ledger call is declared by the function that makes it.

The item families make their DynamoDB calls through the Ledger's storage hooks
(holdfast.ledger.store: `ledger.put_item(...)`, `ledger.query_pages(...)`, ...), which bind
the table's name and declare nothing themselves: the `@uses` of the family function that
makes the call says which role needs which action. This checks, per module of
holdfast/ledger, that each hook call sits in a function whose `@uses` declares the
action the hook performs, or in a helper every caller of which (in the module) does. A
helper no declared function calls is reported too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import holdfast

LEDGER = Path(holdfast.__file__).resolve().parent / "ledger"

TRANSACT = frozenset({"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"})
HOOKS = {
    "get_item": frozenset({"dynamodb:GetItem"}),
    "put_item": frozenset({"dynamodb:PutItem"}),
    "update_item": frozenset({"dynamodb:UpdateItem"}),
    "delete_item": frozenset({"dynamodb:DeleteItem"}),
    "query": frozenset({"dynamodb:Query"}),
    "query_pages": frozenset({"dynamodb:Query"}),
    "transact_write_items": TRANSACT,   # any one of them: IAM has no TransactWriteItems action
    "describe_table": frozenset({"dynamodb:DescribeTable"}),
}
RECEIVERS = ("ledger", "self._ledger")


def _declared(fn: ast.FunctionDef) -> set[str] | None:
    """The actions of the function's @uses, None when it has none."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "uses":
            return {a.value for a in d.args if isinstance(a, ast.Constant)}
    return None


def findings(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls_of: dict[str, set[str]] = {name: set() for name in functions}   # callee -> callers
    hooks: list[tuple[str, str, int]] = []
    for name, fn in functions.items():
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if callee in functions and callee != name:
                calls_of[callee].add(name)
            if isinstance(func, ast.Attribute) and func.attr in HOOKS and ast.unparse(func.value) in RECEIVERS:
                hooks.append((name, func.attr, node.lineno))

    def covering(name: str, seen: frozenset[str] = frozenset()) -> list[set[str]]:
        """The declarations that cover a call made in `name`: its own, or each caller's."""
        own = _declared(functions[name])
        if own is not None:
            return [own]
        callers = calls_of[name] - seen
        return [d for caller in sorted(callers) for d in covering(caller, seen | {name})] if callers else [set()]

    out = []
    for name, hook, line in hooks:
        for declared in covering(name):
            if not HOOKS[hook] & declared:
                out.append(f"{where}:{line}: {name}() calls ledger.{hook}, which needs one of {sorted(HOOKS[hook])}, "
                           f"and a @uses that covers it declares {sorted(declared)}")
    return out


def test_every_ledger_hook_call_is_declared_where_it_is_made():
    checked = [p for p in sorted(LEDGER.glob("*.py")) if p.name != "store.py"]
    found = [f for p in checked for f in findings(p.read_text(), p.name)]
    assert found == []
    calls = sum(findings_count(p.read_text()) for p in checked)
    assert calls >= 40, f"only {calls} hook calls found in holdfast/ledger: the check is looking at the wrong thing"


def findings_count(source: str) -> int:
    return sum(1 for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr in HOOKS
               and ast.unparse(node.func.value) in RECEIVERS)


def test_an_undeclared_hook_call_is_reported():
    source = '''
@uses("dynamodb:GetItem", by=("cli",))
def read(ledger):
    return ledger.get_item(Key={})

@uses("dynamodb:GetItem", by=("cli",))
def write(ledger):
    _put(ledger)

def _put(ledger):
    ledger.put_item(Item={})

@uses("dynamodb:PutItem", by=("cli",))
def advance(ledger):
    ledger.transact_write_items([])

def orphan(ledger):
    ledger.delete_item(Key={})
'''
    found = findings(source, "x.py")
    assert len(found) == 2, found
    assert found[0].startswith("x.py:11: _put() calls ledger.put_item") and "declares ['dynamodb:GetItem']" in found[0]
    assert found[1].startswith("x.py:18: orphan() calls ledger.delete_item") and "declares []" in found[1]
