#!/usr/bin/env python3
"""bench/run.py — drives the benchmark: topics, producer, contenders, rounds, results JSON.

  bench/peers/.venv/bin/python bench/run.py --cluster real --cluster embedded --out bench/results/results.json

For each cluster and topic shape: one topic is filled by a separate producer process
(`cs_bench produce`, N records of 512-byte JSON, round-robin over partitions); every
contender round is its own process with a fresh consumer group reading ids 0..n-1 from
the head of every partition. A warm-up round (not reported) measures the rate and sizes
the three reported rounds to >= TARGET_S seconds, capped by the topic's length (a capped
round is marked short). A round that did not see every id exactly once-or-more is invalid
and reported as such, never as a number.

  bench/run.py --scaling --out bench/results/scaling.json

runs only the scaling section instead (real broker): Tracked with 1..16 workers and a handler
that sleeps 1 ms per record, lanes by partition on a 16-partition topic, and lanes by key on
16-partition topics keyed with 10 and with 1,000 distinct keys. Its rounds are sized by time
the same way; the warm-up is SCALING_WARMUP_PER_WORKER records per worker (~0.5 s ideal).
"""
import argparse, json, math, os, statistics, subprocess, sys, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CS = os.path.join(HERE, "build", "cs_bench")
SHIM = os.path.join(HERE, "build", "libbench_malloc_count.so")
RUST = os.path.join(HERE, "peers", "ruststream", "target", "release", "cstream-bench-ruststream")
PY = os.path.join(HERE, "peers", ".venv", "bin", "python")
FAST = os.path.join(HERE, "peers", "faststream", "bench_faststream.py")

C_CONTENDERS = ["raw-batch", "raw-poll", "cs-auto", "cs-tracked-1w", "cs-tracked-4w", "cs-batch-500", "cs-reply",
                "cs-txn-reply", "cs-txn-reply-barrier"]
PEERS = ["ruststream-auto", "ruststream-tracked", "faststream-manual-ack"]
MOCK_RECORDS_PER_PARTITION = 8000   # the mock keeps 5 MiB per partition: ~9,000 records of 512 B
SCALING_WORKERS = [1, 2, 4, 8, 16]
SCALING_PARTITIONS = 16
SCALING_WARMUP_PER_WORKER = 500     # the 1 ms handler: at best 1,000 records/s per worker


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cmd_for(contender, brokers, topic, group, n, reply_topic):
    if contender.startswith("ruststream-"):
        return [RUST, contender.split("-", 1)[1], brokers, topic, group, str(n)], {}
    if contender.startswith("faststream"):
        return [PY, FAST, brokers, topic, group, str(n)], {}
    return [CS, "consume", contender, brokers, topic, group, str(n), reply_topic], {"LD_PRELOAD": SHIM}


def run_round(contender, brokers, topic, n, reply_topic, timeout):
    group = f"bench-{contender}-{uuid.uuid4().hex[:8]}"
    cmd, extra = cmd_for(contender, brokers, topic, group, n, reply_topic)
    env = dict(os.environ, **extra)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"contender": contender, "records": n, "valid": False, "error": f"timeout after {timeout} s"}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"contender": contender, "records": n, "valid": False,
                "error": f"exit {p.returncode}: {p.stderr.strip()[-500:]}"}
    r = json.loads(lines[-1])
    if not r.get("valid"):
        r["error"] = p.stderr.strip()[-500:]
    return r


def produce(brokers, topic, parts, n, keys=0):
    t = time.time()
    p = subprocess.run([CS, "produce", brokers, topic, str(parts), str(n), str(keys)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"produce {topic}: {p.stdout} {p.stderr}")
    log(f"  produced {n} records to {topic} ({parts} partitions, {keys or 'no'} keys) in {time.time() - t:.1f} s")


def save(args, results):
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


def warmup_records(args, c):
    if c.startswith("faststream"):
        return args.warmup_faststream
    if c.startswith("cs-sleep-"):  # cs-sleep-[key-]<N>w
        return SCALING_WARMUP_PER_WORKER * int(c.rsplit("-", 1)[1].rstrip("w"))
    return args.warmup


def bench_topic(args, brokers, create, label, parts, n_topic, contenders, sink, keys=0):
    tag = uuid.uuid4().hex[:6]
    topic, reply = f"bench-{label}-{tag}", f"bench-{label}-{tag}-replies"
    create(topic, parts)
    create(reply, parts)
    produce(brokers, topic, parts, n_topic, keys)
    out = []
    for c in contenders:
        warm_n = min(n_topic, warmup_records(args, c))
        w = run_round(c, brokers, topic, warm_n, reply, args.round_timeout)
        if not w.get("valid"):
            log(f"  {c}: warm-up invalid: {w.get('error')}")
            bad = {"contender": c, "topic": label, "partitions": parts, "keys": keys, "valid": False,
                   "error": w.get("error"), "rounds": [w]}
            out.append(bad)
            sink(bad)
            continue
        rate = w["records_per_s"]
        n = max(warm_n, min(n_topic, int(rate * args.target_s)))
        rounds = [run_round(c, brokers, topic, n, reply, args.round_timeout) for _ in range(args.rounds)]
        ok = [r for r in rounds if r.get("valid")]
        entry = {"contender": c, "topic": label, "partitions": parts, "keys": keys, "round_records": n,
                 "rounds": rounds, "valid": len(ok) == len(rounds)}
        if ok:
            rates = [r["records_per_s"] for r in ok]
            entry.update(best=max(rates), median=statistics.median(rates),
                         min_round_s=min(r["seconds"] for r in ok),
                         short=min(r["seconds"] for r in ok) < args.target_s * 0.9,
                         peak_rss_kb=max(r["peak_rss_kb"] for r in ok))
            allocs = [r["allocs"] / r["records"] for r in ok if r.get("allocs", -1) >= 0]
            entry["allocs_per_record"] = statistics.median(allocs) if allocs else None
        log(f"  {c:24s} n={n:>8d} median={entry.get('median', 0):>10.0f}/s best={entry.get('best', 0):>10.0f}/s "
            f"valid={entry['valid']} allocs/rec={entry.get('allocs_per_record')} rss={entry.get('peak_rss_kb')} kB")
        out.append(entry)
        sink(entry)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", action="append", choices=["real", "embedded"])
    ap.add_argument("--contender", action="append", help="default: all")
    ap.add_argument("--records", type=int, default=2_000_000, help="records per topic on the real broker")
    ap.add_argument("--embedded-records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", action="append", choices=["6p", "1p"], help="real broker topic shapes (default both)")
    ap.add_argument("--target-s", type=float, default=5.5)
    ap.add_argument("--warmup", type=int, default=100_000)
    ap.add_argument("--warmup-faststream", type=int, default=300)
    ap.add_argument("--round-timeout", type=int, default=300)
    ap.add_argument("--scaling", action="store_true",
                    help="only the scaling section (real broker): 1 ms handler, 1..16 workers, lanes by partition and by key")
    ap.add_argument("--scaling-records", type=int, default=120_000, help="records per scaling topic")
    ap.add_argument("--out", help="default: bench/results/results.json (--scaling: scaling.json)")
    args = ap.parse_args()
    # the scaling run must not overwrite the main results by default
    args.out = args.out or os.path.join(HERE, "results", "scaling.json" if args.scaling else "results.json")
    if args.scaling:
        return scaling(args)
    contenders = args.contender or C_CONTENDERS + PEERS
    missing = [c for c in contenders if c.startswith("ruststream") and not os.path.exists(RUST)]
    if missing:
        log("RustStream peer not built (cargo build --release in bench/peers/ruststream): skipped")
        contenders = [c for c in contenders if c not in missing]
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "git_head": subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
               "git_dirty_files": subprocess.run(["git", "-C", ROOT, "status", "--short", "src", "include"], capture_output=True, text=True).stdout.split("\n"),
               "machine": {"nproc": os.cpu_count(), "uname": " ".join(os.uname())},
               "args": vars(args), "runs": []}
    for cluster in args.cluster or ["real", "embedded"]:
        if cluster == "real":
            brokers = subprocess.run([os.path.join(ROOT, "scripts", "kafka"), "start"], capture_output=True,
                                     text=True, check=True).stdout.strip()
            log(f"real broker at {brokers}")
            def create(topic, parts):
                subprocess.run([CS, "create-topic", brokers, topic, str(parts)], check=True)
            def sink(e):
                e["cluster"] = "real"
                results["runs"].append(e)
                save(args, results)
            for label, parts in (("6p", 6), ("1p", 1)):
                if args.shape and label not in args.shape:
                    continue
                bench_topic(args, brokers, create, label, parts, args.records, contenders, sink)
        else:
            host = subprocess.Popen([CS, "mock-host"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            brokers = host.stdout.readline().strip()
            log(f"embedded (mock) cluster at {brokers}")
            def create(topic, parts):
                host.stdin.write(f"{topic}:{parts}\n"); host.stdin.flush()
                ans = host.stdout.readline().strip()
                if ans != "ok":
                    raise SystemExit(f"mock topic {topic}: {ans}")
            n = args.embedded_records
            parts = max(6, math.ceil(n / MOCK_RECORDS_PER_PARTITION))
            def sink(e):
                e["cluster"] = "embedded"
                results["runs"].append(e)
                save(args, results)
            bench_topic(args, brokers, create, f"{parts}p", parts, n, contenders, sink)
            host.stdin.close(); host.wait(timeout=60)
        save(args, results)
    log(f"wrote {args.out}")


def scaling(args):
    """The scaling section: its own topics and results file, so the main table stays comparable."""
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "git_head": subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
               "machine": {"nproc": os.cpu_count(), "uname": " ".join(os.uname())},
               "args": vars(args), "runs": []}
    brokers = subprocess.run([os.path.join(ROOT, "scripts", "kafka"), "start"], capture_output=True,
                             text=True, check=True).stdout.strip()
    log(f"real broker at {brokers}")

    def create(topic, parts):
        subprocess.run([CS, "create-topic", brokers, topic, str(parts)], check=True)

    def sink(e):
        e["cluster"] = "real"
        results["runs"].append(e)
        save(args, results)

    only = set(args.contender or [])
    sections = [("by partition", "16p", 0, "cs-sleep-%dw"),
                ("by key, 10 keys", "16p-10k", 10, "cs-sleep-key-%dw"),
                ("by key, 1000 keys", "16p-1000k", 1000, "cs-sleep-key-%dw")]
    summary = []
    for title, label, keys, pattern in sections:
        contenders = [pattern % w for w in SCALING_WORKERS if not only or pattern % w in only]
        if not contenders:
            continue
        log(f"scaling, lanes {title}")
        out = bench_topic(args, brokers, create, label, SCALING_PARTITIONS, args.scaling_records, contenders, sink, keys)
        rates = {e["contender"]: e.get("median") for e in out}
        one, top = rates.get(pattern % 1), rates.get(pattern % SCALING_WORKERS[-1])
        ratio = top / one if one and top else None
        summary.append({"lanes": title, "keys": keys, "median_by_workers": rates, "ratio_16w_1w": ratio})
        log(f"  lanes {title}: 16w/1w = {ratio:.1f}x" if ratio else f"  lanes {title}: no ratio")
    results["summary"] = summary
    save(args, results)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
