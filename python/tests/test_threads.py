"""The library's threads on a shared machine: once a call returns they leave
the cores to others (libgomp spins a few milliseconds at most, then sleeps),
and a wait policy the user sets still decides (OMP_WAIT_POLICY=active spins
on). Each case runs in a fresh interpreter: libgomp reads the policy once,
when it loads."""
import os
import subprocess
import sys

import pytest

from conftest import PYDIR

# Attention on a causal pattern large enough for the library's parallel
# regions, then the process's CPU time over one second of sleep.
IDLE_CPU = """
import resource, sys, time
sys.path.insert(0, %r)
import numpy as np
import attngraph as ag
g = ag.Graph.pattern("causal", 2048)
x = np.random.default_rng(0).standard_normal((2048, 64)).astype(np.float32)
for _ in range(3):
    ag.attention(g, x, x, x, heads=2)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
before = cpu()
time.sleep(1.0)
print(ag.set_threads(0), cpu() - before)
""" % PYDIR


def idle_cpu(**env):
    full = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS"):
        full.pop(k, None)
    full.update(env)
    r = subprocess.run([sys.executable, "-c", IDLE_CPU], capture_output=True, text=True,
                       env=full, timeout=120)
    assert r.returncode == 0, r.stderr
    threads, seconds = r.stdout.split()
    if int(threads) < 2:
        pytest.skip("the library runs one thread (built without OpenMP, or one core)")
    return float(seconds)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no team to wait")
def test_threads_leave_the_cores_after_a_call():
    # libgomp's own spin is 300,000 pauses, 5-15 ms a thread; a thread that
    # spun on would take the whole second
    assert idle_cpu() < 0.15


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no team to wait")
def test_an_active_wait_policy_still_wins():
    # a thread that spins on takes a core for the whole second (about 0.25 of it
    # even on a machine busy with other work)
    assert idle_cpu(OMP_WAIT_POLICY="active", OMP_NUM_THREADS="2") > 0.25
