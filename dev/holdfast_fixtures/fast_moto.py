"""Eleven costs that a process running many moto accounts pays again and again, and that no
test or demo observes; `install()` removes them. Call it before moto is imported.

- moto's EC2 backend loads its default AMIs into each region's backend when the backend
  is first used after a reset (`moto/ec2/models/amis.py`): about 1,300 in us-east-1 (the
  ECS-optimized list is 1,227), each with an EBS volume and a snapshot. The fleets here
  launch from one AMI, `ami-12c6146b` from moto's own default list; `amis.json` beside
  this file holds that record and `MOTO_AMIS_PATH` makes moto load only it.
- Every `boto3.session.Session` builds its own botocore loader, which parses the service
  model JSON again (EC2's alone is several MB) for the first client of each service. A
  `Clients` is built per test and per controller, so most of a short test's CPU went to
  JSON decoding. One loader per data path for the whole process (botocore's loader caches
  what it parsed per instance, and callers never change it) parses each file once.
- moto's server finds the backend for each request's host by listing moto's package
  directory and checking each entry is a directory (`moto.backends.list_of_moto_modules`,
  from `DomainDispatcherApplication.get_backend_for_host`): about 150 system calls per
  request, the same answer every time while the process runs. It is listed once.
- moto's `BaseResponse.call_action` asks whether the request's action is a method of the
  response class by listing every function of the class (`inspect.getmembers`, a few
  hundred attributes) on each request. The same question is answered by looking the one
  name up; patches that add an action to a class (holdfast_fixtures.message_moves) are
  seen, as the lookup happens on each request.
- moto's DynamoDB answers go through its generic response serializer, which walks the
  operation's output shape member by member and, for each member, asks four alias
  providers which attribute of the result holds it: every attribute value of every item
  is a structure of ten members, so an answer cost about a millisecond an item (a
  third of moto's time in a DynamoDB call, and DynamoDB is most of the calls the ledger
  makes). For the item operations (`ITEM_ACTIONS`) moto's result is already the answer's
  document, a dict of DynamoDB JSON (`DynamoResult`, its blobs as bytes); it is answered
  as JSON (blobs base64, as the serializer writes them), as moto's DynamoDB did before that
  serializer. botocore parses the same members from both (it reads only the output
  shape's members, and skips nulls, as the serializer leaves them out). A result holding
  anything else than JSON's types, bytes and sets goes to moto's serializer, as does
  every error and every other operation; tests/fixtures/test_fast_moto.py compares the
  parsed answers of both for every item operation and every attribute type.
- Every boto3 session registers botocore's built-in handlers (about 130) and every client
  copies its session's handlers and registers its own (the CLI builds a session and its
  clients anew on each command, the tests a `Clients` per test): about 10 ms a session and
  6 a client. Two answers in that are the same every time yet computed on each
  registration, a third of the cost: whether a handler takes `**kwargs`
  (`inspect.getfullargspec` of the handler, botocore.hooks) and the aliased name of an
  event (`EventAliaser._alias_event_name`, cached per emitter, so per session and per
  client). Both are kept for the process: the first per function (a bound method's is its
  function's), the second per event name for botocore's own alias table, the only one any
  emitter here is given.
- moto deep-copies every item a Query answers (and the item a write replaces) through
  `copy.deepcopy` value by value: its memo lookups, its dispatch and its keep-alive list
  for each attribute value. The same copy is made by direct calls (`_quick_item_copies`).
- Each `mock_aws()` start registers, for `requests` (the responses library), a callback per
  HTTP method and moto URL pattern: about 1,300 `CallbackResponse` objects built anew, 7 ms
  a start, and the suite starts a mock for most tests. The objects are the same every time
  (method, pattern, moto's callback; nothing here calls AWS through `requests`, so none is
  ever matched); each is built once and registered again at each start.
- moto's DynamoDB measures an item (`DynamoType.size`) to keep a Query's or Scan's page
  under 1 MB, for every item of the partition it reads (twice for each it keeps, the
  ledger's plan partition holds a hundred items and more), and an item's whole size again
  for each attribute an update sets (`LimitedSizeDict`, the 400 KB limit). Its `size`
  builds a new `DynamoType` for every member of a set and of a map, and asks each its
  type through five methods: a Query in the ledger's plan partition cost several ms.
  `_size` gives the same number, byte for byte (the same cases in the same order; a
  member that is not a `DynamoType` yet is made one, as moto does), without building
  anything; tests/fixtures/test_fast_moto.py compares both on every attribute type.
- botocore signs every request with SigV4 (`SigV4Auth.add_auth`): a canonical request
  (every header, the body's SHA-256), then five HMACs, about a sixth of a short call's
  CPU against moto. Nothing in this process checks a signature: moto verifies none unless
  its IAM authorization is switched on (`INITIAL_NO_AUTH_ACTION_COUNT`, then botocore's
  own signing runs), the tests are offline (tests/conftest.py `_offline`), and what moto
  and holdfast_fixtures.throttle_proxy read of the `Authorization` header is its
  credential scope (the access key, which picks moto's account, the Region, the service).
  So a request is signed as botocore does it but for the signature's value: the same
  date and token headers, the same `Credential=` scope and `SignedHeaders=`, and 64 zeros
  for `Signature=`. Only `SigV4Auth` itself is changed (S3's and presigning's subclasses
  keep theirs); a console script run in a subprocess signs as botocore does.
- moto names each answer with a request ID of 52 letters and digits drawn one
  `random.choice` at a time (`gen_amzn_requestid_long`, from `BaseResponse`), a few
  percent of a short call. The same 52 characters of the same pool are drawn from the
  same generator (moto's `mock_random`) in one `choices`; no test reads an ID's value.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

AMIS = Path(__file__).with_name("amis.json")

_loaders: dict = {}


def _shared_loader(search_path_string=None):
    from botocore.loaders import create_loader

    if search_path_string not in _loaders:
        _loaders[search_path_string] = create_loader(search_path_string)
    return _loaders[search_path_string]


def install() -> None:
    os.environ.setdefault("MOTO_AMIS_PATH", str(AMIS))
    import botocore.session

    botocore.session.create_loader = _shared_loader
    _share_handler_checks()
    _share_callback_responses()
    _unchecked_signatures()
    _drawn_request_ids()

    import moto.backends

    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: iter(modules)

    import moto.core.responses

    moto.core.responses.method_names_from_class = FunctionNames

    from moto.dynamodb.responses import DynamoHandler

    if not getattr(DynamoHandler.serialized, "fast_moto", False):
        DynamoHandler.serialized = _item_answers(DynamoHandler.serialized)
    _quick_item_copies()

    from moto.dynamodb.models.dynamo_type import DynamoType

    if not getattr(DynamoType.size, "fast_moto", False):
        global _DynamoType
        _DynamoType = DynamoType
        _size.moto_size = DynamoType.size
        DynamoType.size = _size


def _quick_item_copies() -> None:
    """moto's `Item.__deepcopy__` and `DynamoType.__deepcopy__` (a Query deep-copies every
    item it answers, a write the item it replaces) copy each attribute value through
    `copy.deepcopy`: its memo, its dispatch and its keep-alive list for every value of every
    item. Here they copy the same fields (an Item's hash key, range key and attributes; a
    value's type and value, lists and maps value by value, a set's members into a new list,
    anything else shared as moto shares it) by calling each other, with the same memo."""
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict

    if getattr(Item.__deepcopy__, "fast_moto", False):
        return
    sets = ("SS", "NS", "BS")

    def value_copy(value, memo):
        if not isinstance(value, DynamoType):
            return copy.deepcopy(value, memo)
        known = memo.get(id(value))
        if known is not None:
            return known
        result = value.__class__.__new__(value.__class__)
        memo[id(value)] = result
        kind = result.type = value.type
        inner = value.value
        if kind == "L":
            result.value = [value_copy(v, memo) for v in inner]
        elif kind == "M":
            result.value = {k: value_copy(v, memo) for k, v in inner.items()}
        elif kind in sets:
            result.value = list(inner)
        else:
            result.value = inner
        return result

    def item_copy(self, memo):
        result = self.__class__.__new__(self.__class__)
        memo[id(self)] = result
        result.hash_key = value_copy(self.hash_key, memo)
        result.range_key = value_copy(self.range_key, memo)
        attrs = LimitedSizeDict.__new__(LimitedSizeDict)   # no size check: the source passed it
        dict.__init__(attrs)
        for key, value in self.attrs.items():
            dict.__setitem__(attrs, key, value_copy(value, memo))
        result.attrs = attrs
        return result

    def dynamo_copy(self, memo):
        return value_copy(self, memo)

    for function, moto_copy in ((item_copy, Item.__deepcopy__), (dynamo_copy, DynamoType.__deepcopy__)):
        function.fast_moto = True
        function.moto_copy = moto_copy
    Item.__deepcopy__ = item_copy
    DynamoType.__deepcopy__ = dynamo_copy


def _drawn_request_ids() -> None:
    import string

    import moto.core.responses

    made = moto.core.responses.gen_amzn_requestid_long
    if getattr(made, "fast_moto", False):
        return
    pool = string.ascii_letters + string.digits   # MotoRandom.get_random_string's

    def gen_amzn_requestid_long(headerdict=None):
        from moto.moto_api._internal import mock_random

        req_id = "".join(mock_random.choices(pool, k=52))
        if isinstance(headerdict, dict):
            headerdict.update({"x-amzn-requestid": req_id})
        return req_id

    gen_amzn_requestid_long.fast_moto = True
    gen_amzn_requestid_long.moto_requestid = made
    moto.core.responses.gen_amzn_requestid_long = gen_amzn_requestid_long


def _unchecked_signatures() -> None:
    import botocore.auth

    signer = botocore.auth.SigV4Auth
    if getattr(signer.add_auth, "fast_moto", False):
        return
    sign = signer.add_auth

    def add_auth(self, request):
        from moto import settings

        if type(self) is not signer or settings.INITIAL_NO_AUTH_ACTION_COUNT != float("inf"):
            return sign(self, request)
        if self.credentials is None:
            raise botocore.auth.NoCredentialsError()
        # SigV4Auth.add_auth but for the canonical request and the HMACs
        request.context["timestamp"] = botocore.auth.get_current_datetime().strftime(botocore.auth.SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        self._inject_signature_to_request(request, UNCHECKED_SIGNATURE)

    add_auth.fast_moto = True
    add_auth.botocore_add_auth = sign
    signer.add_auth = add_auth


UNCHECKED_SIGNATURE = "0" * 64


def _share_callback_responses() -> None:
    import moto.core.models

    made = moto.core.models.CallbackResponse
    if getattr(made, "fast_moto", False):
        return
    built: dict = {}

    def CallbackResponse(*, method, url, callback):
        key = (method, url, callback)
        response = built.get(key)
        if response is None:
            response = built[key] = made(method=method, url=url, callback=callback)
        return response

    CallbackResponse.fast_moto = True
    moto.core.models.CallbackResponse = CallbackResponse


def _share_handler_checks() -> None:
    import types
    import weakref

    import botocore.hooks

    if getattr(botocore.hooks.accepts_kwargs, "fast_moto", False):
        return
    accepts = botocore.hooks.accepts_kwargs
    known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def accepts_kwargs(func):
        key = func.__func__ if isinstance(func, types.MethodType) else func
        if not isinstance(key, types.FunctionType):
            return accepts(func)
        try:
            return known[key]
        except KeyError:
            known[key] = answer = accepts(func)
            return answer

    accepts_kwargs.fast_moto = True
    botocore.hooks.accepts_kwargs = accepts_kwargs

    aliaser = botocore.hooks.EventAliaser
    alias = aliaser._alias_event_name
    aliased: dict[str, str] = {}

    def _alias_event_name(self, event_name):
        if self._event_aliases is not botocore.hooks.EVENT_ALIASES:
            return alias(self, event_name)
        try:
            return aliased[event_name]
        except KeyError:
            aliased[event_name] = name = alias(self, event_name)
            return name

    aliaser._alias_event_name = _alias_event_name


# DynamoDB's operations whose output is items, keys and counts: no timestamp, nothing
# the serializer would write other than as the result holds it.
ITEM_ACTIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                          "BatchWriteItem", "TransactGetItems", "TransactWriteItems"})


class _NotPlain(Exception):
    """A value JSON has no type for, and the serializer might write otherwise."""


def _plain(value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise _NotPlain(type(value).__name__)


def _item_answers(serialized):
    """`DynamoHandler.serialized` answering an item operation's result as its JSON."""

    def answer(self, action_result):
        result = action_result.result
        if isinstance(result, dict) and self._get_action() in ITEM_ACTIONS:
            try:
                body = json.dumps(result, default=_plain)
            except _NotPlain:
                return serialized(self, action_result)
            headers = {"Content-Type": "application/x-amz-json-1.0"}
            headers.update(self.response_headers)
            return 200, headers, body
        return serialized(self, action_result)

    answer.fast_moto = True
    answer.moto_serialized = serialized
    return answer


class FunctionNames:
    """`name in FunctionNames(cls)` is `name in moto.core.utils.method_names_from_class(cls)`
    (the names `inspect.getmembers(cls, inspect.isfunction)` lists) without listing them."""

    def __init__(self, cls: type):
        self.cls = cls

    def __contains__(self, name: object) -> bool:
        import inspect

        # dir() of a class: the names in its own and its bases' namespaces
        return isinstance(name, str) and any(name in vars(k) for k in self.cls.__mro__) \
            and inspect.isfunction(getattr(self.cls, name, None))

    def __iter__(self):
        from moto.core.utils import method_names_from_class

        return iter(method_names_from_class(self.cls))


_SETS = frozenset({"SS", "NS", "BS"})
_DynamoType = None   # moto.dynamodb.models.dynamo_type.DynamoType, once installed


def _typed(value):
    return value if type(value) is _DynamoType else _DynamoType(value)


def _bytesize(value) -> int:
    # moto.dynamodb.models.utilities.bytesize
    return len(value if isinstance(value, bytes) else value.encode("utf-8"))


def _size(self) -> int:
    """`DynamoType.size` (moto.dynamodb.models.dynamo_type) without a `DynamoType` built
    for each member: a number's digits as written, a set's members' sizes (a number
    member's digits, another's bytes), a list's and a map's members' (a map's keys'
    bytes too), a boolean or null 1, a string's or binary's bytes."""
    kind, value = self.type, self.value
    if kind == "N":
        return len(str(value))
    if kind in _SETS:
        if kind == "NS":
            return sum(len(str(v)) for v in value)
        return sum(1 if isinstance(v, bool) else _bytesize(v) for v in value)
    if kind == "L":
        return sum(_size(_typed(v)) for v in value)
    if kind == "M":
        return sum(_bytesize(k) + _size(_typed(v)) for k, v in value.items())
    if isinstance(value, bool):
        return 1
    return _bytesize(value)


_size.fast_moto = True
