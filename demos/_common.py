"""What every demo shares: the quick switch, printing checks the way the seeds print them, and
saving figures.

A demo runs as a script (`python demos/scaling.py`) or cell by cell as a notebook; either way it
reads its settings from the environment, so the runner and the tests can set them:

    MINITENSOR_QUICK=1            shrink the training runs and sweeps (what the tests use);
                                  figures then go to out/quick/ and are marked "quick run"
    MINITENSOR_DEMO_RECORD=FILE   also append each check and figure to FILE, one JSON object a
                                  line, for `python -m demos` and the graders to collect
"""

import os
import pathlib
import time

import matplotlib

if "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")  # a script writes PNG files and needs no screen; a notebook keeps its inline figures
import matplotlib.pyplot as plt  # noqa: E402

from demos._record import record as _record  # noqa: E402

QUICK = os.environ.get("MINITENSOR_QUICK", "") not in ("", "0")
ROOT = pathlib.Path(__file__).resolve().parent.parent
# A run writes its figures into the ignored out/ folder, so running the demos never changes the
# repository; the committed figures in demos/figures/ are the reference a run is compared with
# (`make reference-figures` replaces them with the last full run's, on purpose).
REFERENCE_FIGURES = ROOT / "demos" / "figures"
FIGURES = ROOT / "out" / ("quick" if QUICK else "figures")


class Checks:
    """checks("matches nn.MultiheadAttention", ok) prints `matches nn.MultiheadAttention: True`
    and remembers the result (for the summary table and the graders). It returns None, so that a
    notebook cell ending in a check shows the printed line and no stray `True`."""

    def __init__(self):
        self.results = {}

    def __call__(self, label, passed):
        passed = bool(passed)
        print(f"{label}: {passed}")
        self.results[label] = passed
        _record({"check": label, "passed": passed})

    def skip(self, label, why):
        """A check this run cannot make (`why`: what is missing): printed and recorded as skipped,
        so that the summary says how many checks did not run, never counting them as passed."""
        print(f"{label}: ({why}; skipped)")
        _record({"check": label, "skipped": why})


def save(fig, name):
    """Save a figure as out/figures/<name>.png (quick: out/quick/<name>.png, marked as a quick
    run); in a notebook also show it. Returns None, as plt.show() does, so that a notebook cell
    ending in save() shows the figure and not its path."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.png"
    if QUICK:  # a quick figure must not pass for the chapter's: its training was cut short
        fig.text(0.5, 0.5, "QUICK RUN\nnot the chapter's numbers", ha="center", va="center", fontsize=28,
                 color="red", alpha=0.25, rotation=20, transform=fig.transFigure)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _record({"figure": str(path)})
    if matplotlib.get_backend().lower() == "agg":
        plt.close(fig)
    else:
        plt.show()


def compiling_kernels(warm_up):
    """Run warm_up() (a small call of everything a measurement or training run will use), saying
    that Numba compiles on the first run, so that no progress bar sits still without a word."""
    print("numba: compiling kernels (first run only; later runs load them from the disk cache) ...", flush=True)
    start = time.perf_counter()
    warm_up()
    print(f"numba: kernels ready in {time.perf_counter() - start:.1f} s", flush=True)
