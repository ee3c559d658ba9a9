#!/usr/bin/env python3
"""bench/report.py — results JSON files -> docs/benchmarks.png and the tables for docs/benchmarks.md.

  bench/peers/.venv/bin/python bench/report.py bench/results/real.json
Prints the Markdown tables on stdout (median records/s and spread, ratio to raw-batch, peak RSS,
allocations and instructions per record); writes the chart to docs/benchmarks.png.
  --no-chart: tables only.
"""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def fmt(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


def ratio(v):
    return "—" if v is None else f"{v:.2f}×"


def summary(groups):
    """The one table: a row per contender, a column per topic shape, each cell the median rate as
    a multiple of raw-batch's and the peak RSS as a multiple of raw-batch's (same topic, same run)."""
    keys = sorted(groups, key=lambda k: (k[0] != "real", groups[k][0]["partitions"]))
    names = []
    for k in keys:
        for r in groups[k]:
            if r["contender"] not in names:
                names.append(r["contender"])
    heads = [f"{groups[k][0]['partitions']} p{'' if k[0] == 'real' else ' (embedded)'}" for k in keys]
    print("\n### All shapes: records/s × raw-batch, peak RSS × raw-batch\n")
    print("| contender | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(keys))
    for n in names:
        cells = []
        for k in keys:
            r = next((x for x in groups[k] if x["contender"] == n), None)
            if r is None:
                cells.append("not run")
            elif not r.get("median"):
                cells.append("invalid")
            else:
                cells.append(f"{ratio(r.get('ratio_to_raw_batch'))}, RSS {ratio(r.get('rss_ratio_to_raw_batch'))}")
        print(f"| {n} | " + " | ".join(cells) + " |")


def main(paths):
    runs, callgrind = [], {}
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        runs += d["runs"]
        callgrind.update(d.get("callgrind", {}))
    groups = {}
    for r in runs:
        groups.setdefault((r["cluster"], r["topic"]), []).append(r)
    summary(groups)
    for (cluster, topic), rs in groups.items():
        # older results files have no ratios: derive them from raw-batch's row of the same topic
        base = next((r for r in rs if r["contender"] == "raw-batch" and r.get("median")), None)
        for r in rs:
            if base and r.get("median") and r.get("ratio_to_raw_batch") is None:
                r["ratio_to_raw_batch"] = r["median"] / base["median"]
                r["rss_ratio_to_raw_batch"] = r["peak_rss_kb"] / base["peak_rss_kb"]
        print(f"\n### {cluster} cluster, {rs[0]['partitions']}-partition topic\n")
        print("| contender | records/s median | spread (min–max) | × raw-batch | records per round | shortest round (s) "
              "| peak RSS (MiB) | RSS × raw-batch | allocs/record | instructions/record | over raw-batch | valid |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rs:
            if not r.get("median"):
                err = (r.get("error") or "").replace("\n", " ")[:120]
                print(f"| {r['contender']} | invalid | | | | | | | | | | no: {err} |")
                continue
            short = " (short)" if r.get("short") else ""
            # results from before the interleaved rounds have no worst/spread: derive what they have
            worst = r.get("worst", min((x["records_per_s"] for x in r.get("rounds", []) if x.get("valid")), default=None))
            spread = r.get("spread")
            spread_txt = (f"{100 * spread:.0f} % ({fmt(worst)}–{fmt(r['best'])})" if spread is not None
                          else f"({fmt(worst)}–{fmt(r['best'])})")
            print(f"| {r['contender']} | {fmt(r['median'])} | {spread_txt} | {ratio(r.get('ratio_to_raw_batch'))} | "
                  f"{fmt(r['round_records'])} | {r['min_round_s']:.2f}{short} | {r['peak_rss_kb'] / 1024:.0f} | "
                  f"{ratio(r.get('rss_ratio_to_raw_batch'))} | {fmt(r.get('allocs_per_record'), '{:.2f}')} | "
                  f"{fmt(r.get('ir_per_record'))} | {fmt(r.get('ir_over_raw_batch'), '{:+,.0f}')} | "
                  f"{'yes' if r['valid'] else 'some rounds invalid'} |")
    for cluster, cg in callgrind.items():
        h, base = cg.get("raw-batch-headers", {}), cg.get("raw-batch", {})
        if h.get("ir_per_record") is not None and base.get("ir_per_record") is not None:
            print(f"\n{cluster} cluster, callgrind: raw-batch-headers (the raw batch loop, also reading each record's "
                  f"headers) {fmt(h['ir_per_record'])} instructions/record, {h['ir_per_record'] - base['ir_per_record']:+,} "
                  f"over raw-batch: librdkafka's header parse")
    if "--no-chart" in sys.argv:
        return
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
        ax.barh(y, best, color="#cfd8e3", label="best round")
        ax.barh(y, med, color="#3b6ea5", label="median")
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
    main([a for a in sys.argv[1:] if a != "--no-chart"])
