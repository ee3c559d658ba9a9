#!/usr/bin/env python3
"""bench/report.py — results JSON files -> docs/benchmarks.png and the tables for docs/benchmarks.md.

  bench/peers/.venv/bin/python bench/report.py bench/results/real.json bench/results/embedded.json
Prints the Markdown tables on stdout; writes the chart to docs/benchmarks.png.
"""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def fmt(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


def main(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            runs += json.load(f)["runs"]
    groups = {}
    for r in runs:
        groups.setdefault((r["cluster"], r["topic"]), []).append(r)
    for (cluster, topic), rs in groups.items():
        print(f"\n### {cluster} cluster, {rs[0]['partitions']}-partition topic\n")
        print("| contender | records/s median | best | records per round | shortest round (s) | allocs/record | peak RSS (MiB) | valid |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in rs:
            if not r.get("median"):
                err = (r.get("error") or "").replace("\n", " ")[:120]
                print(f"| {r['contender']} | invalid | | | | | | no: {err} |")
                continue
            short = " (short)" if r.get("short") else ""
            print(f"| {r['contender']} | {fmt(r['median'])} | {fmt(r['best'])} | {fmt(r['round_records'])} | "
                  f"{r['min_round_s']:.2f}{short} | {fmt(r.get('allocs_per_record'), '{:.2f}')} | "
                  f"{r['peak_rss_kb'] / 1024:.0f} | {'yes' if r['valid'] else 'some rounds invalid'} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart", file=sys.stderr)
        return
    keys = list(groups)
    fig, axes = plt.subplots(len(keys), 1, figsize=(10, 3.2 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        rs = [r for r in groups[key]]
        names = [r["contender"] for r in rs]
        med = [r.get("median") or 0 for r in rs]
        best = [r.get("best") or 0 for r in rs]
        y = range(len(rs))
        ax.barh(y, best, color="#cfd8e3", label="best of 3")
        ax.barh(y, med, color="#3b6ea5", label="median of 3")
        ax.set_yticks(list(y)); ax.set_yticklabels(names, fontsize=8); ax.invert_yaxis()
        ax.set_title(f"{key[0]} cluster, {groups[key][0]['partitions']}-partition topic: records/s (512 B JSON)", fontsize=9)
        for i, (m, r) in enumerate(zip(med, rs)):
            ax.text(m, i, f" {m:,.0f}" if m else " invalid", va="center", fontsize=7)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = os.path.join(ROOT, "docs", "benchmarks.png")
    fig.savefig(out, dpi=110)
    print(f"chart: {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
