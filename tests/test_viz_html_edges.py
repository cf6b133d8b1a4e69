"""The backward page renders every graph the engine can build (issue 31): infinities and NaN (JSON
has none), empty tensors, attention with a fully hidden row (marked), a backward stopped by a
wrong-shaped gradient; and its attention maps show a mask error on the diagonal at T = 256, one
cell per cell, each row on its own scale. MINITENSOR_SCREENSHOTS=DIR keeps the pictures."""

import os
import pathlib
import shutil

import numpy as np

import minitensor as mt
from test_viz_html import Opened, _cell, page_data
from test_wrong_gradient_shape import setup as wrong_shape_setup


def attention_loss(T, mask, heads=2, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (mt.tensor(rng.standard_normal((1, heads, T, 8)), requires_grad=True) for _ in range(3))
    out = mt.F.scaled_dot_product_attention(q, k, v, mask=mask)
    return (out * out).sum()


def hidden_row_mask(T=6, row=2):
    mask = np.zeros((T, T), dtype=bool)  # True hides, as in torch.nn.MultiheadAttention
    mask[row, :] = True
    return mask


def diagonal_too_mask(T):
    """A causal mask with an off-by-one: it hides the diagonal as well as the future."""
    query, key = np.arange(T)[:, None], np.arange(T)[None, :]
    return key >= query


def _at(canvas, query, key):
    """_cell, for a canvas the page may show narrower than its pixels."""
    shown = canvas.bounding_box()["width"] / float(canvas.get_attribute("width"))
    return {name: value * shown for name, value in _cell(canvas, query, key).items()}


def _keep(shot):
    keep = os.environ.get("MINITENSOR_SCREENSHOTS")
    if keep:
        shutil.copy(shot, pathlib.Path(keep) / shot.name)


def test_a_fully_hidden_row_is_written_and_marked(tmp_path):
    data = page_data(mt.viz.html(attention_loss(6, hidden_row_mask()), tmp_path / "row.html"))
    view = next(s["attention"] for s in data["steps"] if s["op"] == "Attention")
    assert [s["empty_rows"] for s in view["slices"]] == [[2], [2]]


def test_infinities_and_nan_are_written_and_read_back(tmp_path, browser):
    x = mt.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    hidden = mt.tensor(np.array([[False, True, False, True]] * 3))
    scores = x.masked_fill(hidden, float("-inf"))  # the -inf a mask saves, on purpose
    loss = (scores.softmax(axis=-1).sum() + (x.abs() * mt.tensor(np.array([np.inf]))).sum()
            + mt.tensor(np.array(np.nan)))  # a forward inf, gradients of inf, a NaN loss
    path = mt.viz.html(loss, tmp_path / "inf.html")
    text = path.read_text()
    assert "__-inf__" in text or "__inf__" in text or "__nan__" in text
    opened = Opened(browser, path)
    opened.go(int(opened.page.locator("#slider").get_attribute("max")))
    opened.close()  # no console error, no exception


def test_empty_tensors_render(tmp_path, browser):
    x = mt.tensor(np.zeros((0, 3)), requires_grad=True)
    w = mt.tensor(np.ones(3), requires_grad=True)
    path = mt.viz.html((x * w).sum() + w.sum(), tmp_path / "empty.html")
    opened = Opened(browser, path)
    for step in range(int(opened.page.locator("#slider").get_attribute("max")) + 1):
        opened.go(step)
    opened.close()


def test_a_t256_diagonal_mask_error_is_kept_cell_for_cell(tmp_path):
    T = 256
    data = page_data(mt.viz.html(attention_loss(T, diagonal_too_mask(T), heads=1), tmp_path / "diag.html"))
    view = next(s["attention"] for s in data["steps"] if s["op"] == "Attention")
    first = view["slices"][0]
    assert (first["rows"], first["cols"], first["block"]) == (T, T, [1, 1])  # not averaged over blocks
    assert all(first["hidden"][i * T + i] == "1" for i in range(T))  # the diagonal, hidden, cell by cell
    assert first["empty_rows"] == [0]  # query 0 sees no key


def test_the_hidden_row_and_the_diagonal_error_are_seen_in_the_browser(tmp_path, browser):
    shots = []
    for name, loss in (("hidden_row", attention_loss(6, hidden_row_mask())),
                       ("diagonal_mask_t256", attention_loss(256, diagonal_too_mask(256), heads=1))):
        path = mt.viz.html(loss, tmp_path / f"{name}.html")
        step = next(s["index"] for s in page_data(path)["steps"] if s["op"] == "Attention") + 1
        opened = Opened(browser, path)
        opened.go(step)
        warning = opened.page.locator(".attention .empty-rows")
        assert warning.count() == 1 and "fully hidden row" in warning.inner_text()
        weights = opened.page.locator(".attention canvas").nth(0)
        row = 2 if name == "hidden_row" else 0
        weights.hover(position=_at(weights, row, 1 if row == 0 else 0))
        assert "(masked)" in opened.page.locator(".attention .hover").nth(0).inner_text()
        if name != "hidden_row":  # one cell per cell at T = 256: query 5 -> key 5 is its own cell, hidden
            assert float(weights.get_attribute("data-cell")) >= 2
            weights.hover(position=_at(weights, 5, 5))
            assert opened.page.locator(".attention .hover").nth(0).inner_text().startswith("[0, 0, 5, 5] query 5 → key 5: 0 (masked)")
            weights.hover(position=_at(weights, 5, 4))
            assert "(masked)" not in opened.page.locator(".attention .hover").nth(0).inner_text()
        opened.page.locator(".attention").evaluate("e => e.scrollIntoView({block: 'start'})")
        shot = tmp_path / f"{name}.png"
        opened.page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        shots.append(shot)
        _keep(shot)
        opened.close()


def test_a_backward_stopped_by_a_wrong_shape_is_shown(tmp_path, browser):
    net, x, loss_of = wrong_shape_setup()
    path = mt.viz.html(None, tmp_path / "stopped.html", check=(loss_of, x))
    opened = Opened(browser, path)
    banner = opened.page.locator("#banner #stopped")
    assert "Backward stopped after step 2" in banner.inner_text() and "TransposedMatMul" in banner.inner_text()
    assert "(5, 3) is (3, 5) transposed" in banner.inner_text()
    opened.page.locator("#stopped button").click()
    assert opened.step() == 2
    opened.close()


def test_predict_mode_allows_a_second_try_before_it_shows_the_answer(tmp_path, browser):
    from test_viz_html import _question, block_loss

    path = mt.viz.html(block_loss(), tmp_path / "predict.html", predict=True)
    steps = list(mt.debug.backward_steps(block_loss()))
    opened = Opened(browser, path)
    page = opened.page
    opened.go(1)
    value = _question(page, steps, 0)
    page.locator("#guess").fill(f"{value * 3 + 1:.9g}")
    page.locator("#check-guess").click()
    assert page.locator("#second-try").count() == 1 and page.locator(".verdict.wrong").count() == 1
    assert page.locator("#question").count() == 1 and page.locator(".grad-input").count() == 0  # nothing shown yet
    assert f"{value:.6g}" not in page.locator("#panel").inner_text()
    page.locator("#guess").fill(f"{value:.9g}")
    page.locator("#check-guess").click()
    assert "Right on the second try" in page.locator(".verdict.right").inner_text()
    opened.go(2)
    value = _question(page, steps, 1)
    for _ in range(2):
        page.locator("#guess").fill(f"{value * 3 + 1:.9g}")
        page.locator("#check-guess").click()
    assert "Not quite, twice" in page.locator(".verdict.wrong").inner_text()
    assert page.locator(".grad-input").count() >= 1  # now the answer shows
    opened.close()
