"""How `make test` shares the machine's two cores (tests/conftest.py): the longest files first, in
the order the Makefile keeps, and what is expensive to make (a stripped copy) made once for every
process of the run."""

import pathlib
import re
import threading
import time

from conftest import LONGEST_FIRST, shared_once

TESTS = pathlib.Path(__file__).resolve().parent


def test_every_file_in_longest_first_exists_once():
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    missing = [name for name in LONGEST_FIRST if not (TESTS / name).is_file()]
    assert not missing, f"renamed or gone (a file not listed runs last): {missing}"


def test_make_test_runs_the_files_in_that_order():
    makefile = (TESTS.parent / "Makefile").read_text()
    command = re.search(r"^test:.*\n(\t.*\n)+", makefile, re.M).group(0)
    assert "--dist loadfile --no-loadscope-reorder" in command  # without it, xdist sorts files by their test count


class _Factory:
    """tmp_path_factory as a pytest-xdist worker sees it: a folder of its own under the run's."""

    def __init__(self, run, worker):
        self.base = run / f"popen-{worker}"
        self.base.mkdir(parents=True, exist_ok=True)

    def getbasetemp(self):
        return self.base


def test_what_is_shared_once_is_made_once_for_every_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    made, results = [], {}

    def make(folder):
        made.append(folder)
        time.sleep(0.5)  # the other worker asks meanwhile, and waits
        (folder / "copy").mkdir()
        return folder / "copy"

    workers = [threading.Thread(target=lambda w=w: results.__setitem__(w, shared_once(_Factory(tmp_path, w), "x", make)))
               for w in ("gw0", "gw1")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(made) == 1 and results["gw0"] == results["gw1"] == tmp_path / "shared-x" / "copy"
    assert shared_once(_Factory(tmp_path, "gw0"), "x", make) == results["gw0"] and len(made) == 1


def test_without_xdist_it_is_made_in_the_runs_own_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    factory = _Factory(tmp_path, "run")
    assert shared_once(factory, "y", lambda folder: folder) == factory.getbasetemp() / "shared-y"
