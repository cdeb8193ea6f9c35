"""docs/settings.md is the page the settings' declarations generate (dev/settings_page.py),
and the check that says so fails on a page that has fallen behind them."""

from __future__ import annotations

import dataclasses
import json

import settings_page
from holdfast.settings import Settings, markdown_table

FIX = "regenerate it: PYTHONPATH=functions .venv/bin/python dev/settings_page.py"


def test_the_settings_page_is_the_one_the_declarations_generate():
    page = settings_page.PAGE.read_text()
    diff = settings_page.stale(page)
    assert not diff, f"docs/settings.md differs from the settings' declarations; {FIX}\n" + "\n".join(diff[:40])


def test_the_page_names_every_setting_once_with_its_default():
    page = settings_page.PAGE.read_text()
    defaults = Settings().to_mapping()
    for f in dataclasses.fields(Settings):
        assert page.count(f"| `{f.name}` | `{json.dumps(defaults[f.name])}` |") == 1, f.name


def test_a_stale_page_is_caught():
    """A declaration's doc, default or rule that changed without the page: each is a diff."""
    page = settings_page.render()
    table = markdown_table()
    first = dataclasses.fields(Settings)[0]
    doc, summary = first.metadata["doc"], first.metadata["rule"].summary
    for stale in (page.replace(doc, doc + " (an older wording)"),                 # the doc changed
                  page.replace(f"| `{first.name}` | `", f"| `{first.name}` | `x", 1),   # the default
                  page.replace(f"| {summary} |", "| anything |", 1),              # the rule
                  page.replace(table.splitlines()[-1] + "\n", ""),               # a setting added
                  page + "| `gone` | `1` | integer | a setting removed |\n"):      # a setting removed
        assert stale != page
        assert settings_page.stale(stale), stale[-200:]
    assert settings_page.stale(page) == []


def test_the_script_checks_and_writes_the_page(tmp_path, monkeypatch, capsys):
    page = tmp_path / "settings.md"
    monkeypatch.setattr(settings_page, "PAGE", page)
    assert settings_page.main(["--check"]) == 1                 # no page yet
    assert settings_page.main([]) == 0 and page.read_text() == settings_page.render()
    assert settings_page.main(["--check"]) == 0
    page.write_text(page.read_text().replace("Opt-in tag", "Opt in tag"))
    assert settings_page.main(["--check"]) == 1
    assert "-| `selector`" in capsys.readouterr().out
