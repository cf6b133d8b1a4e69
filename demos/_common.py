"""What every demo shares: the quick switch, printing checks the way the seeds print them, and
saving figures.

A demo runs as a script (`python demos/scaling.py`) or cell by cell as a notebook; either way it
reads its settings from the environment, so the runner and the tests can set them:

    MINITENSOR_QUICK=1            shrink the training runs and sweeps (what the tests use);
                                  figures then go to demos/figures/quick/, beside the committed ones
    MINITENSOR_DEMO_RECORD=FILE   also append each check and figure to FILE, one JSON object a
                                  line, for `python -m demos` and the graders to collect
"""

import os
import pathlib

import matplotlib

if "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")  # a script writes PNG files and needs no screen; a notebook keeps its inline figures
import matplotlib.pyplot as plt  # noqa: E402

from demos._record import record as _record  # noqa: E402

QUICK = os.environ.get("MINITENSOR_QUICK", "") not in ("", "0")
FIGURES = pathlib.Path(__file__).resolve().parent / "figures"
if QUICK:
    FIGURES = FIGURES / "quick"


class Checks:
    """checks("matches nn.MultiheadAttention", ok) prints `matches nn.MultiheadAttention: True`
    and remembers the result (for the summary table and the graders)."""

    def __init__(self):
        self.results = {}

    def __call__(self, label, passed):
        passed = bool(passed)
        print(f"{label}: {passed}")
        self.results[label] = passed
        _record({"check": label, "passed": passed})
        return passed


def save(fig, name):
    """Save a figure as demos/figures/<name>.png (quick: demos/figures/quick/<name>.png); in a
    notebook also show it. Return the path."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _record({"figure": str(path)})
    if matplotlib.get_backend().lower() == "agg":
        plt.close(fig)
    else:
        plt.show()
    return path
