"""mt.viz.html(None, path, compare=(model, reference, *inputs)): the model's graph coloured by
mt.debug.compare's verdicts, the culprit's panel showing its worst element, in Chromium."""

import os
import pathlib
import shutil

import numpy as np
import pytest

import minitensor as mt
from compare_blocks import blocks
from test_viz_html import Opened, page_data


def test_each_node_carries_compares_verdict(tmp_path):
    student, reference, x = blocks(("softmax_backward",), np.float32)
    data = page_data(mt.viz.html(None, tmp_path / "compare.html", compare=(student, reference, x)))
    verdicts = [n["compare"] for n in data["nodes"] if n.get("compare")]
    culprits = [n for n in data["nodes"] if n.get("compare", {}).get("verdict") == "culprit"]
    assert [(n["op"], n["compare"]["first"]) for n in culprits] == [("Softmax", True)]
    assert "worst element of its gradient to input 0 [" in culprits[0]["compare"]["worst"]
    assert {v["verdict"] for v in verdicts} == {"culprit", "inherited", "agrees"}
    assert data["compared"].startswith("compare (float32): the first node that departs is Softmax in attn")
    assert student.ln1.weight.grad is not None  # the page ran the backward pass of the model's graph


def test_compare_takes_the_model_the_reference_and_the_inputs(tmp_path):
    student, reference, x = blocks((), np.float32)
    with pytest.raises(TypeError, match=r"compare must be a tuple \(model, reference, \*inputs\)"):
        mt.viz.html(None, tmp_path / "p.html", compare=student)
    loss = student(mt.tensor(x, requires_grad=True)).sum()
    with pytest.raises(TypeError, match="compare=.* draws the model's own graph; pass loss=None and no check"):
        mt.viz.html(loss, tmp_path / "p.html", compare=(student, reference, x))
    assert list(tmp_path.iterdir()) == []


def test_the_culprit_is_red_the_inherited_orange_and_its_panel_shows_the_worst_element(browser, tmp_path):
    student, reference, x = blocks(("softmax_backward",), np.float32)
    path = mt.viz.html(None, tmp_path / "compare.html", compare=(student, reference, x))
    opened = Opened(browser, path)
    page = opened.page
    culprit = page.locator(".node.failed")
    assert culprit.count() == 1 and culprit.locator("text.op").text_content().startswith("Softmax")
    assert page.locator(".node.worst").count() == 1 and culprit.locator("text.flag").text_content() == "culprit"
    assert page.locator(".node.inherited").count() > 0 and page.locator(".node.passed").count() > 0
    fills = {kind: page.locator(f".node.{kind} rect").first.evaluate("r => getComputedStyle(r).fill")
             for kind in ("failed", "inherited", "passed")}
    assert len(set(fills.values())) == 3, fills
    banner = page.locator("#banner")
    assert "the first node that departs is Softmax in attn: the culprit" in banner.inner_text()
    banner.locator("button").click()
    panel = page.locator("#panel")
    assert panel.locator("h2 .op-name").inner_text() == "Softmax"
    assert "compared with the reference" in panel.inner_text().lower()
    assert "worst element of its gradient to input 0 [" in panel.locator(".report").inner_text()
    shot = tmp_path / "compare.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("MINITENSOR_SCREENSHOTS")
    if keep:
        shutil.copy(shot, pathlib.Path(keep) / shot.name)
    opened.close()
