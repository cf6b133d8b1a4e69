"""What every demo shares: printing checks the way the seeds print them, and saving figures."""

import pathlib

import matplotlib

matplotlib.use("Agg")  # demos write PNG files; no screen needed
import matplotlib.pyplot as plt  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parent / "figures"


class Checks:
    """check("matches nn.MultiheadAttention", ok) prints `matches nn.MultiheadAttention: True`
    and remembers the result for the summary table."""

    def __init__(self):
        self.results = {}

    def __call__(self, label, passed):
        passed = bool(passed)
        print(f"{label}: {passed}")
        self.results[label] = passed
        return passed


def save(fig, name):
    """Save a figure as demos/figures/<name>.png and close it; return the path."""
    FIGURES.mkdir(exist_ok=True)
    path = FIGURES / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def result(checks, figure):
    return {"checks": checks.results, "figure": figure}
