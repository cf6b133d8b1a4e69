# `make test` and `make demo` set themselves up: each creates .venv when it is
# missing and installs the project into it once (the stamp file remembers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench notebooks site clean

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

demo: $(STAMP)
	$(PY) -m demos

bench: $(STAMP)
	$(PY) -m benchmarks

# Each demo as a Jupyter notebook (jupytext, from the test extra), in the ignored notebooks/ folder.
notebooks: $(STAMP)
	mkdir -p notebooks
	for name in $$($(PY) -c 'import demos; print(*demos.DEMOS)'); do \
		$(VENV)/bin/jupytext --quiet --to ipynb --output notebooks/$$name.ipynb demos/$$name.py || exit 1; \
	done

# The course site, in the ignored site/ folder (the demos executed in quick mode and cached in
# build/site/cache; `make site SITE_FLAGS=--full` for the full runs). Publish site/ as it is.
site: $(STAMP)
	$(PY) -m sitebuild $(SITE_FLAGS)

clean:
	rm -rf $(VENV) *.egg-info build dist notebooks site
