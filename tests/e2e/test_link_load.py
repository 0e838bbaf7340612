"""The calibration's bytes over the busiest link per iteration (bench/e2e/calibrate.link_load):
the parameter-server rows' PS uplink pull against the data-parallel rows' ring all-reduce, whose
rate was once calibrated with the PS load (4 workers: a = 0.375 labelled 1)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)            # bench is a package at the repository root

from bench.e2e.calibrate import link_load  # noqa: E402


def test_ps_rows_use_the_pull_over_the_ps_uplink():
    assert link_load(100.0, 4, 1, False) == 400.0
    assert link_load(100.0, 4, 2, False) == 200.0
    assert link_load(100.0, 1, 4, False) == 100.0     # at least one copy of the parameters


def test_data_parallel_rows_use_a_ring_allreduce_share():
    assert link_load(100.0, 4, 1, True) == 150.0      # 2 (W - 1) / W
    assert link_load(100.0, 2, 1, True) == 100.0
    assert link_load(100.0, 1, 1, True) == 0.0        # one worker: nothing to all-reduce
    # Counter-check: the PS load would give DDP a link 4 / 1.5 times faster than "a" says.
    assert link_load(100.0, 4, 1, False) / link_load(100.0, 4, 1, True) == 400.0 / 150.0
