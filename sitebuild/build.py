"""The steps of the site build (see the package docstring)."""

import base64
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

import demos
import homework

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "site"  # ignored: the student copy, the cache, the generated pages
SITE = ROOT / "site"
CACHE_VERSION = "1"  # bump when the way a demo is executed changes

# The demos with a model to step through: code run after the demo, in its kernel, that writes
# the backward page of what the demo computed to PATH (predict mode on). The names are the demo's.
BACKWARD_PAGES = {
    "causal_self_attention": '''
X_, W_Q_, W_K_, W_V_ = (mt.tensor(t.data, requires_grad=True, name=n) for t, n in
                        ((X, "X"), (W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V")))
Q_, K_, V_ = X_ @ W_Q_, X_ @ W_K_, X_ @ W_V_
Q_.name, K_.name, V_.name = "Q", "K", "V"
_, _, A_, Y_ = causal_self_attention(Q_, K_, V_)
A_.name, Y_.name = "A", "Y"
loss_ = (Y_ * Y_).mean()
''',
    "multihead": '''
for name_, parameter_ in mha.named_parameters():
    parameter_.name = name_
X_ = mt.tensor(x, requires_grad=True, name="x")
Y_ = mha(X_, mask=causal)
Y_.name = "mha(x)"
loss_ = (Y_ * Y_).mean()
''',
    "stacking": '''
X_ = mt.tensor(X.data, requires_grad=True, name="X")
layer1_ = [mt.tensor(w.data, requires_grad=True, name=n) for w, n in zip(layer1, ("W_q1", "W_k1", "W_v1"))]
layer2_ = [mt.tensor(w.data, requires_grad=True, name=n) for w, n in zip(layer2, ("W_q2", "W_k2", "W_v2"))]
A1_, H_ = self_attention(X_, *layer1_)
A2_, Y_ = self_attention(H_, *layer2_)
H_.name, Y_.name = "H", "Y2"
loss_ = (Y_ * Y_).mean()
''',
    "adding_problem": '''
model_ = models["transformer"]
for name_, parameter_ in model_.named_parameters():
    parameter_.name = name_
X_ = mt.tensor(test_x.data[:1], name="x")  # the first test sequence, the one the page's attention figure shows
prediction_ = model_(X_)
prediction_.name = "prediction"
target_ = mt.tensor(test_y.data[:1].reshape(prediction_.shape), name="target")
loss_ = ((prediction_ - target_) ** 2).mean()
''',
}
BACKWARD_CELL = '''# written by the site build, not part of the demo: the backward page of this page's model
import minitensor as mt
{code}loss_.name = "loss"
mt.viz.html(loss_, {path!r}, predict=True)
'''

# The README's sections the guide is made of, in order, and the one that is the teachers' page.
GUIDE = ["Ten lines", "Where each part lives", "How the engine works, in four facts",
         "Write your own op", "Checking gradients", "Models, built by hand", "Stepping through a backward pass",
         "Backends", "Speed"]
TEACHERS = "For teachers: homework from minitensor's own pieces"


def slug(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# ----------------------------------------------------------------------------------------------
# 1. The student copy
# ----------------------------------------------------------------------------------------------


def student_copy(scratch):
    """A fresh stripped copy in scratch/student (strip writes outside the repository only)."""
    out = pathlib.Path(scratch) / "student"
    homework.strip(out)
    return out


# ----------------------------------------------------------------------------------------------
# 2. Executing the demos, cached
# ----------------------------------------------------------------------------------------------


def _cache_key(name, quick):
    """A hash of everything an executed demo depends on: its source, the code it can import, the
    mode and the backward cell."""
    digest = hashlib.sha256(f"{CACHE_VERSION} {name} quick={quick}\n{BACKWARD_PAGES.get(name, '')}".encode())
    for folder in ("minitensor", "models", "demos"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".js", ".css") and "figures" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def execute_demos(names, quick, fresh, work=WORK):
    """{name: (executed notebook, backward page path or None)}; a demo whose cache entry is there
    is read back, the others are executed in one kernel (from demos/, as Jupyter would)."""
    import jupytext
    import nbclient
    import nbformat

    cache = work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    results, todo = {}, []
    for name in names:
        entry = cache / f"{name}-{_cache_key(name, quick)}"
        if not fresh and (entry / "notebook.ipynb").is_file():
            page = entry / "backward.html"
            results[name] = (nbformat.read(entry / "notebook.ipynb", as_version=4), page if page.is_file() else None)
            print(f"  {name}: from the cache", flush=True)
        else:
            todo.append((name, entry))
    if not todo:
        return results
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    env = dict(os.environ, MINITENSOR_QUICK="1" if quick else "0",
               PYTHONPATH=os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p))
    env.pop("MPLBACKEND", None)
    env.pop("MINITENSOR_DEMO_RECORD", None)
    manager.start_kernel(env=env, cwd=str(ROOT / "demos"))
    try:
        for name, entry in todo:
            print(f"  {name}: executing", flush=True)
            notebook = jupytext.read(ROOT / "demos" / f"{name}.py")
            if entry.exists():
                shutil.rmtree(entry)
            entry.mkdir(parents=True)
            page = entry / "backward.html"
            if name in BACKWARD_PAGES:
                code = BACKWARD_CELL.format(code=BACKWARD_PAGES[name].lstrip(), path=str(page))
                notebook.cells.append(nbformat.v4.new_code_cell(code, metadata={"site_build": True}))
            nbclient.NotebookClient(notebook, km=manager, timeout=600).execute()
            nbformat.write(notebook, entry / "notebook.ipynb")
            results[name] = (notebook, page if page.is_file() else None)
    finally:
        manager.shutdown_kernel(now=True)
    return results


# ----------------------------------------------------------------------------------------------
# 3. The pages
# ----------------------------------------------------------------------------------------------


def _fence(text, language=""):
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}\n"


def solution_lines():
    """{a line of a solution region, stripped: its task} over the teacher's marked files."""
    from homework.strip import marked_files, regions

    lines = {}
    for path in marked_files(ROOT):
        for task, _, _, body in regions(path.read_text(), str(path)):
            for line in body:
                code = line.split("#")[0].strip()
                if len(code) > 8:  # not `return`, `)` or `else:`
                    lines[code] = task
    return lines


def hide_solution_lines(page_html):
    """The backward page with each node's "made at file:line: source" kept, except a source line
    that is a line of a solution region (the teacher's kernel ran it): that one becomes a note.
    The kernel's cell files (/tmp/ipykernel_.../....py) are called "a cell of this page"."""
    hidden = solution_lines()
    tag = '<script id="data" type="application/json">'
    start = page_html.index(tag) + len(tag)
    end = page_html.index("</script>", start)
    data = json.loads(page_html[start:end])

    def frame(text):
        text = re.sub(r"/[^\s:]*/ipykernel_\d+/\d+\.py", "a cell of this page", text)
        where, colon, source = text.partition(": ")
        task = hidden.get(source.split("#")[0].strip()) if colon else None
        return f"{where}: (a line of the homework task {task}'s solution, not shown)" if task else text

    def walk(value):
        if isinstance(value, dict):
            return {k: (" <- ".join(frame(f) for f in v.split(" <- ")) if k == "created_at" and isinstance(v, str)
                        else walk(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    payload = json.dumps(walk(data), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return page_html[:start] + payload + page_html[end:]


QUICK_NOTE = ("!!! warning \"A quick run: not the chapter's numbers\"\n    This site was built in quick mode "
              "(`MINITENSOR_QUICK=1`: training cut to a few steps), so the outputs below are a quick run's, and "
              "its figure is marked QUICK RUN. Beside it, the reference figure: a full run's, as `make demo` draws "
              "it (`demos/figures/{name}.png`). `make site SITE_FLAGS=--full` builds the site from full runs.\n")


def reference_beside(name, figure, docs):
    """The quick run's figure beside the reference figure (a full run's, demos/figures/NAME.png),
    each captioned; the quick one alone where the demo has no reference figure."""
    reference = ROOT / "demos" / "figures" / f"{name}.png"
    quick = f"![{name}: {figure} (quick run)]({figure})"
    if not reference.is_file():
        return quick + "\n"
    (docs / "demos" / name / "reference.png").write_bytes(reference.read_bytes())
    return ('<div class="quick-and-reference" markdown>\n\n'
            f'<figure markdown>\n\n![{name}: the reference figure, a full run]({name}/reference.png)\n\n'
            '<figcaption>the reference figure: a full run (<code>make demo</code>)</figcaption>\n</figure>\n\n'
            f'<figure markdown>\n\n{quick}\n\n'
            '<figcaption>this build: a quick run (training cut short)</figcaption>\n</figure>\n\n</div>\n')


def demo_page(name, notebook, backward, student, docs, teacher=False, quick=False):
    """docs/demos/NAME.md from the executed notebook: the markdown cells as they are, each code
    cell as the student copy has it, then its printed output and figures. From a quick run, the
    page says so at the top and each figure stands beside the reference figure (a full run's)."""
    import jupytext

    shown = jupytext.read(student / "demos" / f"{name}.py")
    cells = [c for c in notebook.cells if not c.metadata.get("site_build")]
    if [c.cell_type for c in shown.cells] != [c.cell_type for c in cells]:
        raise RuntimeError(f"{name}: the student copy's cells do not line up with the demo's")
    folder = docs / "demos"
    (folder / name).mkdir(parents=True, exist_ok=True)
    parts, figures = [], 0
    answer_figure = not teacher and homework.kept_out(f"demos/figures/{name}.png")
    for cell, code in zip(cells, shown.cells):
        if cell.cell_type == "markdown":
            parts.append(code.source.strip() + "\n")  # the student copy's (the same text: strip leaves prose)
            continue
        parts.append(_fence(code.source, "python"))
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                parts.append('<div class="demo-output" markdown>\n\n' + _fence(output["text"], "text") + "\n</div>\n")
            elif kind == "error":
                raise RuntimeError(f"{name}: a cell stopped with {output['ename']}: {output['evalue']}")
            elif "image/png" in output.get("data", {}) and answer_figure:
                # the figure of a solved demo task plots the task's answer: strip keeps it out of
                # the student copy, and the site (unless built --teacher) leaves it out the same way
                task = f"demo_{name}"
                parts.append(f"!!! note \"The figure is left out\"\n    It plots the answer of the homework task "
                             f"[`{task}`](../tasks/{task}.md): run `python demos/{name}.py` once the task is done to "
                             "draw it. (A site built with `--teacher` shows it.)\n")
            elif "image/png" in output.get("data", {}):
                figures += 1
                (folder / name / f"figure-{figures}.png").write_bytes(base64.b64decode(output["data"]["image/png"]))
                if quick:
                    parts.append(reference_beside(name, f"{name}/figure-{figures}.png", docs))
                else:
                    parts.append(f"![{name}: figure {figures}]({name}/figure-{figures}.png)\n")
            elif "text/plain" in output.get("data", {}) and not output["data"]["text/plain"].startswith("PosixPath("):
                # a cell's last value; save()'s path (where the figure went on the build machine) is not shown
                parts.append(_fence(output["data"]["text/plain"], "text"))
    title_end = 1 if parts and parts[0].startswith("# ") else 0
    header = parts[0].split("\n", 1) if title_end else ["# " + name, ""]
    links = (f"\n[Download the source](../sources/{name}.py) (the student copy's `demos/{name}.py`; run it with "
             f"`python demos/{name}.py`, or open it as a notebook).\n")
    if quick:
        links += "\n" + QUICK_NOTE.format(name=name)
    if backward is not None and answer_figure:
        # its values are the withheld figure's (the task's answer at the demo's inputs): left out with it
        task = f"demo_{name}"
        parts.append("## The backward pass of this page's model\n\n"
                     "!!! note \"The backward page is left out\"\n    Its values are the ones the left-out figure "
                     f"plots, the answer of the homework task [`{task}`](../tasks/{task}.md). (A site built with "
                     "`--teacher` shows it.)\n")
    elif backward is not None:
        (folder / name / "backward.html").write_text(hide_solution_lines(backward.read_text()))
        links += ("\n!!! tip \"Step through the backward pass of this page's model\"\n"
                  "    Below the demo, the backward page of the tensors this page computed, in predict mode: "
                  "click it, then step with the arrow keys, and predict each gradient before it is shown.\n")
        parts.append("## The backward pass of this page's model\n\n"
                     "The page's own tensors, with `requires_grad` on and the mean of the squared output as the "
                     "loss, drawn by `mt.viz.html(loss, path, predict=True)`. Click inside it, then press the right "
                     f"arrow key. [Open it on its own page]({name}/backward.html).\n\n"
                     f'<iframe class="backward-page" src="{name}/backward.html" title="backward pass of {name}" '
                     'loading="eager"></iframe>\n')
    first = header[1] if len(header) > 1 else ""  # the rest of the first cell, after its heading
    text = "\n".join([header[0], links, first, *parts[title_end:]])
    (folder / f"{name}.md").write_text(text)
    sources = docs / "sources"
    sources.mkdir(exist_ok=True)
    shutil.copyfile(student / "demos" / f"{name}.py", sources / f"{name}.py")
    title = header[0].removeprefix("# ").strip()
    return re.split(r": | \(seed", title)[0].strip().rstrip(".")  # the nav's title: the start of the heading


def readme_sections(text):
    """{title: body} of a README's `## ` sections (each body keeps its `###` subsections)."""
    sections, title, lines, fenced = {}, None, [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            if title:
                sections[title] = "\n".join(lines)
            title, lines = line[3:].strip(), []
        elif title:
            lines.append(line)
    if title:
        sections[title] = "\n".join(lines)
    return sections


LEAK_TEST = ROOT / "tests" / "test_homework_leaks.py"


def answer_patterns():
    """[(task, pattern)]: what an answer looks like, from the leak test that holds the student copy
    to it, so the site is held to the same patterns. That file is the teacher's (strip keeps it
    out of the copy), and so is the site build: it executes the solved demos."""
    import importlib.util

    if not LEAK_TEST.is_file():
        raise RuntimeError(f"{LEAK_TEST} is not here: the course site is built from the teacher's repository "
                           "(it runs the solved demos), not from a student copy")
    spec = importlib.util.spec_from_file_location("leak_patterns", LEAK_TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return sorted({(task, pattern) for task, _, pattern in module.CASES})


def redact(body):
    """The README's text with every block (a fenced block, or a paragraph) that matches an answer
    pattern replaced by a sentence: the teacher's README may show an answer (the pdb transcript
    checks softmax's backward by hand); the site, which students read, does not."""
    patterns = answer_patterns()
    blocks, current, fenced = [], [], False
    for line in body.splitlines():
        current.append(line)
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and (not line.strip() or line.lstrip().startswith("```")):
            blocks.append("\n".join(current))
            current = []
    blocks.append("\n".join(current))
    kept = []
    for block in blocks:
        tasks = sorted({task for task, pattern in patterns if re.search(pattern, block)})
        if tasks:
            kept.append(f"\n!!! note \"Left out of the site\"\n    A passage of the README here shows the answer of "
                        f"the homework task {', '.join(tasks)}; the teacher's README has it.\n")
        else:
            kept.append(block)
    return "\n".join(kept)


def _local_links(body, source, docs, depth):
    """Images the README shows are copied beside the pages (the solved demo tasks' figures, which
    the student copy leaves out, become a sentence); other links into the repository become text,
    since the site holds no copy of the repository."""

    def replace(match):
        if match.group("code"):  # code is shown as written: `model[0](x)` is a call, not a link
            return match.group(0)
        bang, text, target = match.group("bang"), match.group("text"), match.group("target")
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        path = (source.parent / target).resolve()
        if bang and path.is_file():
            relative = path.relative_to(ROOT).as_posix()
            if homework.kept_out(relative):
                return f"*(the figure {relative} is left out of the site: it shows a homework task's answer)*"
            (docs / "assets" / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, docs / "assets" / relative)
            return f"![{text}]({'../' * depth}assets/{relative})"
        return f"{text} (`{target}`)"

    code = r"(?P<code>^(?P<fence>`{3,}).*?^(?P=fence)|(?P<ticks>`+)(?:(?!\n\n).)+?(?P=ticks))"  # fenced or inline
    link = r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)"
    return re.sub(f"{code}|{link}", replace, body, flags=re.S | re.M)


def guide_pages(docs):
    """docs/guide/*.md, one per README section in GUIDE, and docs/teachers.md."""
    sections = readme_sections((ROOT / "README.md").read_text())
    missing = [title for title in GUIDE + [TEACHERS] if title not in sections]
    if missing:
        raise RuntimeError(f"the README has no section {missing}: update GUIDE in {__file__}")
    # The README's "Your first session" is the teacher's (make demo, the pdb session, gradcheck):
    # in a student copy those stop at the tasks not yet done. A student's first session is the
    # student README's "Setting up", on the students' page (task_pages), so the guide starts after it.
    (docs / "guide").mkdir(parents=True, exist_ok=True)
    nav = []
    for title in GUIDE:
        body = _local_links(redact(sections[title]), ROOT / "README.md", docs, 1)
        (docs / "guide" / f"{slug(title)}.md").write_text(f"# {title}\n{body}\n")
        nav.append({title: f"guide/{slug(title)}.md"})
    body = _local_links(redact(sections[TEACHERS]), ROOT / "README.md", docs, 0)
    (docs / "teachers.md").write_text(f"# {TEACHERS}\n{body}\n\nEach task's hint, as a student sees it: "
                                      "[the tasks](tasks/index.md).\n")
    return nav


def task_pages(student, docs):
    """docs/tasks/index.md (the student README's sections) and one page per task: its hint, where
    it lives and how to grade it. Nothing of an answer: the hints are written to give none."""
    (docs / "tasks").mkdir(parents=True, exist_ok=True)
    readme = (student / "README.md").read_text()
    intro = _local_links(readme.split("\n", 1)[1], student / "README.md", docs, 1)
    rows = "\n".join(f"| {i} | [`{name}`]({name}.md) |" for i, (name, _) in enumerate(homework.TASKS, 1))
    (docs / "tasks" / "index.md").write_text(f"# For students: the homework\n{intro}\n\n## Every task\n\n"
                                             f"| # | task |\n|---|---|\n{rows}\n")
    nav = [{"The homework": "tasks/index.md"}]
    for number, (name, hint) in enumerate(homework.TASKS, 1):
        before = homework.TASK_NAMES[number - 2] if number > 1 else None
        after = homework.TASK_NAMES[number] if number < len(homework.TASKS) else None
        previous = f"[previous: `{before}`]({before}.md)" if before else ""
        following = f"[next: `{after}`]({after}.md)" if after else ""
        (docs / "tasks" / f"{name}.md").write_text(
            f"# Task {number}: `{name}`\n\n"
            f"!!! hint \"The hint\"\n    {hint}\n\n"
            "## Grading it\n\n"
            f"```bash\npython -m homework grade . --task {name}      # its tests\n"
            f"python -m homework grade . --task {name} -v   # with each failing test's feedback\n```\n\n"
            "The stub raises `NotImplementedError` with this hint until you replace it. "
            "How grading works and what to do when a test fails: [the homework](index.md).\n\n"
            f"{previous}{' · ' if previous and following else ''}{following}\n")
        nav.append({f"{number}. {name}": f"tasks/{name}.md"})
    return nav


API_MODULES = ["minitensor", "minitensor.tensor", "minitensor.autograd", "minitensor.views", "minitensor.creation",
               "minitensor.nn", "minitensor.optim", "minitensor.gradcheck", "minitensor.debug", "minitensor.sites",
               "minitensor.viz",
               "models.attention", "models.layernorm", "models.transformer", "models.recurrent"]


def api_pages(student, docs):
    (docs / "api").mkdir(parents=True, exist_ok=True)
    nav = []
    for module in API_MODULES:
        if not (student / module.replace(".", "/")).with_suffix(".py").is_file() and \
                not (student / module.replace(".", "/") / "__init__.py").is_file():
            continue
        (docs / "api" / f"{module}.md").write_text(f"# `{module}`\n\n::: {module}\n")
        nav.append({module: f"api/{module}.md"})
    return nav


def home_page(docs, demo_nav):
    readme = (ROOT / "README.md").read_text()
    intro = readme.split("\n## ", 1)[0].split("\n", 1)[1]
    demo_list = "\n".join(f"- [{title}]({path})" for entry in demo_nav for title, path in entry.items())
    (docs / "index.md").write_text(
        f"# minitensor\n{_local_links(redact(intro), ROOT / 'README.md', docs, 0)}\n\n"
        "## Where to go\n\n"
        "- **The demos**, each a chapter of the seeds executed when this site was built, with its checks and "
        "figures; the attention demos end with the backward page of their own model, to step through.\n"
        "- **The guide**: the engine, writing an op, checking gradients, debugging, backends, speed.\n"
        "- **For students**: the homework tasks, each with its hint. **For teachers**: the homework round.\n"
        "- **API reference**, from the docstrings.\n\n"
        f"## The demos\n\n{demo_list}\n")


# ----------------------------------------------------------------------------------------------
# 4. MkDocs
# ----------------------------------------------------------------------------------------------


def write_config(student, docs, nav, work):
    config = {
        "INHERIT": str(ROOT / "mkdocs.yml"),
        "docs_dir": str(docs),
        "site_dir": str(work / "built"),
        "nav": nav,
        "plugins": ["search", "offline",
                    {"mkdocstrings": {"handlers": {"python": {"paths": [str(student)], "options": {
                        "show_source": False, "show_root_heading": True, "members_order": "source",
                        "docstring_style": None, "show_if_no_docstring": False, "filters": ["!^_"],
                        "heading_level": 2}}}}}],
    }
    path = work / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return path


def build(quick=True, fresh=False, only=None, out=None, work=None, teacher=False):
    """Build the site into out (default site/), with work (default build/site) for the cache and
    the generated pages (the student copy goes to a temporary folder: strip writes outside the
    repository only); only: some demos (the tests build a few); teacher: also show the figures of
    the solved demo tasks, which plot their answers (a site for teachers, not for students)."""
    out = pathlib.Path(out) if out else SITE
    work = pathlib.Path(work) if work else WORK
    names = only or demos.DEMOS
    print("1/4 the student copy", flush=True)
    with tempfile.TemporaryDirectory(prefix="minitensor-site-") as scratch:
        return _build(quick, fresh, names, out, work, student_copy(scratch), teacher)


def _build(quick, fresh, names, out, work, student, teacher):
    print(f"2/4 the demos ({'quick' if quick else 'full'} mode)", flush=True)
    executed = execute_demos(names, quick, fresh, work)
    print("3/4 the pages", flush=True)
    docs = work / "docs"
    if docs.exists():
        shutil.rmtree(docs)
    docs.mkdir(parents=True)
    shutil.copytree(ROOT / "sitebuild" / "assets", docs / "assets")
    demo_nav = []
    for name in names:
        notebook, backward = executed[name]
        title = demo_page(name, notebook, backward, student, docs, teacher, quick)
        demo_nav.append({title: f"demos/{name}.md"})
    home_page(docs, demo_nav)
    nav = [{"Home": "index.md"}, {"Demos": demo_nav}, {"Guide": guide_pages(docs)},
           {"For students": task_pages(student, docs)}, {"For teachers": "teachers.md"},
           {"API reference": api_pages(student, docs)}]
    config = write_config(student, docs, nav, work)
    print("4/4 mkdocs build", flush=True)
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's notice of its successor, printed on every build
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--clean", "-f", str(config)], check=True,
                   cwd=ROOT, env=env)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(work / "built", out)
    (out / "build.json").write_text(json.dumps({"quick": quick, "teacher": teacher, "demos": names}))
    return out
