"""The README's settings table is the one the code generates."""

from __future__ import annotations

from pathlib import Path

from holdfast.settings import markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def test_readme_settings_table_matches_the_code():
    text = README.read_text()
    assert START in text and END in text, f"README.md lacks the {START} … {END} markers"
    documented = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert documented == markdown_table(), (
        "README.md's settings table differs from the code; regenerate it with "
        "`.venv/bin/python -m holdfast.settings` and paste it between the markers"
    )
