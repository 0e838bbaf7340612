#!/usr/bin/env python
"""Runs a subset of PyTorch's own generic distributed test suite
(``torch.testing._internal.distributed.distributed_test.DistributedTest._DistTestBase``)
against the "tictac" c10d backend, the way PyTorch's ``test/distributed/test_distributed_spawn.py``
runs it for gloo: a ``TestDistBackendWithSpawn(TestDistBackend, _DistTestBase)`` class whose
setUp spawns WORLD_SIZE processes per test, each doing ``init_process_group(BACKEND, file://...)``.

Usage (from the repository root)::

    .venv/bin/python tests/torch/generic_suite/run_generic_suite.py            # WORLD_SIZE=2
    .venv/bin/python tests/torch/generic_suite/run_generic_suite.py --world-size 3
    .venv/bin/python tests/torch/generic_suite/run_generic_suite.py -k all_reduce -v
    .venv/bin/python tests/torch/generic_suite/run_generic_suite.py --slow   # + profiler tests
    .venv/bin/python tests/torch/generic_suite/run_generic_suite.py --list

It prints a summary (passed / failed / skipped, each failure with a one-line reason) and exits
non-zero only when a test in ``EXPECTED_PASS`` (for the world size in use) does not pass.
Known failures and their reasons are in README.md beside this file.

How a custom backend gets through the suite's gates: ``distributed_test`` reads ``BACKEND`` at
import and evaluates its skip decorators then, so this module (which ``multiprocessing``'s spawn
re-imports in every child as ``__mp_main__``) imports ``tictac.torch`` (registers the backend)
and adds "tictac" to ``DistTestCases.backend_feature["plugin"]`` *before* importing
``distributed_test``. Needs the ``expecttest`` package (torch's test utilities import it).
"""
from __future__ import annotations

import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[3]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

# --- environment the suite reads at import (children inherit the parent's values) ------------
if __name__ == "__main__":  # the parent: take --world-size before anything reads WORLD_SIZE
    for i, a in enumerate(sys.argv):
        if a == "--world-size" and i + 1 < len(sys.argv):
            os.environ["WORLD_SIZE"] = sys.argv[i + 1]
        elif a.startswith("--world-size="):
            os.environ["WORLD_SIZE"] = a.split("=", 1)[1]
        elif a == "--backend" and i + 1 < len(sys.argv):
            os.environ["BACKEND"] = sys.argv[i + 1]
os.environ.setdefault("BACKEND", "tictac")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="tictac_generic_suite_"))
# A hung test is killed after this many seconds (the suite's default is 300; 60 was too short
# for the DDP tests on the loaded 2-core machine, where starting a rank alone took 20 s).
os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "180")
# Keep the CPU count sane on small machines: every rank is a separate process.
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import expecttest  # noqa: F401  (imported by torch.testing._internal.common_utils)
except ImportError:  # pragma: no cover - environment problem, not a test result
    sys.stderr.write(
        "run_generic_suite: torch's test utilities need the 'expecttest' package: "
        "`.venv/bin/pip install expecttest`\n"
    )
    sys.exit(2)

import torch  # noqa: E402

torch.set_num_threads(1)

import tictac.torch  # noqa: E402,F401  registers the "tictac" backend (also in every child)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Without this, require_backend_is_available() cannot check a backend it doesn't know.
DistTestCases.backend_feature["plugin"].add(os.environ["BACKEND"])
# tictac runs DDP (CPU): the suite's DDP tests are gated on this feature list.
DistTestCases.backend_feature["ddp"].add("tictac")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


# --- selection --------------------------------------------------------------------------------
# The tests of _DistTestBase that exercise only what tictac implements for CPU tensors
# (send/recv/isend/irecv/any-source, barrier, broadcast, allreduce, allgather) plus the
# process-group bookkeeping tests. "group" tests use ranks [1, 2] and so need WORLD_SIZE >= 8
# (at WORLD_SIZE=2 they are reported as failures of the test's own assumptions, see README.md).
SELECTED = [
    # process-group bookkeeping
    "test_Backend_enum_class",
    "test_get_rank",
    "test_get_backend",
    "test_get_rank_size_group",
    "test_get_rank_size_full_group",
    "test_destroy_group",
    "test_destroy_full_group",
    "test_dump_DDP_relevant_env_vars",
    # point to point
    "test_send_recv",
    "test_send_recv_autograd_profiler",
    "test_send_recv_torch_profiler",
    "test_send_recv_with_tag",
    "test_send_recv_with_tag_autograd_profiler",
    "test_send_recv_with_tag_torch_profiler",
    "test_send_recv_any_source",
    "test_send_recv_any_source_autograd_profiler",
    "test_send_recv_any_source_torch_profiler",
    "test_isend",
    "test_isend_autograd_profiler",
    "test_isend_torch_profiler",
    "test_irecv",
    # barrier
    "test_barrier",
    "test_barrier_full_group",
    "test_barrier_group",
    # broadcast
    "test_broadcast",
    "test_broadcast_full_group",
    "test_broadcast_group",
    # allreduce
    "test_all_reduce_sum",
    "test_all_reduce_sum_async",
    "test_all_reduce_sum_complex",
    "test_all_reduce_max",
    "test_all_reduce_min",
    "test_all_reduce_product",
    "test_all_reduce_complex_unsupported_ops",
    "test_all_reduce_coalesced_max_complex_unsupported",
    "test_all_reduce_full_group_sum",
    "test_all_reduce_full_group_max",
    "test_all_reduce_full_group_min",
    "test_all_reduce_full_group_product",
    "test_all_reduce_group_sum",
    "test_all_reduce_group_max",
    "test_all_reduce_group_min",
    "test_all_reduce_group_product",
    # allgather
    "test_all_gather",
    "test_all_gather_complex",
    "test_all_gather_full_group",
    "test_all_gather_group",
    "test_all_gather_coalesced_simple",
    "test_all_gather_coalesced_complex",
    "test_all_gather_coalesced_full_group",
    "test_all_gather_coalesced_group",
    "test_all_gather_coalesced_with_empty",
    # reduce
    "test_reduce_sum",
    "test_reduce_max",
    "test_reduce_min",
    "test_reduce_product",
    "test_reduce_sum_twice",
    "test_reduce_full_group_sum",
    "test_reduce_full_group_max",
    "test_reduce_full_group_min",
    "test_reduce_full_group_product",
    # coalesced allreduce (gated on gloo by the suite itself)
    "test_all_reduce_coalesced_sum",
    "test_all_reduce_coalesced_max",
    "test_all_reduce_coalesced_min",
    "test_all_reduce_coalesced_product",
    # gather / scatter
    "test_gather",
    "test_gather_checks",
    "test_gather_full_group",
    "test_scatter",
    "test_scatter_checks",
    "test_scatter_complex",
    "test_scatter_full_group",
    # (the suite's all_to_all tests run on CPU for MPI only: skipped for every other backend)
    # DDP on CPU (tictac in backend_feature["ddp"])
    "test_DistributedDataParallelCPU",
    "test_DistributedDataParallelCPU_grad_is_view",
    "test_accumulate_gradients_no_sync_allreduce_hook",
    "test_ddp_broadcast_buffer",
    "test_ddp_buffer_hook_allreduce",
    "test_ddp_comm_hook_logging",
    "test_ddp_control_flow_same_across_ranks",
    "test_ddp_create_graph",
    "test_ddp_grad_div_uneven_inputs",
    "test_ddp_hook_parity_allreduce",
    "test_ddp_hook_parity_allreduce_process_group",
    "test_ddp_ignore_params_arg",
    "test_ddp_inference",
    "test_ddp_join_model_equivalence",
    "test_ddp_logging_data_cpu",
    "test_ddp_namedtuple",
    "test_ddp_new_tensor_in_fwd",
    "test_ddp_shared_grad_acc_unused_params",
    "test_ddp_static_graph_nested_types",
    "test_ddp_sync_module_states",
    "test_ddp_uneven_inputs",
    "test_ddp_zero_output_features",
    "test_DistributedDataParallel_requires_grad",
    "test_static_graph_api_cpu",
]

# Tests of _DistTestBase tried on tictac and left out, with the gate that skips them. They are
# gated on a backend NAME (gloo, nccl, mpi) or need GPUs, so a plugin backend cannot run them
# without pretending to be another backend. (Run them with --tests NAME to see the skip.)
EXCLUDED: dict[str, str] = {
    "test_barrier_timeout_global": "BACKEND != 'gloo': 'Only gloo backend supports timeouts'",
    "test_barrier_timeout_group": "BACKEND != 'gloo': 'Only gloo backend supports timeouts'",
    "test_barrier_timeout_full_group": "BACKEND != 'gloo': 'Only gloo backend supports timeouts'",
    "test_barrier_timeout_arg": "skipped upstream (pytorch/pytorch#179691)",
    "test_all_gather_object_default_pg": "require_backend_is_available({xccl, gloo, ucc, nccl})",
    "test_sparse_all_reduce_sum": "'Only Gloo backend supports sparse all reduce' (tictac: dense only)",
    "test_all_to_all": "'Only MPI supports all_to_all' on CPU (checked vs gloo in test_collectives.py)",
    "test_all_to_all_single_equal_split": "'Only MPI supports CPU all_to_all_single'",
    "test_all_to_all_single_unequal_split": "'Only MPI supports CPU all_to_all_single'",
    "test_all_to_all_full_group": "'Only MPI supports all_to_all'",
    "test_all_reduce_coalesced_full_group_sum": "require_backend_is_available({'gloo'})",
    "test_new_subgroups": "skipped upstream (pytorch/pytorch#164195); needs 2 GPUs",
    "test_average_parameters": "subgroups on CUDA devices (skip_if_lt_x_gpu(2))",
    "test_ddp_hook_parity_powerSGD": "DDP communication hooks on CUDA devices (GPU)",
    "test_ddp_hook_parity_post_localSGD": "DDP communication hooks on CUDA devices (GPU)",
    "test_batch_isend_irecv_op_err": "'NCCL Batch Send Recv Only'",
    "test_batch_isend_irecv_op_list_err": "'NCCL Batch Send Recv Only'",
    "test_batch_isend_irecv_gloo": "BACKEND != 'gloo': 'GLOO Batch Send Recv CPU'",
    "test_scatter_object_list": "require_backend_is_available({'gloo'})",
    "test_monitored_barrier_gloo": "require_backend_is_available({'gloo'})",
}

# These use the subgroup [1, 2] and are decorated @skip_if_small_worldsize, which exits every
# rank with "Skipped due to small world size." unless WORLD_SIZE >= 8 (for any backend but mpi),
# after spawning the ranks (~5 s a test on 2 cores): below WORLD_SIZE=8 they are not run at all.
NEEDS_WORLD_SIZE_8 = {
    "test_barrier_group",
    "test_broadcast_group",
    "test_all_gather_group",
    "test_all_gather_coalesced_group",
    "test_all_reduce_group_sum",
    "test_all_reduce_group_max",
    "test_all_reduce_group_min",
    "test_all_reduce_group_product",
}

# The slowest tests (torch.profiler start-up in every rank, ~2x a plain test), dropped from the
# default run to keep it under 5 minutes on 2 shared cores; --slow adds them. All pass.
SLOW = {
    "test_send_recv_torch_profiler",
    "test_send_recv_with_tag_torch_profiler",
    "test_send_recv_any_source_torch_profiler",
    "test_isend_torch_profiler",
}

# Known failures of tictac (see README.md), with their reason. They are printed in the gloo
# comparison but do not fail the run.
KNOWN_FAILURES: dict[str, str] = {
    # Empty. test_ddp_logging_data_cpu was here ('custom' != 'tictac': torch names the group it
    # wraps around a plugin Backend "custom"); the creator now returns its own ProcessGroup named
    # "tictac" (integration/torch/module.cc), and the test is in CONFIRMED_ISSUE_15.
}

# Tests that must pass; any of these failing makes the run exit 1. The original 40 (from runs
# at WORLD_SIZE=2 and 3) plus those of issue 15 confirmed at WORLD_SIZE=2 (2026-12-03); the
# other added tests are judged by the comparison with gloo (--compare-gloo) until a full run
# has confirmed them.
CONFIRMED_ISSUE_15 = [
    "test_reduce_sum", "test_reduce_max", "test_reduce_full_group_min", "test_reduce_sum_twice",
    "test_gather", "test_gather_checks", "test_scatter", "test_scatter_checks",
    "test_scatter_complex", "test_all_gather_coalesced_simple",
    "test_all_gather_coalesced_complex", "test_all_gather_coalesced_with_empty",
    "test_DistributedDataParallelCPU", "test_DistributedDataParallelCPU_grad_is_view",
    "test_DistributedDataParallel_requires_grad", "test_static_graph_api_cpu",
    "test_ddp_logging_data_cpu",
    # Confirmed at WORLD_SIZE=2 in the full default run of 2026-12-04 (62 passed, 0 failed).
    "test_all_gather_coalesced_full_group", "test_reduce_min", "test_reduce_product",
    "test_reduce_full_group_sum", "test_reduce_full_group_max", "test_reduce_full_group_product",
    "test_gather_full_group", "test_scatter_full_group", "test_ddp_create_graph",
]
EXPECTED_PASS = [
    n for n in SELECTED[: SELECTED.index("test_all_gather_coalesced_with_empty") + 1]
    if n not in KNOWN_FAILURES and n not in NEEDS_WORLD_SIZE_8
    and not n.startswith("test_all_gather_coalesced")
] + CONFIRMED_ISSUE_15


# --- running and reporting ---------------------------------------------------------------------
def _one_line_reason(text: str) -> str:
    """The innermost exception line of a (possibly multi-process) failure message."""
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    picked = None
    for l in lines:
        head = l.split(":", 1)[0]
        if (
            head.endswith(("Error", "Exception", "Timeout", "SkipTest", "Interrupt"))
            or head.endswith("Exit")
        ) and "exited with error code" not in l:
            picked = l
    if picked is None:
        for l in lines:
            if "timed out" in l or "terminated" in l:
                picked = l
    if picked is None:
        picked = lines[-1] if lines else "(no message)"
    return picked if len(picked) <= 240 else picked[:237] + "..."


def main(argv: list[str]) -> int:
    import argparse
    import time
    import unittest

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=int, default=int(os.environ["WORLD_SIZE"]))
    ap.add_argument("-k", action="append", default=[], help="only tests containing this substring")
    ap.add_argument("--slow", action="store_true", help="also run the SLOW tests")
    ap.add_argument("--list", action="store_true", help="print the selected tests and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="unittest verbosity 2")
    ap.add_argument(
        "--tests", nargs="*", default=None, help="explicit test names (default: SELECTED)"
    )
    ap.add_argument("--backend", default=os.environ["BACKEND"], help="tictac (default) or gloo")
    ap.add_argument("--json", default=None, help="also write {test: [outcome, reason]} here")
    ap.add_argument(
        "--compare-gloo", action="store_true",
        help="run the same tests on gloo too (a child process) and judge failures against it",
    )
    args = ap.parse_args(argv)
    ws = args.world_size

    names = list(args.tests) if args.tests else list(SELECTED)
    if args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    not_run = []
    if not args.tests and not args.slow:
        not_run += [n for n in names if n in SLOW]
        names = [n for n in names if n not in SLOW]
    if ws < 8:
        not_run += [n for n in names if n in NEEDS_WORLD_SIZE_8]
        names = [n for n in names if n not in NEEDS_WORLD_SIZE_8]
    if args.list:
        print("\n".join(names))
        print("\nexcluded (gated on a backend name or GPUs):")
        print("\n".join(f"  {n}: {why}" for n, why in EXCLUDED.items()))
        return 0

    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    t0 = time.monotonic()
    result = unittest.TextTestRunner(
        stream=sys.stderr, verbosity=2 if args.verbose else 1
    ).run(suite)
    wall = time.monotonic() - t0

    def short(test) -> str:
        return test.id().split(".")[-1]

    failed = {short(t): _one_line_reason(tb) for t, tb in result.failures + result.errors}
    failed.update({short(t): "unexpected success" for t in result.unexpectedSuccesses})
    skipped = {short(t): _one_line_reason(why) for t, why in result.skipped}
    passed = [n for n in names if n not in failed and n not in skipped]

    for n in failed:
        if n in KNOWN_FAILURES:
            failed[n] = f"{failed[n]}  [known]"

    print()
    print(f"=== tictac generic c10d suite: BACKEND={os.environ['BACKEND']} WORLD_SIZE={ws} ===")
    print(f"selected {len(names)}, wall {wall:.1f}s")
    if not_run:
        print(f"not run (SLOW without --slow, or needing WORLD_SIZE >= 8): {', '.join(not_run)}")
    if failed:
        print("failed:")
        for n, why in failed.items():
            print(f"  {n}: {why}")
    if skipped:
        print("skipped:")
        for n, why in skipped.items():
            print(f"  {n}: {why}")
    expected = [n for n in EXPECTED_PASS if n in names]
    regressions = [n for n in expected if n not in passed]
    newly = [n for n in passed if n not in EXPECTED_PASS]
    if newly:
        print("passing but not in EXPECTED_PASS (add them):")
        for n in newly:
            print(f"  {n}")
    if regressions:
        print("REGRESSIONS (in EXPECTED_PASS, did not pass):")
        for n in regressions:
            print(f"  {n}: {failed.get(n) or skipped.get(n)}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    outcome = {n: ["passed", ""] for n in passed}
    outcome.update({n: ["failed", why] for n, why in failed.items()})
    outcome.update({n: ["skipped", why] for n, why in skipped.items()})
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(outcome, f)
    ours = []
    if args.compare_gloo and os.environ["BACKEND"] != "gloo":
        ours = compare_with_gloo(names, outcome, ws)
    return 1 if regressions or ours else 0


def compare_with_gloo(names: list[str], outcome: dict, ws: int) -> list[str]:
    """Runs `names` on gloo in a child process and prints, for every test that did not pass on
    tictac, what gloo did. A failure is ours only when gloo passes the same test; the names of
    those are returned."""
    import json
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "gloo.json")
        env = dict(os.environ, BACKEND="gloo", TEMP_DIR=tempfile.mkdtemp(prefix="gloo_suite_"))
        cmd = [sys.executable, __file__, "--backend", "gloo", "--world-size", str(ws),
               "--json", out, "--tests", *names]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, check=False)
        if not os.path.exists(out):
            print(f"gloo comparison run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
            return ["<gloo comparison run>"]
        with open(out) as f:
            gloo = json.load(f)
    print()
    print(f"=== comparison with gloo (same tests, WORLD_SIZE={ws}) ===")
    counts = {}
    ours = []
    for n in names:
        mine, why = outcome.get(n, ["missing", ""])
        theirs = gloo.get(n, ["missing", ""])[0]
        counts[(mine, theirs)] = counts.get((mine, theirs), 0) + 1
        if mine == "passed":
            continue
        if mine == "failed" and theirs == "passed" and n in KNOWN_FAILURES:
            verdict = f"ours but known (gloo passes): {KNOWN_FAILURES[n]}"
        elif mine == "failed" and theirs == "passed":
            verdict = "OURS (gloo passes)"
            ours.append(n)
        elif mine == "failed":
            verdict = f"not ours (gloo {theirs})"
        else:
            verdict = f"skipped on tictac, gloo {theirs}"
        print(f"  {n}: tictac {mine}, gloo {theirs} -> {verdict}; {why}")
    for (mine, theirs), k in sorted(counts.items()):
        print(f"  tictac {mine:7s} / gloo {theirs:7s}: {k}")
    print(f"failures that gloo passes (ours): {len(ours)}")
    return ours


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
