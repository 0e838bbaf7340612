"""GPU check of the "tictac" backend with CUDA tensors, for a machine with a GPU (run by
bench/gpu_check.sh; one short run): 2 ranks on cuda:0 (or cuda:rank), send/recv of CUDA tensors
written by a kernel just before send() and read by a kernel just after recv() (the stream order
of the transport's cuda_path), and a 2-rank allreduce of a CUDA tensor against the expected sum.
Exit: 0 pass, 1 a check failed, 77 no usable GPU (printed "SKIP: <reason>")."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def _ranks(rank, world):
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    bad = []
    n = 1 << 22  # 16 MiB of float32: several staging pieces
    for round_ in range(3):
        if rank == 0:
            x = torch.arange(n, device=dev, dtype=torch.float32) * (round_ + 1)  # kernel, then send
            dist.send(x, 1, tag=round_)
        else:
            y = torch.empty(n, device=dev, dtype=torch.float32)
            work = dist.irecv(y, 0, tag=round_)
            z = y * 2  # enqueued right after irecv(): must see the data (stream order)
            work.wait()
            want = torch.arange(n, device=dev, dtype=torch.float32) * (round_ + 1)
            if not torch.equal(y, want):
                bad.append(f"recv round {round_}")
            if not torch.equal(z, want * 2):
                bad.append(f"kernel after irecv round {round_} ran before the data arrived")
    t = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    if not torch.equal(t, torch.full_like(t, float(world * (world + 1) // 2))):
        bad.append("allreduce")
    torch.cuda.synchronize()
    return bad


def main() -> int:
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch is not importable here ({e}); run make deps")
        return 77
    if not torch.cuda.is_available():
        try:
            torch.zeros(1, device="cuda")
            why = "torch.cuda.is_available() is False"
        except Exception as e:  # noqa: BLE001 - the reason is what we print
            why = str(e).strip().splitlines()[0]
        print(f"SKIP: torch sees no usable CUDA device: {why}")
        return 77
    import tictac.torch

    if not tictac.torch.available():
        print(f"FAIL: the tictac extension is not built: {tictac.torch._C_ERROR}")
        return 1
    from dist_harness import run_ranks

    try:
        res = run_ranks(_ranks, world=2, timeout=240)
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    failures = [f"rank {r}: {b}" for r, bad in enumerate(res) for b in bad]
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print("PASS: CUDA send/recv (stream-ordered) and allreduce over tictac, 2 ranks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
