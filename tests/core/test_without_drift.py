"""The owner's drift is set aside in one place (holdfast.core.restore.without_drift): the
engage of a resource, a re-walk's check of its listing and a resumed walk's check all
leave a value the owner changed while engaged alone, by the same rule."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from holdfast.core import restore

ROOT = Path(__file__).resolve().parents[2]


def test_a_key_the_owner_changed_while_engaged_is_not_engaged_again_and_is_reported():
    record = SimpleNamespace(original={"cap": 500, "age": 3600}, applied={"cap": 2, "age": 60})
    current = {"cap": 300, "age": 3600}   # the owner set the cap to 300; an IaC apply put age back
    changes, drift = restore.without_drift({"cap": 2, "age": 60}, record, current)
    assert changes == {"age": 60}
    assert drift == {"cap": {"original": 500, "applied": 2, "current": 300}}


def test_without_a_record_every_change_is_still_to_make():
    assert restore.without_drift({"cap": 2}, None, {"cap": 500}) == ({"cap": 2}, {})


def test_no_copy_of_the_filter_is_left_in_the_shell():
    copy = re.compile(r"restore\.drift\(restore\.decide\(")
    for path in ("functions/holdfast/actuators/tagged.py", "functions/holdfast/engine/fleet.py",
                 "functions/holdfast/engine/bookkeeping.py"):
        assert not copy.search((ROOT / path).read_text()), path
