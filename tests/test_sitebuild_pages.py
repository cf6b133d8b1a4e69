"""The site build's page writers on small inputs, without building a site (tests/test_site.py
builds one): what the guide does to the README's text, and how a demo page shows its figures."""

import pytest

pytest.importorskip("yaml", reason="the docs extra: pip install -e '.[test,docs]'")

from sitebuild import build as sitebuild  # noqa: E402


def test_code_that_looks_like_a_link_is_left_as_written(tmp_path):
    """`model[0](x)` in the README is a call: the guide showed it as "model0 (x)", a link turned
    to text. Code spans and fenced blocks keep their text; a link in prose still becomes text."""
    body = ("for a layer called directly `model.0` (`model[0](x)`), or ``net[1](h)``\n\n"
            "```python\ny = model[0](x)\n```\n\n"
            "see [the runner](demos/__main__.py)")
    shown = sitebuild._local_links(body, sitebuild.ROOT / "README.md", tmp_path, 1)
    assert "`model[0](x)`" in shown and "``net[1](h)``" in shown and "y = model[0](x)\n" in shown
    assert "model0" not in shown
    assert "the runner (`demos/__main__.py`)" in shown


def test_the_readme_guide_keeps_its_calls(tmp_path):
    sections = sitebuild.readme_sections((sitebuild.ROOT / "README.md").read_text())
    text = sections["Stepping through a backward pass"]
    assert "`model[0](x)`" in text
    assert "`model[0](x)`" in sitebuild._local_links(text, sitebuild.ROOT / "README.md", tmp_path, 1)
