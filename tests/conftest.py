import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Gradient checks run many forward passes per example: no per-example deadline,
# and a modest number of examples so the suite stays a few minutes on 2 cores.
# MINITENSOR_EXAMPLES=500 explores more (derandomize off with HYPOTHESIS_RANDOM=1).
settings.register_profile(
    "minitensor",
    deadline=None,
    max_examples=int(os.environ.get("MINITENSOR_EXAMPLES", "40")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    derandomize=not os.environ.get("HYPOTHESIS_RANDOM"),  # the same examples on every run: CI must not pass or fail by chance
)
settings.load_profile("minitensor")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


if not os.environ.get("MINITENSOR_GRADER"):  # under `grade`, the grader's plugin provides `student`

    @pytest.fixture
    def student():
        """The graded tests' way to the code under test: here, this repository's, in this process."""
        from minitensor.homework.student import InProcessStudent

        return InProcessStudent()


CHROMIUM = "/usr/bin/chromium"
INSTALL = ("the browser tests need Debian's Chromium and Playwright: apt-get install -y chromium; "
           "pip install -e '.[test]'")


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright; the browser tests skip without it, except under
    CI=true, where they fail."""
    missing = [] if os.path.exists(CHROMIUM) else [CHROMIUM]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package")
    if missing:
        message = f"{' and '.join(missing)} not found: {INSTALL}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"under CI the browser tests must run: {message}")
        pytest.skip(message)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()
