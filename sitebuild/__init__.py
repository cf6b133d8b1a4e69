"""The course site: `python -m sitebuild [--full] [--fresh]` (what `make site` runs) writes a
static, offline site into site/ that a teacher can publish as is.

How it is made, in order:

1. A student copy of the repository (`homework.strip`, in a temporary folder): every
   page's code and the API reference come from it, so no page shows a solution.
2. Each demo (demos/NAME.py, a `# %%` script) becomes a notebook (jupytext) and is executed in one
   Jupyter kernel in quick mode (`--full`: the full runs), from the teacher's repository, so that
   its checks and figures are the real ones. The executed notebook is cached in build/site/cache
   under a hash of the demo, the code it runs and the mode: an unchanged demo is not re-run.
   Where a demo has a model to step through (BACKWARD_PAGES), one more cell, run after the demo,
   writes the backward page (`mt.viz.html`, predict mode on) of exactly the tensors the page made.
3. Markdown pages in build/site/docs: the demos (the student copy's code, the teacher's outputs,
   figures as PNG files, the backward page in an iframe), a guide from the README's sections, the
   homework round for teachers, one page per task with its hint for students, the API reference
   (mkdocstrings over the student copy), and each demo's source as a download.
4. MkDocs (Material theme, its built-in search and offline plugins, no CDN) builds site/.
"""
