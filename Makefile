# `make test` and `make demo` set themselves up: each creates .venv when it is
# missing and installs into it once what it needs (a stamp file remembers): `make demo` only the
# runtime packages (numpy, scipy, numba, matplotlib, tqdm, threadpoolctl), `make test` the test and
# docs extras too (PyTorch, Playwright, pytest, MkDocs: most of the download).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
# when this `make` started, so that `make demo` can print its time with the install included
STARTED := $(shell date +%s)

.PHONY: test demo bench notebooks lab reference-figures site clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The docs extra is installed too: the tests build the course site.
# setup.cfg says which versions work (ranges); constraints.txt fixes the ones CI uses.
$(STAMP): setup.cfg pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -c constraints.txt -e '.[test,docs]'
	touch $(STAMP) $(RUNTIME_STAMP)

# What the demos, the examples and the debugger need: the runtime packages alone. --no-compile:
# pip would write the bytecode of every module of NumPy, SciPy, Numba and Matplotlib, which took
# about 18 of pip's 34 to 43 s here (load 3 to 4); Python writes it for the modules a demo imports,
# on first import (2 to 3 s).
$(RUNTIME_STAMP): setup.cfg pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --no-compile -c constraints.txt -e .
	touch $(RUNTIME_STAMP)

# The suite runs in JOBS processes (pytest-xdist), a test file per process at a time (--dist loadfile:
# a file's module fixtures, such as a built site or a graded copy, are made once), the longest files
# first (tests/conftest.py, LONGEST_FIRST; --no-loadscope-reorder keeps that order). make test JOBS=1: one process.
JOBS ?= 2
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadfile --no-loadscope-reorder)

# make demo                        every demo, as the chapters run them (figures in out/figures/)
# make demo QUICK=1                shortened training runs (figures in out/quick/, marked as quick)
# make demo NAMES="scaling kv_cache"  only those demos
# The last line is the time since `make demo` started, the install included.
demo: $(RUNTIME_STAMP)
	@status=0; $(PY) -m demos $(if $(filter-out 0,$(QUICK)),--quick) $(NAMES) || status=$$?; \
	elapsed=$$(( $$(date +%s) - $(STARTED) )); \
	echo "make demo: $$((elapsed / 60)) min $$((elapsed % 60)) s in all, set-up of .venv included"; \
	exit $$status

# The committed figures in demos/figures/ are the reference the README shows; replace them with
# the last full run's (out/figures/) only on purpose, and commit them.
reference-figures:
	@test -n "$$(ls out/figures/*.png 2>/dev/null)" || { echo "no figures in out/figures/: run make demo first"; exit 1; }
	cp out/figures/*.png demos/figures/

bench: $(STAMP)
	$(PY) -m benchmarks

# Each demo as a Jupyter notebook (jupytext, from the test extra), in the ignored notebooks/ folder.
# A notebook is written only when it is missing or older than its demo, so a student's edits in
# notebooks/ survive the next `make notebooks` (and `make lab`); `make notebooks FORCE=1` writes
# every one afresh from its demo. A notebook written over (its demo changed, or FORCE) is kept as NAME.ipynb.bak.
DEMO_NAMES = $(shell $(PYTHON) -c 'import demos; print(*demos.DEMOS)')
NOTEBOOKS = $(patsubst %,notebooks/%.ipynb,$(DEMO_NAMES))

notebooks: $(NOTEBOOKS)

notebooks/%.ipynb: demos/%.py $(if $(filter-out 0,$(FORCE)),always) | $(STAMP)
	@mkdir -p notebooks
	@if [ -f $@ ]; then cp -p $@ $@.bak; echo "$@: written afresh from $<; the one it replaces is kept as $@.bak"; fi
	$(VENV)/bin/jupytext --quiet --to ipynb --output $@ $<

.PHONY: always
always:

# JupyterLab on those notebooks (the notebook extra: installed once, into .venv). Set QUICK=1 to
# open them in quick mode: the kernel inherits MINITENSOR_QUICK from here.
LAB_STAMP := $(VENV)/.installed-notebook
$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install -c constraints.txt -e '.[test,notebook]'
	touch $(LAB_STAMP)

# Jupyter refuses to start as root ("Running as root is not recommended") unless told
# --allow-root; Docker containers and Codespaces run as root, so it is passed there, and only there.
USER_ID ?= $(shell id -u)
lab: notebooks $(LAB_STAMP)
	MINITENSOR_QUICK=$(if $(filter-out 0,$(QUICK)),1,0) $(VENV)/bin/jupyter lab $(if $(filter 0,$(USER_ID)),--allow-root) notebooks

# The course site, in the ignored site/ folder (the demos executed in quick mode and cached in
# build/site/cache; `make site SITE_FLAGS=--full` for the full runs). Publish site/ as it is.
site: $(STAMP)
	$(PY) -m sitebuild $(SITE_FLAGS)

clean:
	rm -rf $(VENV) *.egg-info build dist notebooks out site
