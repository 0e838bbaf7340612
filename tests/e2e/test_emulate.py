"""Unit tests of the emulated-accelerator compute (bench/e2e/emulate.py, profile.py): the
replayed model has the real model's parameters, replays the profiled times by sleeping (wall
time ~ profile, CPU time ~ 0), produces gradients as aliases of buffers allocated once, starts
an op only after its forward pre-hook (the PS worker's gate), and stays one leaf call per op
for torch.fx (the tic/tac planner). A few seconds."""

import os
import sys
import time

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)            # bench is a package at the repository root

from bench.e2e import emulate, profile  # noqa: E402

SPEC = "bench.e2e.tinynet:tiny"


@pytest.fixture(scope="module")
def prof():
    p = profile.profile_ops(SPEC, 4, 32, 10, 1, repeats=1)
    # fixed, sleep-sized times: the checks below do not depend on this machine's speed
    for c in p["calls"]:
        c["fwd_ms"], c["fwd_inf_ms"] = 8.0, 6.0
        c["bwd_ms"] = 12.0 if c["bwd_ms"] > 0 else 0.0
    return p


def test_profile_matches_the_real_model(prof):
    from bench.e2e.tinynet import tiny
    real = tiny()
    assert [n for n, *_ in prof["params"]] == [n for n, _ in real.named_parameters()]
    leaves = [n for n, m in real.named_modules() if next(m.children(), None) is None]
    assert [c["module"] for c in prof["calls"]] == leaves          # a Sequential: each leaf once, in order
    assert prof["calls"][-1]["out_features"] == 10
    assert sum(1 for c in prof["calls"] if c["bwd_ms"] > 0) == 4   # the four modules with parameters
    assert prof["param_bytes"] == sum(p.numel() * 4 for p in real.parameters())


def test_parameters_are_the_real_ones(prof):
    from bench.e2e.tinynet import tiny
    emu, real = emulate.EmuModel(prof), tiny()
    assert [(n, tuple(p.shape)) for n, p in emu.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in real.named_parameters()]


def test_replay_sleeps_the_profiled_time_without_cpu(prof):
    m = emulate.EmuModel(prof)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    n_calls, n_bwd = len(prof["calls"]), sum(1 for c in prof["calls"] if c["bwd_ms"] > 0)
    torch.nn.functional.cross_entropy(m(x), y).backward()            # warm-up
    c0 = time.process_time()
    idle = 5e-3                 # between phases, so that each starts on an idle device
    time.sleep(idle)
    w0 = time.perf_counter()
    with torch.no_grad():
        out = m(x)
    w1 = time.perf_counter()
    time.sleep(idle)
    w1i = time.perf_counter()
    m.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    w2 = time.perf_counter()
    time.sleep(idle)
    w2i = time.perf_counter()
    loss.backward()
    w3, c3 = time.perf_counter(), time.process_time()
    assert out.shape == (4, 10)
    assert 6e-3 * n_calls <= w1 - w0 < 6e-3 * n_calls + 0.05           # inference times
    assert 8e-3 * n_calls <= w2 - w1i < 8e-3 * n_calls + 0.05          # training forward times
    assert 12e-3 * n_bwd <= w3 - w2i < 12e-3 * n_bwd + 0.05
    assert c3 - c0 < 0.3 * (w3 - w0), "the replay must sleep, not compute"


def test_gradients_alias_buffers_allocated_once(prof):
    m = emulate.EmuModel(prof)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    ptrs = []
    for _ in range(2):
        m.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        ptrs.append({n: p.grad.data_ptr() for n, p in m.named_parameters()})
    assert ptrs[0] == ptrs[1]
    for mod in m.modules():
        if isinstance(mod, emulate.EmuOp):
            for pname, buf in zip(mod.pnames, mod.grad_bufs()):
                g = getattr(mod, pname).grad
                assert g.data_ptr() == buf.data_ptr() and g.shape == buf.shape


def _gate(events, name):
    """A pre-hook that waits 1 ms, as the PS worker's gate does for parameters still in flight."""
    def pre(mod, args):
        time.sleep(1e-3)
        events.append(("pre", name, time.perf_counter()))
    return pre


@pytest.mark.parametrize("clock", emulate.CLOCKS)
def test_an_op_starts_after_its_pre_hook(prof, clock):
    """The PS worker gates an op in its forward pre-hook: the op's whole time must come after it
    (with the device clock too: a pre-hook that blocked leaves the device nothing owed)."""
    m = emulate.EmuModel(prof, clock=clock)
    events = []
    for name, mod in m.named_modules():
        if isinstance(mod, emulate.EmuOp):
            mod.register_forward_pre_hook(_gate(events, name))
            mod.register_forward_hook(lambda mod, a, o, name=name: events.append(("post", name, time.perf_counter())))
    with torch.no_grad():
        m(torch.randn(4, 3, 32, 32))
    names = [c["module"] for c in prof["calls"]]
    assert [e[1] for e in events if e[0] == "pre"] == names
    for k in range(0, len(events), 2):
        (a, n1, t1), (b, n2, t2) = events[k], events[k + 1]
        assert (a, b, n1) == ("pre", "post", n2) and t2 - t1 >= 5.5e-3


class _FakeTime:
    """A clock whose sleeps overshoot by a fixed amount, as a loaded machine's do."""

    def __init__(self, overshoot):
        self.t, self.overshoot, self.slept = 100.0, overshoot, []

    def clock(self):
        return self.t

    def sleep(self, s):
        self.slept.append(s)
        self.t += s + self.overshoot


def _ops(dev, ft, n, seconds, gap=0.0, waited=False):
    t0 = ft.t
    for _ in range(n):
        ft.t += gap
        dev.run(seconds, waited=waited)
    return ft.t - t0


def test_device_clock_takes_overshoot_and_host_gaps_off_the_next_ops():
    ft = _FakeTime(overshoot=2e-3)
    dev = emulate.DeviceClock("device", clock=ft.clock, sleep=ft.sleep)
    # 10 ops of 5 ms, 0.2 ms of host work between them: back to back on the device, only the
    # last overshoot is left over (the sleep mode pays 10 overshoots and 9 gaps)
    took = _ops(dev, ft, 10, 5e-3, gap=2e-4)
    assert took == pytest.approx(10 * 5e-3 + 2e-4 + 2e-3)
    assert dev.absorbed == pytest.approx(9 * 2.2e-3)
    ft2 = _FakeTime(overshoot=2e-3)
    plain = emulate.DeviceClock("sleep", clock=ft2.clock, sleep=ft2.sleep)
    assert _ops(plain, ft2, 10, 5e-3, gap=2e-4) == pytest.approx(10 * 7.2e-3)


def test_device_clock_owes_nothing_after_a_wait_or_an_idle_gap():
    for kind in ("waited", "gap"):
        ft = _FakeTime(overshoot=2e-3)
        dev = emulate.DeviceClock("device", clock=ft.clock, sleep=ft.sleep)
        _ops(dev, ft, 3, 5e-3)
        assert dev.debt == pytest.approx(2e-3)
        ft.slept.clear()
        if kind == "waited":
            dev.run(5e-3, waited=True)          # the op's parameters were late: it starts now
        else:
            ft.t += 2e-3                        # longer than idle_gap: the device sat idle
            dev.run(5e-3)
        assert ft.slept == [pytest.approx(5e-3)]
        # counter-check: without the wait, the op sleeps less by what was owed
        dev.run(5e-3)
        assert ft.slept[-1] == pytest.approx(3e-3)


def test_device_clock_never_sleeps_negative_and_refuses_unknown_modes():
    ft = _FakeTime(overshoot=20e-3)
    dev = emulate.DeviceClock("device", clock=ft.clock, sleep=ft.sleep)
    _ops(dev, ft, 5, 1e-3)                      # a host far slower than the ops: owed more than each
    assert ft.slept == [pytest.approx(1e-3)]    # later ops run on the debt alone
    with pytest.raises(ValueError, match="TICTAC_EMU_CLOCK"):
        emulate.DeviceClock("gpu")


def test_fx_sees_one_leaf_call_per_op(prof):
    gm = torch.fx.symbolic_trace(emulate.EmuModel(prof))
    calls = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert calls == [c["module"] for c in prof["calls"]]


def test_build_needs_the_profile(monkeypatch):
    monkeypatch.delenv("TICTAC_EMU_PROFILE", raising=False)
    with pytest.raises(ValueError, match="TICTAC_EMU_PROFILE"):
        emulate.build()
