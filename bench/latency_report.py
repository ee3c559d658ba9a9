#!/usr/bin/env python3
"""bench/latency_report.py — the tables of docs/benchmarks.md "Latency" and docs/latency.png.

  bench/peers/.venv/bin/python bench/latency_report.py bench/results/latency.json [bench/results/reply.json]

Prints Markdown: per topic shape, the median over rounds of p50 / p99 / p99.9 (ms) for each
contender and load, the defaults cell, the targets of the latency issue checked against raw
librdkafka of the same run, and (with reply.json from bench/run.py) the reply path's throughput
against the raw consume->produce loop. Draws the sweep (latency against offered load) when
matplotlib is there."""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def ms(us):
    return "—" if us is None else f"{us / 1000:.2f}"


def cell(cells, contender, parts, rate, settings="tuned"):
    return next((c for c in cells if c["contender"] == contender and c["partitions"] == parts and c["rate"] == rate
                 and c["settings"] == settings), None)


def fig(c, key):
    if c is None:
        return "not run"
    if not c.get("valid_rounds"):
        return "saturated"
    return ms(c.get(key))


def shape_table(cells, saturated, shape, parts):
    rates = sorted({c["rate"] for c in cells if c["partitions"] == parts and c["settings"] == "tuned"})
    names = list(dict.fromkeys(c["contender"] for c in cells if c["shape"] == shape))
    head = "| contender | " + " | ".join(f"{r // 1000}k/s p50 | p99 | p99.9" for r in rates) + " |"
    print(head)
    print("|" + "---|" * (1 + 3 * len(rates)))
    for n in names:
        row = [n]
        for r in rates:
            c = cell(cells, n, parts, r)
            if c is None and any(s["contender"] == n and s["partitions"] == parts and s["rate"] < r for s in saturated):
                row += ["saturated", "", ""]
            else:
                row += [fig(c, "p50_us"), fig(c, "p99_us"), fig(c, "p999_us")]
        print("| " + " | ".join(row) + " |")
    print()


def targets(cells):
    out = []

    def diff(a, b, key):
        return None if not a or not b or a.get(key) is None or b.get(key) is None else (a[key] - b[key]) / 1000

    for parts in sorted({c["partitions"] for c in cells}):
        for rate in (1000, 10000):
            raw = cell(cells, "raw", parts, rate)
            for cs in ("cs-tracked-1w", "cs-tracked-4w"):
                c = cell(cells, cs, parts, rate)
                d50, d99 = diff(c, raw, "p50_us"), diff(c, raw, "p99_us")
                if d50 is None or d99 is None:
                    continue
                ok = d50 <= 0.2 and d99 <= 1.0
                out.append(f"| {cs} arrival, {parts} p, {rate // 1000}k/s | p50 {d50:+.2f} ms, p99 {d99:+.2f} ms "
                           f"(p99.9 {diff(c, raw, 'p999_us'):+.2f}) | p50 ≤ +0.2, p99 ≤ +1 | {'met' if ok else 'not met'} |")
        rr, cr = cell(cells, "raw-reply", parts, 10000), cell(cells, "cs-reply", parts, 10000)
        d99 = diff(cr, rr, "p99_us")
        if d99 is not None:
            out.append(f"| cs-reply readable, {parts} p, 10k/s | p99 {d99:+.2f} ms | ≤ +1 | {'met' if d99 <= 1 else 'not met'} |")
        if cr and cr.get("p99_us") is not None:
            p99 = cr["p99_us"] / 1000
            out.append(f"| cs-reply readable with the profile, {parts} p, 10k/s | p99 {p99:.2f} ms | < 5 ms | "
                       f"{'met' if p99 < 5 else 'not met'} |")
    print("| target | cstream minus raw librdkafka (same run) | goal | |")
    print("|---|---|---|---|")
    for line in out:
        print(line)
    print()


def peers(cells):
    pairs = [("cs-auto", "ruststream-auto"), ("cs-tracked-1w", "ruststream-tracked"),
             ("cs-tracked-4w", "ruststream-tracked"), ("cs-reply", "ruststream-reply")]
    ahead, behind = 0, []
    for c in cells:
        for cs, rs in pairs:
            if c["contender"] != cs:
                continue
            r = cell(cells, rs, c["partitions"], c["rate"], c["settings"])
            if not r:
                continue
            for key in ("p50_us", "p99_us"):
                a, b = c.get(key), r.get(key)
                if a is None:
                    behind.append(f"{cs} vs {rs}, {c['partitions']} p, {c['rate']}/s, {c['settings']}: cstream saturated")
                elif b is None or a <= b:
                    ahead += 1
                else:
                    behind.append(f"{cs} vs {rs}, {c['partitions']} p, {c['rate']}/s, {c['settings']}, {key[:-3]}: "
                                  f"{ms(a)} ms vs {ms(b)} ms")
    print(f"RustStream: cstream ahead or level on {ahead} shared (row, percentile) pairs; behind on {len(behind)}:")
    for b in behind:
        print(f"- {b}")
    print()


def throughput(path):
    d = json.load(open(path))
    runs = [e for e in d["runs"] if e.get("median")]
    print("| topic | contender | median records/s | × raw-reply | × raw-batch (consume only) |")
    print("|---|---|---|---|---|")
    for topic in dict.fromkeys(e["topic"] for e in runs):
        mine = [e for e in runs if e["topic"] == topic]
        base = next((e["median"] for e in mine if e["contender"] == "raw-reply"), None)
        batch = next((e["median"] for e in mine if e["contender"] == "raw-batch"), None)
        for e in mine:
            r1 = f"{e['median'] / base:.2f}" if base else "—"
            r2 = f"{e['median'] / batch:.2f}" if batch else "—"
            print(f"| {topic} | {e['contender']} | {e['median']:,.0f} | {r1} | {r2} |")
    print()


def chart(sweep, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no chart)", file=sys.stderr)
        return
    fig_, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, shape, title in ((axes[0], "arrival", "handler arrival"), (axes[1], "reply", "reply readable (read_committed)")):
        for name in dict.fromkeys(c["contender"] for c in sweep if c["shape"] == shape):
            pts = sorted((c["rate"], c["p50_us"], c["p99_us"]) for c in sweep
                         if c["contender"] == name and c.get("valid_rounds"))
            if not pts:
                continue
            line, = ax.plot([p[0] for p in pts], [p[2] / 1000 for p in pts], marker="o", label=f"{name} p99")
            ax.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], marker=".", linestyle="--", color=line.get_color(),
                    label=f"{name} p50")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered load, records/s (6 partitions, 512 B)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("latency, ms")
    fig_.suptitle("latency against load, real broker, one machine (bench/latency.py --sweep)")
    fig_.tight_layout()
    fig_.savefig(path, dpi=110)
    print(f"(chart: {path})", file=sys.stderr)


def main():
    d = json.load(open(sys.argv[1]))
    cells, saturated = d["cells"], d.get("saturated", [])
    print(f"librdkafka {d.get('librdkafka')} (RustStream: its bundled 2.12.1), {d['cluster']} cluster, "
          f"{d['args']['rounds']} rounds, git {d['git_head'][:7]}\n")
    for parts in sorted({c["partitions"] for c in cells if c["settings"] == "tuned"}):
        for shape, title in (("arrival", "handler arrival"), ("reply", "reply readable")):
            print(f"**{title}, {parts} partition(s)**, ms, median of the rounds' percentiles:\n")
            shape_table([c for c in cells if c["shape"] == shape], saturated, shape, parts)
    dflt = [c for c in cells if c["settings"] == "defaults"]
    if dflt:
        print(f"**each framework's defaults**, {dflt[0]['partitions']} partitions, {dflt[0]['rate']} records/s, ms:\n")
        print("| contender | p50 | p99 | p99.9 | max |")
        print("|---|---|---|---|---|")
        for c in dflt:
            print(f"| {c['contender']} | {fig(c, 'p50_us')} | {fig(c, 'p99_us')} | {fig(c, 'p999_us')} | {fig(c, 'max_us')} |")
        print()
    targets(cells)
    peers(cells)
    if d.get("sweep"):
        print("**sweep**, 6 partitions, 1 round per load, p50 / p99 ms:\n")
        rates = sorted({c["rate"] for c in d["sweep"]})
        print("| contender | " + " | ".join(f"{r // 1000}k/s" for r in rates) + " |")
        print("|---|" + "---|" * len(rates))
        for name in dict.fromkeys(c["contender"] for c in d["sweep"]):
            row = []
            for r in rates:
                c = next((x for x in d["sweep"] if x["contender"] == name and x["rate"] == r), None)
                row.append("—" if c is None else "saturated" if not c.get("valid_rounds")
                           else f"{ms(c['p50_us'])} / {ms(c['p99_us'])}")
            print(f"| {name} | " + " | ".join(row) + " |")
        print()
        chart(d["sweep"], os.path.join(ROOT, "docs", "latency.png"))
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        throughput(sys.argv[2])


if __name__ == "__main__":
    main()
