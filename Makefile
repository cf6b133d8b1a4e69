# `make test` and `make demo` set themselves up: each creates .venv when it is
# missing and installs the project into it once (the stamp file remembers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench notebooks lab reference-figures site clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The docs extra is installed too: the tests build the course site.
# setup.cfg says which versions work (ranges); constraints.txt fixes the ones CI uses.
$(STAMP): setup.cfg pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -c constraints.txt -e '.[test,docs]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

# make demo                        every demo, as the chapters run them (figures in out/figures/)
# make demo QUICK=1                shortened training runs (figures in out/quick/, marked as quick)
# make demo NAMES="scaling kv_cache"  only those demos
demo: $(STAMP)
	$(PY) -m demos $(if $(filter-out 0,$(QUICK)),--quick) $(NAMES)

# The committed figures in demos/figures/ are the reference the README shows; replace them with
# the last full run's (out/figures/) only on purpose, and commit them.
reference-figures:
	@test -n "$$(ls out/figures/*.png 2>/dev/null)" || { echo "no figures in out/figures/: run make demo first"; exit 1; }
	cp out/figures/*.png demos/figures/

bench: $(STAMP)
	$(PY) -m benchmarks

# Each demo as a Jupyter notebook (jupytext, from the test extra), in the ignored notebooks/ folder.
notebooks: $(STAMP)
	mkdir -p notebooks
	for name in $$($(PY) -c 'import demos; print(*demos.DEMOS)'); do \
		$(VENV)/bin/jupytext --quiet --to ipynb --output notebooks/$$name.ipynb demos/$$name.py || exit 1; \
	done

# JupyterLab on those notebooks (the notebook extra: installed once, into .venv). Set QUICK=1 to
# open them in quick mode: the kernel inherits MINITENSOR_QUICK from here.
LAB_STAMP := $(VENV)/.installed-notebook
$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install -c constraints.txt -e '.[test,notebook]'
	touch $(LAB_STAMP)

lab: notebooks $(LAB_STAMP)
	MINITENSOR_QUICK=$(if $(filter-out 0,$(QUICK)),1,0) $(VENV)/bin/jupyter lab notebooks

# The course site, in the ignored site/ folder (the demos executed in quick mode and cached in
# build/site/cache; `make site SITE_FLAGS=--full` for the full runs). Publish site/ as it is.
site: $(STAMP)
	$(PY) -m sitebuild $(SITE_FLAGS)

clean:
	rm -rf $(VENV) *.egg-info build dist notebooks out site
