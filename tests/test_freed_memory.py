"""minitensor keeps freed memory for the next array (backends/freed_memory.py): a training step
after the first asks the kernel for (almost) no new pages. Counted, not timed: page faults are
the same on a busy machine."""

import os
import platform
import subprocess
import sys

import pytest

PROBE = """
import resource
import numpy as np
import minitensor as mt
from minitensor import nn

mt.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256), nn.LayerNorm(256))
x = mt.tensor(np.random.default_rng(0).standard_normal((1024, 256)).astype(np.float32))

def step():
    for p in model.parameters():
        p.grad = None
    (model(x) ** 2).mean().backward()

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def faults_per_step(keep):
    env = dict(os.environ, MINITENSOR_KEEP_FREED_MEMORY=keep)
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split()[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="a glibc setting")
def test_a_step_after_the_first_reuses_freed_memory_instead_of_faulting_in_new_pages():
    kept, given_back = faults_per_step("1"), faults_per_step("0")
    # each step makes arrays of 1-4 MB: given back to the kernel, every one faults its pages in again
    assert given_back > 1000, f"the probe no longer allocates enough to show anything: {given_back} faults per step"
    assert kept < given_back / 20, f"{kept} page faults per step with freed memory kept, {given_back} without"
