#!/usr/bin/env python3
"""bench/ab.py — A/B of two cs_bench builds on the same topics, alternating contender by contender.

  bench/ab.py --base OLD/cs_bench --new bench/build/cs_bench --brokers HOST:PORT \
      --topic 1p=TOPIC1 --topic 6p=TOPIC6 --rounds 3 --out ab.jsonl

The topics must exist and be filled by `cs_bench produce` (ids from 0). Each round runs, per topic
and contender, the base build then the new one (raw-batch once, with the base build), each in its
own process with a fresh group; a round is sized to ~TARGET_S seconds at the rate the same
(build, topic, contender) reached last time (--seed-rate for the first round), capped at --cap.
Writes one JSON line per run (cs_bench's line plus bin, topic, n, round) and prints medians.
Used for docs/benchmarks.md, "1-partition topics".
"""
import argparse, json, statistics, subprocess, time, uuid

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--new", required=True)
ap.add_argument("--brokers", required=True)
ap.add_argument("--topic", action="append", required=True, help="LABEL=TOPIC")
ap.add_argument("--contender", action="append", help="default: raw-batch cs-auto cs-tracked-1w cs-tracked-4w")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--target-s", type=float, default=5.5)
ap.add_argument("--seed-rate", type=float, default=20000, help="records/s assumed before the first run")
ap.add_argument("--cap", type=int, default=2500000)
ap.add_argument("--out", required=True)
a = ap.parse_args()
bins = {"base": a.base, "new": a.new}
topics = dict(t.split("=", 1) for t in a.topic)
conts = a.contender or ["raw-batch", "cs-auto", "cs-tracked-1w", "cs-tracked-4w"]
rate, runs = {}, []
with open(a.out, "a") as out:
    for rnd in range(1, a.rounds + 1):
        for label, topic in topics.items():
            for c in conts:
                for b in (["base"] if c == "raw-batch" else ["base", "new"]):
                    n = max(20000, min(a.cap, int(rate.get((b, label, c), a.seed_rate) * a.target_s)))
                    group = f"ab-{c}-{uuid.uuid4().hex[:8]}"
                    p = subprocess.run([bins[b], "consume", c, a.brokers, topic, group, str(n)],
                                       capture_output=True, text=True, timeout=600)
                    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
                    r = json.loads(lines[-1]) if lines else {"valid": False, "error": p.stderr[-300:]}
                    r.update(bin=b, topic=label, n=n, round=rnd, ts=time.strftime("%H:%M:%S"))
                    if r.get("valid"):
                        rate[(b, label, c)] = r["records_per_s"]
                    runs.append(r)
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    print(rnd, b, label, c, n, r.get("records_per_s"), r.get("valid"), flush=True)
for label in topics:
    for c in conts:
        for b in ("base", "new"):
            ok = [r for r in runs if r["topic"] == label and r["contender"] == c and r["bin"] == b and r.get("valid")]
            if ok:
                print(f"{label} {c} {b}: median {statistics.median(r['records_per_s'] for r in ok):,.0f}/s "
                      f"peak RSS {max(r['peak_rss_kb'] for r in ok) // 1024} MiB")
