"""mt.viz.html: the backward page, opened from disk in headless Chromium (Playwright) with every
network request blocked and counted, and its bad inputs refused before anything is written."""

import importlib.util
import json
import os
import pathlib
import re
import shutil

import chromium
import numpy as np
import pytest
from wrong_ops import WrongTanh

import minitensor as mt
from models.transformer import GPT, Block

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _example():
    spec = importlib.util.spec_from_file_location("backward_page_example", ROOT / "examples" / "backward_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def block_loss():
    """The seeds' pre-norm block (B=1, T=8, d=16, 4 heads, causal) and a scalar loss, as the example makes it."""
    mt.manual_seed(0)
    block = Block(16, 4)
    x = mt.tensor(np.random.default_rng(0).standard_normal((1, 8, 16)), requires_grad=True)
    out = block(x, is_causal=True)
    return (out * out).mean()


# ----------------------------------------------------------------------------
# Without a browser: the file itself
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def block_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "block.html"
    assert _example().main(str(path)) == path
    return path


def test_block_page_is_under_3_mb_and_self_contained(block_page):
    text = block_page.read_text()
    assert block_page.stat().st_size < 3_000_000
    assert text.startswith("<!DOCTYPE html>") and "<script src" not in text and "<link" not in text
    # the only URL in the page is the SVG namespace, which names and never fetches
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) == {"http://www.w3.org/2000/svg"}


def test_bad_inputs_are_refused_before_anything_is_written(tmp_path):
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    constant = mt.tensor(np.ones((2, 3))).sum()
    with pytest.raises(ValueError, match=r"does not require grad"):
        mt.viz.html(constant, tmp_path / "a.html")
    with pytest.raises(ValueError, match=r"is a leaf: its graph has no nodes"):
        mt.viz.html(x, tmp_path / "b.html")
    loss = (x * x).sum()
    with pytest.raises(FileNotFoundError, match=r"folder '.*missing' .* does not exist"):
        mt.viz.html(loss, tmp_path / "missing" / "c.html")
    with pytest.raises(TypeError, match=r"must be a minitensor Tensor, got a ndarray"):
        mt.viz.html(np.ones(3), tmp_path / "d.html")
    with pytest.raises(ValueError, match=r"loss must have one element .* shape \(2, 3\)"):
        mt.viz.html(x * x, tmp_path / "e.html")
    assert list(tmp_path.iterdir()) == []
    assert x.grad is None  # nothing ran: the graph is still there to use
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * np.ones((2, 3)))


def test_an_existing_file_is_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    path.write_text("the previous page")
    x = mt.tensor(np.ones(3), requires_grad=True)

    def interrupted(source, target):
        raise OSError("disk full (simulated)")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", interrupted)
        with pytest.raises(OSError, match="simulated"):
            mt.viz.html((x * x).sum(), path)
    assert path.read_text() == "the previous page"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # no temporary file left behind
    mt.viz.html((x * x).sum(), path)
    assert path.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def wrong_block():
    """The block with its MLP's activation replaced by WrongTanh, and the loss function of x."""
    mt.manual_seed(0)
    block = Block(16, 4)
    block.mlp.forward = lambda h: block.mlp.fc2(WrongTanh.apply(block.mlp.fc1(h)))

    def fn(x):
        return (block(x, is_causal=True) ** 2).mean()

    x = mt.tensor(np.random.default_rng(0).standard_normal((1, 8, 16)), requires_grad=True)
    return fn, x


def page_data(path):
    """The JSON the page's script reads, as written into the page."""
    text = pathlib.Path(path).read_text()
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1))


def test_arrays_above_the_cap_are_summarised(tmp_path):
    x = mt.tensor(np.random.default_rng(0).standard_normal((6, 5)), requires_grad=True)
    loss = (x.tanh() * 3.0).sum()
    data = page_data(mt.viz.html(loss, tmp_path / "p.html", max_elements=12))
    tanh = next(s for s in data["steps"] if s["op"] == "Tanh")
    grad = tanh["grad_inputs"][0]["grad"]
    assert "data" not in grad and sum(grad["hist"]["counts"]) == 30
    expected = (1 - np.tanh(x.data) ** 2) * 3.0
    assert grad["norm"] == pytest.approx(np.linalg.norm(expected), rel=1e-12)
    assert grad["min"] == pytest.approx(expected.min()) and grad["max"] == pytest.approx(expected.max())
    assert data["loss"]["data"] == [pytest.approx(loss.item(), rel=1e-4)]  # one element: under the cap
    np.testing.assert_allclose(x.grad, expected)  # the page ran the backward pass, as loss.backward() would
    with pytest.raises(ValueError, match="max_elements must be a positive integer, got 0"):
        mt.viz.html(loss, tmp_path / "q.html", max_elements=0)


def test_check_mode_agrees_with_find_wrong_op(tmp_path):
    fn, x = wrong_block()
    assert mt.debug.find_wrong_op(fn, x).op == "WrongTanh"
    nodes = page_data(mt.viz.html(None, tmp_path / "check.html", check=(fn, x)))["nodes"]
    failed = [n["op"] for n in nodes if n.get("check") and not n["check"]["passed"]]
    assert failed == ["WrongTanh"]
    worst = max((n for n in nodes if n.get("check")), key=lambda n: n["check"]["relative_error"])
    assert worst["op"] == "WrongTanh" and "gradcheck failed" in worst["check"]["report"]


def test_check_of_a_different_graph_is_refused(tmp_path):
    fn, x = wrong_block()
    other = (x * x).sum()
    with pytest.raises(ValueError, match=r"check's fn\(\*inputs\) builds a different graph"):
        mt.viz.html(other, tmp_path / "p.html", check=(fn, x))
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------
# In the browser
# ----------------------------------------------------------------------------


class Opened(chromium.Opened):
    """The backward page in the browser (tests/chromium.py): it loads nothing but itself."""

    def step(self):
        return int(self.page.get_attribute("body", "data-step"))

    def go(self, step):
        """Drive the slider as a user would (the keyboard is tested on its own)."""
        self.page.locator("#slider").fill(str(step))
        assert self.step() == step

    def close(self):
        assert self.errors == []
        assert self.blocked == [] and self.requests == [self.url]  # the page itself, nothing else
        super().close()


def test_keyboard_steps_through_every_node_in_backward_steps_order(browser, block_page):
    expected = [(s.op, s.grad_output.shape) for s in mt.debug.backward_steps(block_loss())]
    opened = Opened(browser, block_page)
    page = opened.page
    assert opened.step() == 0 and page.locator("#counter").inner_text() == f"start (0 / {len(expected)})"
    page.locator("body").click(position={"x": 5, "y": 5})
    presses = 0
    seen = []
    while True:
        before = opened.step()
        page.keyboard.press("ArrowRight")
        if opened.step() == before:
            break
        presses += 1
        seen.append(page.locator("#panel h2 .op-name").inner_text())
        # the header and the counter number the step alike
        assert page.locator("#panel h2").inner_text().startswith(f"step {presses} of {len(expected)}: ")
        assert page.locator("#counter").inner_text() == f"step {presses} / {len(expected)}"
        shape = page.locator("#panel .muted", has_text="output shape").inner_text()
        assert shape.startswith(f"output shape {expected[presses - 1][1]};")
        assert shape.endswith(f"steps[{presses - 1}] in Python")
    assert presses == len(expected)
    assert seen == [op for op, _ in expected]
    assert page.locator("#counter").inner_text() == f"step {presses} / {len(expected)}"
    page.keyboard.press("ArrowLeft")
    assert opened.step() == presses - 1
    page.keyboard.press("Home")
    assert opened.step() == 0
    opened.close()


def _first_bias_add(steps):
    for step in steps:
        if step.op == "Add" and step.grad_inputs[1] is not None and step.grad_inputs[1].ndim == 1:
            return step


def test_norm_shown_for_a_grad_input_is_numpys(browser, block_page):
    step = _first_bias_add(mt.debug.backward_steps(block_loss()))
    expected = np.linalg.norm(np.asarray(step.grad_inputs[1], dtype=np.float64))
    opened = Opened(browser, block_page)
    opened.go(step.index + 1)
    box = opened.page.locator('.grad-input[data-input="1"]')
    shown = float(box.locator(".norm").inner_text())
    assert abs(shown - expected) <= 5e-5 * expected, (shown, expected)  # 4 significant digits at least
    assert "summed axes (0, 1): (1, 8, 16) → (16,)" in box.inner_text()
    opened.close()


def _cell(canvas, query, key):
    """Where to hover on an attention map's canvas for (query, key)."""
    margin, cell = float(canvas.get_attribute("data-margin")), float(canvas.get_attribute("data-cell"))
    return {"x": margin + (key + 0.5) * cell, "y": margin + (query + 0.5) * cell}


def test_attention_node_shows_weights_and_dscores_with_masked_cells(browser, block_page, tmp_path):
    steps = list(mt.debug.backward_steps(block_loss()))
    attention = next(s for s in steps if s.op == "Attention")
    opened = Opened(browser, block_page)
    opened.go(attention.index + 1)
    maps = opened.page.locator(".attention canvas")
    assert maps.count() == 2
    weights = maps.nth(0)
    hover = opened.page.locator(".attention .hover").nth(0)
    weights.hover(position=_cell(weights, 0, 7))  # query 0, key 7: hidden by the causal mask
    assert hover.inner_text() == "[0, 0, 0, 0, 7] query 0 → key 7: 0 (masked)"
    weights.hover(position=_cell(weights, 0, 0))  # query 0 sees only key 0
    assert hover.inner_text() == "[0, 0, 0, 0, 0] query 0 → key 0: 1"
    # the 5-D shape is explained, and the saved arrays and inputs are named
    panel = opened.page.locator("#panel")
    assert "batch 1, kv head 4, query head of group 1" in panel.inner_text()
    assert [t.inner_text() for t in panel.locator(".array .title").all()][-5:] == ["q", "k", "v", "out", "softmax_stats"]
    assert "module block.attn (MultiHeadAttention)" in panel.inner_text()
    opened.page.screenshot(path=str(tmp_path / "attention.png"))
    assert (tmp_path / "attention.png").stat().st_size > 10_000
    opened.close()


def gpt_loss(T=64, layers=2):
    mt.manual_seed(0)
    gpt = GPT(vocab=65, context=T, d=32, heads=4, layers=layers)
    idx = np.random.default_rng(0).integers(0, 65, size=(1, T))
    return gpt, idx, gpt(idx).sum() * 0.001


@pytest.fixture(scope="module")
def gpt_page(tmp_path_factory):
    gpt, idx, loss = gpt_loss()
    path = tmp_path_factory.mktemp("gpt") / "gpt.html"
    mt.viz.html(loss, path, tokens=[f"w{i}" for i in range(64)])
    return path


def test_a_gpt_page_with_two_layers_at_t64_is_under_3_mb_and_keeps_every_head(gpt_page):
    assert gpt_page.stat().st_size < 3_000_000
    data = page_data(gpt_page)
    views = [s["attention"] for s in data["steps"] if s["op"] == "Attention"]
    assert len(views) == 2
    for view in views:
        assert view["lead"] == [1, 4, 1] and view["stored"] == 4  # every (batch, head) slice
        assert all(s["rows"] == 64 and s["cols"] == 64 and s["block"] == [1, 1] for s in view["slices"])


def test_heatmaps_of_a_gpt_at_t64_show_one_head_at_a_time_with_linked_selectors(browser, gpt_page):
    _, _, loss = gpt_loss()
    steps = [s for s in mt.debug.backward_steps(loss) if s.op == "Attention"]
    step = steps[0]  # the last block's attention: its backward runs first
    opened = Opened(browser, gpt_page)
    page = opened.page
    opened.go(step.index + 1)
    assert "module gpt.blocks.1.attn" in page.locator("#panel").inner_text()
    # parameter names in full on their boxes, never cut off
    titles = [t.text_content() for t in page.locator("#graph .node.param text.op").all()]
    assert "gpt.blocks.1.attn.w_q.weight" in titles and not any("…" in t for t in titles)
    maps = page.locator(".attention canvas")
    weights, d_scores = maps.nth(0), maps.nth(1)
    page.locator('.attention input[aria-label="kv head"]').fill("2")
    assert weights.get_attribute("data-slice") == d_scores.get_attribute("data-slice") == "0,2,0"
    # query 5 ('w5') -> key 3 ('w3') of head 2, the value NumPy computes from the node's saved arrays
    q, k = (np.asarray(a, dtype=np.float64) for a in step.saved[:2])
    scores = q[0, 2, 0] @ k[0, 2, 0].T / np.sqrt(q.shape[-1])
    scores[np.triu_indices(64, 1)] = -np.inf
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    weights.hover(position=_cell(weights, 5, 3))
    text = page.locator(".attention .hover").nth(0).inner_text()
    assert text.startswith("[0, 2, 0, 5, 3] query 5 'w5' → key 3 'w3': ")
    assert float(text.split(": ")[1]) == pytest.approx(expected[5, 3], rel=1e-4)
    d_scores.hover(position=_cell(d_scores, 5, 3))
    assert page.locator(".attention .hover").nth(1).inner_text().startswith("[0, 2, 0, 5, 3] query 5 'w5' → key 3 'w3': ")
    opened.close()


def test_a_long_sequence_is_kept_cell_for_cell_not_averaged(tmp_path):
    _, _, loss = gpt_loss(T=160, layers=1)
    data = page_data(mt.viz.html(loss, tmp_path / "long.html"))
    view = next(s["attention"] for s in data["steps"] if s["op"] == "Attention")
    first = view["slices"][0]
    assert (view["tq"], view["tk"]) == (160, 160) and first["block"] == [1, 1] and first["rows"] == 160
    assert "hist" not in view and (tmp_path / "long.html").stat().st_size < 3_000_000


def _numbers_shown_on_the_graph(page):
    """The graph's gradient texts that show a number (not blank, not "grad ?")."""
    texts = [t.text_content() for t in page.locator("#graph text.norm").all()]
    return [t for t in texts if t and t != "grad ?"]


def test_predict_mode_shows_no_gradient_before_it_is_answered(browser, tmp_path):
    path = mt.viz.html(block_loss(), tmp_path / "predict.html", predict=True)
    opened = Opened(browser, path)
    page = opened.page
    opened.go(6)  # jump ahead without answering anything
    assert _numbers_shown_on_the_graph(page) == ["grad 1"]  # dL/dL = 1 at the loss: nothing to predict there
    assert page.locator("#hidden-grad-output").count() == 1 and page.locator(".grad-input").count() == 0
    titles = [t.inner_text() for t in page.locator("#panel .array .title").all()]
    assert titles and not any(t.startswith(("grad_output", "dL/d")) for t in titles), titles  # forward values only
    page.locator("#reveal-earlier").click()  # the steps that send here, revealed: grad_output shows
    assert page.locator("#hidden-grad-output").count() == 0 and page.locator("#question").count() == 1
    assert len(_numbers_shown_on_the_graph(page)) > 1
    opened.close()


def _question(page, steps, index):
    """The value asked for: (name of the input, element) read off the page, looked up in NumPy."""
    name, where = re.fullmatch(r"dL/d(\w+)\[(.*)\]", page.locator("#question").inner_text()).groups()
    step = steps[index]
    position = step.input_names.index(name)
    return step.grad_inputs[position][tuple(int(i) for i in where.split(", "))]


def test_predict_mode_reads_expressions_says_why_not_and_asks_about_any_input(browser, tmp_path):
    path = mt.viz.html(block_loss(), tmp_path / "predict.html", predict=True)
    steps = list(mt.debug.backward_steps(block_loss()))
    opened = Opened(browser, path)
    page = opened.page
    for index in range(3):  # answer the first steps by revealing them
        opened.go(index + 1)
        page.locator("#reveal").click()
    opened.go(4)
    value = _question(page, steps, 3)
    for typed, why in (("0,5", "has a comma: write a decimal point (0.5)"), ("abc", '"a" at position 1 is not part of a number'),
                       ("(1+2", "a bracket is opened and never closed"), ("1/0", "it divides by zero")):
        page.locator("#guess").fill(typed)
        page.locator("#check-guess").click()
        assert why in page.locator("#why").inner_text() and page.locator(".verdict").count() == 0
    page.locator("#guess").fill(f"{2 * value:.9g}/2")  # a sum, as a student types it
    page.locator("#guess").press("Enter")
    assert page.locator(".verdict.right").count() == 1
    attention = next(s for s in steps if s.op == "Attention")
    for index in range(4, attention.index):
        opened.go(index + 1)
        page.locator("#reveal").click()
    opened.go(attention.index + 1)
    assert [b.inner_text() for b in page.locator(".choices button").all()] == ["dL/dq", "dL/dk", "dL/dv"]
    page.locator(".choices button", has_text="dL/dk").click()
    assert page.locator("#question").inner_text().startswith("dL/dk[")
    value = _question(page, steps, attention.index)
    page.locator("#guess").fill(f"{value:.6e}")  # 1e-3 notation
    page.locator("#check-guess").click()
    assert page.locator(".verdict.right").count() == 1 and "dL/dk[" in page.locator(".verdict").inner_text()
    page.screenshot(path=str(tmp_path / "predict.png"))
    opened.close()


def scalar_graph():
    """micrograd's picture: scalars a, b; L = (a * b + a) * 0.5 (0.5 needs no gradient)."""
    a = mt.tensor(np.array(2.0), requires_grad=True, name="a")
    b = mt.tensor(np.array(-3.0), requires_grad=True, name="b")
    c = a * b
    c.name = "c"
    return a, b, (c + a) * mt.tensor(np.array(0.5))


def test_leaf_gradient_is_the_sum_of_its_contributions(tmp_path):
    a, b, loss = scalar_graph()
    data = page_data(mt.viz.html(loss, tmp_path / "p.html"))
    leaf = next(n for n in data["nodes"] if n["label"] == "a")
    assert a.grad == pytest.approx(0.5 * (-3.0 + 1.0))  # two contributions: through c and directly
    assert leaf["grad_norm"] == pytest.approx(abs(a.grad)) and leaf["grad"]["data"] == [pytest.approx(float(a.grad))]


def test_boxes_show_signed_values_forward_values_and_greyed_constants(browser, tmp_path):
    a, b, loss = scalar_graph()
    path = mt.viz.html(loss, tmp_path / "scalars.html")
    opened = Opened(browser, path)
    page = opened.page
    node_a = page.locator("#graph .node", has=page.locator("text.op", has_text=re.compile("^a$")))
    assert node_a.locator("text.value").text_content() == "data 2"
    constant = page.locator("#graph .node.const")
    assert constant.count() == 1 and "needs no gradient ()" in constant.text_content()
    # a receives from Add (step 2) and from Mul (step 3): done only after the last
    data = page_data(path)
    sends_to_a = [s["index"] for s in data["steps"] for e in s["grad_inputs"]
                  if data["nodes"][e["to"]]["label"] == "a" and "grad" in e]
    assert len(sends_to_a) == 2
    opened.go(sends_to_a[0] + 1)
    assert "done" not in node_a.get_attribute("class") and node_a.locator("text.norm").text_content() == ""
    opened.go(sends_to_a[1] + 1)
    assert "done" in node_a.get_attribute("class")
    assert node_a.locator("text.norm").text_content() == "grad -1"  # signed: 0.5 * (b + 1)
    loss_box = page.locator(f"#node-{data['steps'][0]['node']}")
    assert loss_box.locator("text.value").text_content() == "data -2"  # (2 * -3 + 2) * 0.5
    assert loss_box.locator("text.norm").text_content() == "grad 1"
    opened.close()


def test_check_mode_flags_the_wrong_op_inside_a_block(browser, tmp_path):
    fn, x = wrong_block()
    path = mt.viz.html(None, tmp_path / "check.html", check=(fn, x))
    opened = Opened(browser, path)
    page = opened.page
    assert page.locator(".node.failed").count() == 1
    worst = page.locator(".node.worst")
    assert worst.count() == 1 and worst.locator("text.op").text_content() == "WrongTanh"
    banner = page.locator("#banner")
    assert "1 op(s) disagree" in banner.inner_text() and "WrongTanh" in banner.inner_text()
    # one colour, one meaning: nothing is done yet, and a passed node keeps its fill once done
    assert page.locator(".node.done").count() == 0 and page.locator("text.done-mark", has_text="✓").count() == 0
    mean = page.locator(".node.passed").first
    fill = mean.locator("rect").evaluate("r => getComputedStyle(r).fill")
    banner.locator("button").click()
    panel = page.locator("#panel")
    assert panel.locator("h2 .op-name").inner_text() == "WrongTanh"
    assert "FAILED" in panel.inner_text() and "gradcheck failed for input 0 of WrongTanh" in panel.inner_text()
    # one relative error: the banner's, the panel's and the report's are one number
    said = [re.search(r"relative error ([0-9.e+-]+)", text).group(1) for text in
            (banner.inner_text(), panel.locator("h3 + div").first.inner_text(), panel.locator(".report").inner_text())]
    assert said[0] == said[1] and float(said[2]) == pytest.approx(float(said[0]), rel=1e-2), said
    assert "find_wrong_op" not in panel.inner_text()  # this is find_wrong_op's answer: no hint to run it
    assert "null" not in banner.inner_text()
    done = page.locator(".node.done.passed").first
    assert done.locator("rect").evaluate("r => getComputedStyle(r).fill") == fill
    assert done.locator("text.done-mark").text_content() == "✓"
    opened.go(1)  # Mean: its backward is right
    assert "passed relative error" in panel.inner_text() and "null" not in panel.inner_text()
    opened.go(6)
    page.screenshot(path=str(tmp_path / "check.png"))
    assert (tmp_path / "check.png").stat().st_size > 10_000
    opened.close()


def test_screenshots_are_written(browser, block_page, tmp_path):
    """Pictures of the start, a step in the middle and the end, and the README's three: the block
    at its attention node, in predict mode before an answer, and in check mode
    (MINITENSOR_SCREENSHOTS=DIR keeps them, e.g. docs/screenshots)."""
    keep = os.environ.get("MINITENSOR_SCREENSHOTS")
    attention = next(s for s in mt.debug.backward_steps(block_loss()) if s.op == "Attention").index + 1
    predict_page = _example().main(str(tmp_path / "predict.html"), predict=True)
    fn, x = wrong_block()
    check_page = mt.viz.html(None, tmp_path / "check.html", check=(fn, x))
    opened = Opened(browser, block_page)
    end = int(opened.page.locator("#slider").get_attribute("max"))
    opened.close()
    shots = [("start", block_page, 0), ("mid", block_page, 5), ("end", block_page, end),
             ("attention", block_page, attention), ("predict", predict_page, attention), ("check", check_page, None)]
    for name, path, step in shots:
        opened = Opened(browser, path)
        if step is None:  # check mode: at the op it flags, as its banner's button goes
            opened.page.locator("#banner button").click()
        else:
            opened.go(step)
        if name == "predict":  # before an answer: reveal the steps before, so the question can be asked here
            opened.page.locator("#reveal-earlier").click()
            assert opened.page.locator("#question").count() == 1 and opened.page.locator(".grad-input").count() == 0
            opened.page.locator("#panel h3", has_text="grad_output").scroll_into_view_if_needed()
            opened.page.locator("#panel").evaluate("p => p.scrollBy(0, p.querySelector('.predict').offsetTop - 420)")
        shot = tmp_path / f"{name}.png"
        opened.page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        if keep:
            shutil.copy(shot, pathlib.Path(keep) / shot.name)
        opened.close()
