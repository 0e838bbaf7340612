"""Re-run the simulator on a finished benchmark folder with inputs measured in its jobs.

    PYTHONPATH=.:python .venv/bin/python -m bench.e2e.resim results/full [--build build] [--out DIR]

Reads DIR/results.json and DIR/jobs/<model>_<mode>_<policy>/ (the JSON lines and the full
trace), pools the measured simulator inputs per (model, mode) (siminputs.py) and prints, per
row, the measured makespan next to the nominal and the calibrated prediction and their errors.
Writes resim.json (rows with both predictions) into --out (default: DIR). Changes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import simulate
from .common import ROOT, model_spec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out")
    ap.add_argument("--sim-inputs", choices=("job", "pooled"), default="job")
    a = ap.parse_args(argv)
    src = os.path.abspath(a.dir)
    with open(os.path.join(src, "results.json"), encoding="utf-8") as f:
        res = json.load(f)
    args = res["args"]
    rows = res["rows"]
    for r in rows:
        tag = f"{r['model']}_{r['mode']}_{r['policy']}" + ("_r1" if args.get("rounds", 1) > 1 else "")
        r["jsonl"] = os.path.join(src, "jobs", tag, "iterations.jsonl")
        r["trace_full"] = os.path.join(src, "jobs", tag, "trace_full.json")
        r.setdefault("sim_nominal_makespan_ms", r.get("sim_makespan_ms"))
        if r.get("sim_graph") and not os.path.exists(r["sim_graph"]):
            r["sim_graph"] = os.path.join(src, "graphs", os.path.basename(r["sim_graph"]))
        if not r.get("sim_graph") and r.get("status") == "ok":     # a --no-sim run: export the graph now
            pp = os.pathsep.join([os.path.join(ROOT, "python"), ROOT, os.environ.get("PYTHONPATH", "")])
            r["sim_graph"] = simulate.graph_for(model_spec(r["model"]), r["batch"], r["image_size"],
                                                args["num_classes"], os.path.join(src, "graphs"), args["threads"], pp)
    ns = argparse.Namespace(workers=args["workers"], ps=args["ps"], iters=args["iters"], sim_inputs=a.sim_inputs)
    out = os.path.abspath(a.out or src)
    os.makedirs(out, exist_ok=True)
    tictac = os.path.join(a.build, "tictac")
    for r in rows:        # the nominal prediction, where the run made none (--no-sim)
        if r.get("status") == "ok" and r.get("sim_graph") and not r.get("sim_nominal_makespan_ms"):
            sim = simulate.simulate(tictac, r["sim_graph"], r["policy"], r["mode"], ns.workers, ns.ps,
                                    r["rate_mbit"] * 1e6 / 8, ns.iters)
            if sim:
                r["sim_nominal_makespan_ms"] = sim["sim_makespan_ms"]
    simulate.calibrate_rows(rows, ns, os.path.join(a.build, "tictac"), os.path.join(out, "graphs_calibrated"))
    print("measured: measured_makespan_ms (slowest worker, from its own start); cluster: from the first send "
          "to the end everywhere (siminputs.py); errors of the calibrated prediction against both")
    print(f"{'model':<13}{'mode':<10}{'policy':<7}{'measured':>9}{'cluster':>9}{'nominal':>9}{'err':>7}"
          f"{'calibr.':>9}{'err':>7}{'err cl.':>8}")
    for r in rows:
        if r.get("status") != "ok":
            continue
        m, n, c = r["measured_makespan_ms"], r.get("sim_nominal_makespan_ms"), r.get("sim_makespan_ms")
        cal = r.get("sim_inputs") in ("job", "pooled")

        cm = r.get("cluster_makespan_ms")

        def err(x, ref):
            return f"{(x - ref) / ref * 100:+.0f}%" if x and ref else "-"
        print(f"{r['model']:<13}{r['mode']:<10}{r['policy']:<7}{m:9.1f}{cm or 0:9.1f}{n or 0:9.1f}{err(n, m):>7}"
              f"{(c if cal else 0):9.1f}{err(c, m) if cal else '-':>7}{err(c, cm) if cal else '-':>8}")
    with open(os.path.join(out, "resim.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
