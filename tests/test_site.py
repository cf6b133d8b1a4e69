"""The course site (`make site`, python -m sitebuild): built once for this module from a few demos
(executing all fifteen is `make site`'s job; test_demos executes each of them already), then
opened page by page in headless Chromium from files: no request leaves file://, no console
error, every image loads, every internal link leads to a file of the site, each embedded backward
page steps with the arrow key; and no page states a homework answer."""

import html
import json
import os
import pathlib
import re
import time

import pytest
from chromium import Opened, any_file, file_exists

import homework

try:
    import jupytext  # noqa: F401
    import material  # noqa: F401
    import mkdocs  # noqa: F401
    import mkdocstrings_handlers.python  # noqa: F401
except ImportError as error:  # the docs extra: make installs it (pip install -e '.[test,docs]')
    if os.environ.get("CI") == "true":
        raise ImportError(f"under CI the site test must run: {error}; pip install -e '.[test,docs]'") from error
    pytest.skip(f"{error}: pip install -e '.[test,docs]'", allow_module_level=True)

from sitebuild import build as sitebuild  # noqa: E402

if not sitebuild.LEAK_TEST.is_file():
    pytest.skip("a teacher's test: the site is built from the solved repository, not a student copy",
                allow_module_level=True)
CASES = [(task, None, pattern) for task, pattern in sitebuild.answer_patterns()]


# The demos the test builds: each with a backward page, and one without. Quick mode.
DEMOS = ["soft_lookup", "causal_self_attention", "multihead", "stacking"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(the built site, its work folder). MINITENSOR_SITE=site checks the site `make site` built
    (every demo) instead of building one from DEMOS."""
    if os.environ.get("MINITENSOR_SITE"):
        return pathlib.Path(os.environ["MINITENSOR_SITE"]).resolve(), sitebuild.WORK
    work = tmp_path_factory.mktemp("site-work")
    start = time.perf_counter()
    out = sitebuild.build(quick=True, only=DEMOS, out=work / "site", work=work)
    print(f"built the site ({len(DEMOS)} demos, quick) in {time.perf_counter() - start:.0f} s")
    return out, work


@pytest.fixture(scope="module")
def teacher_site(site):
    """The same demos built with --teacher (from the site's cache: nothing is executed again):
    the solved demo tasks' figures and backward pages shown."""
    out, work = site
    if os.environ.get("MINITENSOR_SITE"):
        pytest.skip("MINITENSOR_SITE checks a student site built elsewhere")
    return sitebuild.build(quick=True, only=DEMOS, out=work / "teacher-site", work=work, teacher=True), work


def _pages(out):
    return sorted(p for p in out.rglob("*.html") if p.name != "404.html" and "backward.html" != p.name)


def test_the_site_has_every_page_the_issue_lists(site):
    out, _ = site
    assert (out / "index.html").is_file()
    for name in DEMOS:
        assert (out / "demos" / f"{name}.html").is_file(), name
        assert (out / "sources" / f"{name}.py").is_file(), name
    for name in ["causal_self_attention", "multihead", "stacking"]:  # demo tasks: their values are the answer
        assert not (out / "demos" / name / "backward.html").exists(), name
        page = (out / "demos" / f"{name}.html").read_text()
        assert 'class="backward-page"' not in page and "The backward page is left out" in page, name
    assert not (out / "demos" / "soft_lookup" / "backward.html").exists()
    for task in homework.TASK_NAMES:
        assert (out / "tasks" / f"{task}.html").is_file(), task
    for title in sitebuild.GUIDE:
        assert (out / "guide" / f"{sitebuild.slug(title)}.html").is_file(), title
    assert (out / "teachers.html").is_file() and (out / "api" / "minitensor.tensor.html").is_file()
    api = (out / "api" / "minitensor.tensor.html").read_text()
    assert "backward" in api and "doc-function" in api  # generated from the docstrings
    page = (out / "demos" / "soft_lookup.html").read_text()
    assert ": True" in page and "soft_lookup/figure-1.png" in page  # its printed checks and its figure
    assert "sources/soft_lookup.py" in page  # a link to its source
    page = (out / "demos" / "causal_self_attention.html").read_text()  # a solved demo task's figure plots its answer
    assert ": True" in page and "figure-1.png" not in page and "The figure is left out" in page


def test_a_task_page_gives_its_hint(site):
    out, _ = site
    for task, hint in homework.TASKS:
        text = html.unescape(re.sub(r"<[^>]+>", "", (out / "tasks" / f"{task}.html").read_text()))
        plain = hint.replace("`", "")  # a hint's `code` is shown as code, without its backticks
        assert " ".join(plain.split()) in " ".join(text.replace("`", "").split()), task
        assert f"python -m homework grade . --task {task}" in text, task  # as README.student.md says


def test_no_page_shows_solution_code_or_states_an_answer(site, stripped_copy):
    """The pages' code comes from the student copy; every pattern the leak test looks for in the
    copy is looked for in every file of the site too: the site states nothing the copy does not."""
    out, _ = site
    texts = {}
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".js", ".json", ".py", ".css", ".txt", ".xml"):
            texts[path.relative_to(out).as_posix()] = path.read_text(errors="replace")
    region = re.compile(r"# BEGIN SOLUTION [a-z_]+(\s*$|\\n|</span>)", re.M)  # a marker over code, not the README's `<task>`
    assert not [name for name, text in texts.items() if region.search(text)]
    copy = []  # what the student copy states already (the seed's 1,088 in demos/multihead.py's check)
    for path in stripped_copy.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".md", ".js"):
            copy.append(path.read_text(errors="replace"))
    for task, _, pattern in CASES:
        if any(re.search(pattern, text) for text in copy):
            continue
        found = [(name, m.group(0)) for name, text in texts.items() if (m := re.search(pattern, text))]
        assert not found, f"{task}: the site states the answer: {found[:3]}"


def test_a_teacher_site_shows_the_demo_tasks_backward_pages(teacher_site):
    out, _ = teacher_site
    for name in ["causal_self_attention", "multihead", "stacking"]:
        assert (out / "demos" / name / "backward.html").is_file(), name
        assert 'class="backward-page"' in (out / "demos" / f"{name}.html").read_text()


def test_no_backward_page_shows_a_line_of_a_solution(teacher_site):
    """The backward pages are drawn in the teacher's kernel, so each node's "made at" line could
    be a line of a solution region (causal_self_attention's own function is one): those are hidden."""
    out, _ = teacher_site
    hidden = sitebuild.solution_lines()
    pages = sorted((out / "demos").glob("*/backward.html"))
    assert pages
    for path in pages:
        text = path.read_text()
        data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1))
        made_at = re.findall(r'"created_at": "([^"]*)"', json.dumps(data))
        assert made_at, path
        for frame in (f for line in made_at for f in line.split(" <- ")):
            source = frame.partition(": ")[2]
            assert source.split("#")[0].strip() not in hidden, (path, frame)
        assert "ipykernel_" not in text, path
    causal = (out / "demos" / "causal_self_attention" / "backward.html").read_text()
    assert "mask=hidden)" not in causal and "the homework task demo_causal_self_attention's solution" in causal


def test_an_unchanged_demo_is_not_executed_again(site, capsys):
    _, work = site
    capsys.readouterr()
    results = sitebuild.execute_demos(DEMOS, quick=True, fresh=False, work=work)
    assert set(results) == set(DEMOS)
    printed = capsys.readouterr().out
    assert printed.count("from the cache") == len(DEMOS) and "executing" not in printed
    assert sitebuild._cache_key("stacking", True) != sitebuild._cache_key("stacking", False)


def _internal_links(page):
    return page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")


def test_every_page_loads_offline_with_its_images_and_links(site, browser):
    out, _ = site
    pages = _pages(out)
    assert len(pages) > 30
    problems = []
    opened = Opened(browser, out / "index.html", allowed=any_file, height=1000)
    page = opened.page
    for path in pages:
        opened.goto(path)
        name = path.relative_to(out).as_posix()
        broken_images = page.eval_on_selector_all(
            "img", "images => images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)")
        for href in _internal_links(page):
            if href.startswith("file:") and not file_exists(href):
                problems.append(f"{name}: broken link {href}")
        if opened.blocked:
            problems.append(f"{name}: requests outside the site {opened.blocked}")
        if opened.errors or opened.failed:
            problems.append(f"{name}: console errors {opened.errors}, failed requests {opened.failed}")
        if broken_images:
            problems.append(f"{name}: images that do not load {broken_images}")
    opened.close()
    assert not problems, "\n".join(problems)


def test_each_embedded_backward_page_steps_with_the_arrow_key(teacher_site, browser):
    out, _ = teacher_site
    embedding = [path for path in sorted((out / "demos").glob("*.html")) if 'class="backward-page"' in path.read_text()]
    assert {f"{name}.html" for name in ["causal_self_attention", "multihead", "stacking"]} <= {p.name for p in embedding}
    for path in embedding:
        name = path.stem
        opened = Opened(browser, path, allowed=any_file, height=1000)
        frame_element = opened.page.locator("iframe.backward-page")
        frame_element.scroll_into_view_if_needed()
        frame = frame_element.content_frame
        assert frame.locator("body").get_attribute("data-step") == "0", name
        frame.locator("body").click(position={"x": 5, "y": 5})
        for expected in (1, 2, 3):
            opened.page.keyboard.press("ArrowRight")
            assert frame.locator("body").get_attribute("data-step") == str(expected), name
        assert frame.locator("#question, #hidden-grad-output").count() >= 1, name  # predict mode is on
        assert not opened.errors and not opened.blocked, (name, opened.errors, opened.blocked)
        opened.close()


def test_search_works_from_files(site, browser):
    out, _ = site
    opened = Opened(browser, out / "index.html", allowed=any_file, height=1000)
    page = opened.page
    page.locator("input.md-search__input").click()
    page.keyboard.type("softmax")  # typed: Material searches on each key
    page.locator(".md-search-result__item").first.wait_for(timeout=10_000)
    assert page.locator(".md-search-result__item").count() > 0
    assert not opened.errors and not opened.blocked
    opened.close()


def test_a_quick_build_says_so_and_shows_the_reference_figure_beside_its_own(site):
    """The default build is quick: each demo page says at the top that its outputs are a quick
    run's, and its figure stands beside the reference figure (a full run's, demos/figures/)."""
    out, _ = site
    if json.loads((out / "build.json").read_text())["quick"] is False:
        pytest.skip("a full build (--full): its figures are the full runs'")
    page = (out / "demos" / "soft_lookup.html").read_text()
    assert "A quick run: not the chapter" in page
    assert 'class="quick-and-reference"' in page
    assert "soft_lookup/reference.png" in page and "soft_lookup/figure-1.png" in page
    assert (out / "demos" / "soft_lookup" / "reference.png").read_bytes() == \
        (sitebuild.ROOT / "demos" / "figures" / "soft_lookup.png").read_bytes()
    assert page.index("A quick run") < page.index("soft_lookup/figure-1.png")
