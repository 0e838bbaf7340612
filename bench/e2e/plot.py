"""Plots of a finished run: throughput per policy, iteration-time distributions, and one
iteration's comm/compute timeline per policy. Every title names the compute mode."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Tuple

from .common import ALL_POLICIES

COLORS = dict(zip(ALL_POLICIES, ["#999999", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#8c564b", "#e377c2",
                                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd"]))


def make_plots(rows: List[Dict[str, Any]], details: Dict[Tuple[str, str, str], Dict[str, Any]],
               out: str) -> List[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return paths
    modes = sorted({r["mode"] for r in ok})
    models = list(dict.fromkeys(r["model"] for r in ok))
    policies = list(dict.fromkeys(r["policy"] for r in ok))
    colors = COLORS
    cm = "/".join(sorted({r.get("compute", "real") for r in ok}))

    # 1. throughput per policy per model
    fig, axes = plt.subplots(1, len(modes), figsize=(max(5, 2.2 * len(models) * len(modes)), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        w = 0.8 / max(1, len(policies))
        for j, p in enumerate(policies):
            xs, ys = [], []
            for i, m in enumerate(models):
                r = next((r for r in ok if r["model"] == m and r["mode"] == mode and r["policy"] == p), None)
                if r:
                    xs.append(i + (j - (len(policies) - 1) / 2) * w)
                    ys.append(r["throughput"])
            ax.bar(xs, ys, w, label=p, color=colors.get(p))
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([f"{m}\na={next((r['a'] for r in ok if r['model'] == m and r['mode'] == mode), math.nan):.2g}"
                            for m in models])
        ax.set_ylabel("samples/s (all workers)")
        ax.set_title(f"throughput, {mode} (compute: {cm})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    p = os.path.join(out, "throughput.png")
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(p)

    for m in models:
        for mode in modes:
            sel = [r for r in ok if r["model"] == m and r["mode"] == mode]
            if not sel:
                continue
            # 2. iteration-time distribution per policy
            fig, ax = plt.subplots(figsize=(1.3 * len(sel) + 2, 4))
            data = [details[(m, mode, r["policy"])]["iter_ms"] for r in sel]
            ax.boxplot(data, whis=(0, 100))
            for i, d in enumerate(data):
                ax.plot([i + 1] * len(d), d, ".", color=colors.get(sel[i]["policy"]), alpha=0.7)
            ax.set_xticks(range(1, len(sel) + 1))
            ax.set_xticklabels([r["policy"] for r in sel])
            ax.set_ylabel("iteration time, slowest worker (ms)")
            ax.set_title(f"{m} {mode}: iteration times (a={sel[0]['a']:.2g}, compute: {cm})")
            fig.tight_layout()
            p = os.path.join(out, f"iter_time_{m}_{mode}.png")
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
            # 3. one iteration's comm/compute timeline per policy
            fig, axes = plt.subplots(len(sel), 1, figsize=(10, 1.0 + 1.2 * len(sel) * max(1, len(details[(m, mode, sel[0]["policy"])]["rep"])) / 2),
                                     squeeze=False, sharex=True)
            for ax, r in zip(axes[:, 0], sel):
                d = details[(m, mode, r["policy"])]
                ticks, labels = [], []
                for k, w in enumerate(d["rep"]):
                    y = 2 * k
                    pulls = [(s, e - s) for n, s, e in w["comm"] if not n.endswith("(push)")]
                    pushes = [(s, e - s) for n, s, e in w["comm"] if n.endswith("(push)")]
                    comp = [(s, e - s) for n, s, e in w["compute"]]
                    ax.broken_barh(pulls, (y + 1.05, 0.8), color="#1f77b4", edgecolor="white", linewidth=0.3)
                    if pushes:
                        ax.broken_barh(pushes, (y + 1.05, 0.8), color="#9467bd", edgecolor="white", linewidth=0.3)
                    ax.broken_barh(comp, (y + 0.15, 0.8), color="#ff7f0e", edgecolor="white", linewidth=0.3)
                    ticks += [y + 0.55, y + 1.45]
                    labels += [f"w{w['worker']} compute", f"w{w['worker']} comm"]
                ax.set_yticks(ticks)
                ax.set_yticklabels(labels, fontsize=7)
                ax.set_title(f"{r['policy']}: iteration {d['rep_iter']} ({r['iter_ms_median']:.0f} ms median)", fontsize=9)
            axes[-1, 0].set_xlabel("ms from the iteration's start (blue: pulls, purple: pushes, orange: compute)")
            fig.suptitle(f"{m} {mode}: one iteration per policy (compute: {cm})", fontsize=10)
            fig.tight_layout()
            p = os.path.join(out, f"timeline_{m}_{mode}.png")
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
    return paths
