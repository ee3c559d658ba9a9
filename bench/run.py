#!/usr/bin/env python3
"""bench/run.py — drives the benchmark: topics, producer, contenders, rounds, results JSON.

  bench/peers/.venv/bin/python bench/run.py --cluster real --out bench/results/real.json

For each cluster and topic shape (real broker: 1, 6, 48 and 192 partitions) one topic is filled by a
separate producer process (`cs_bench produce`, N records of 512-byte JSON, round-robin over
partitions); every contender round is its own process with a fresh consumer group reading ids
0..n-1 from the head of every partition. A warm-up round per contender (not reported) measures its
rate. The reported rounds are then INTERLEAVED: round 1 runs the contenders in the order A B C ...,
round 2 in B C ... A, round 3 in C ... A B, so that a slow minute of the shared machine lands on
every contender rather than on all rounds of one. A round is sized to >= TARGET_S seconds at the
contender's warm-up rate and, on the real broker, to at least --min-round-records (1,000,000),
capped by the topic's length (a capped round shorter than TARGET_S is marked short); FastStream's
rounds (faststream-manual-ack, faststream-default-ack) are sized by time only (a few hundred to a
few thousand records a second). A round that did not see every id at least once is invalid and
reported as such, never as a number.

Per contender and shape the JSON has: median records/s and the spread (min, max, (max-min)/median),
the ratio of the median to raw-batch's on the same topic, peak RSS over the rounds, and for the C
contenders allocations per record (malloc_count shim) and, with --callgrind (default on the real
broker), instructions per record measured by bench/callgrind.sh (every thread of the consuming
process, by slope between two topic sizes) and their excess over raw-batch's.
bench/report.py turns the JSON into the tables of docs/benchmarks.md.

  bench/run.py --scaling --out bench/results/scaling.json

runs only the scaling section instead (real broker): Tracked with 1..16 workers and a handler
that sleeps 1 ms per record, lanes by partition on a 16-partition topic, and lanes by key on
16-partition topics keyed with 10 and with 1,000 distinct keys. Its rounds are sized by time
the same way; the warm-up is SCALING_WARMUP_PER_WORKER records per worker (~0.5 s ideal).

Smoke test (seconds): bench/run.py --cluster embedded --embedded-records 20000 --rounds 1 \
    --warmup 5000 --target-s 0.5 --contender raw-batch --contender cs-auto --no-callgrind --out /tmp/smoke.json
"""
import argparse, json, math, os, statistics, subprocess, sys, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CS = os.path.join(HERE, "build", "cs_bench")
SHIM = os.path.join(HERE, "build", "libbench_malloc_count.so")
# librdkafka lanes (docs/librdkafka.md): a C contender named "<name>@current" runs the harness built
# against the current lane's librdkafka (bench/build-current, `make bench-lanes`); its raw-batch@current
# is its baseline, so every ratio compares cstream with raw librdkafka of the same version.
LANE_BUILDS = {"": os.path.join(HERE, "build"), "current": os.path.join(HERE, "build-current")}


def split_lane(contender):
    """("cs-auto", "current") for "cs-auto@current"; ("cs-auto", "") for the floor's."""
    name, _, lane = contender.partition("@")
    return name, lane


def lane_binary(lane, name="cs_bench"):
    if lane not in LANE_BUILDS:
        raise SystemExit(f"unknown librdkafka lane {lane!r} (known: {', '.join(l or 'floor' for l in LANE_BUILDS)})")
    return os.path.join(LANE_BUILDS[lane], name)


def baseline_of(contender):
    return BASELINE + ("@" + split_lane(contender)[1] if split_lane(contender)[1] else "")
RUST = os.path.join(HERE, "peers", "ruststream", "target", "release", "cstream-bench-ruststream")
PY = os.path.join(HERE, "peers", ".venv", "bin", "python")
FAST = os.path.join(HERE, "peers", "faststream", "bench_faststream.py")

C_CONTENDERS = ["raw-batch", "raw-poll", "cs-auto", "cs-tracked-1w", "cs-tracked-4w", "cs-batch-500", "cs-reply",
                "cs-txn-reply"]
PEERS = ["ruststream-auto", "ruststream-tracked", "faststream-manual-ack", "faststream-default-ack"]
# Run only when named with --contender: a measurement switch, not a configuration services use.
EXTRA_CONTENDERS = ["cs-txn-reply-barrier", "raw-reply", "cs-reply+low-latency", "cs-tracked-1w+low-latency"]
BASELINE = "raw-batch"
REAL_SHAPES = [("1p", 1), ("6p", 6), ("48p", 48), ("192p", 192)]
FASTSTREAM_MAX_PARTITIONS = 6  # see main(): more partitions make a FastStream round take minutes
MOCK_RECORDS_PER_PARTITION = 8000   # the mock keeps 5 MiB per partition: ~9,000 records of 512 B
SCALING_WORKERS = [1, 2, 4, 8, 16]
SCALING_PARTITIONS = 16
SCALING_WARMUP_PER_WORKER = 500     # the 1 ms handler: at best 1,000 records/s per worker


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cmd_for(contender, brokers, topic, group, n, reply_topic):
    if contender.startswith("ruststream-"):
        return [RUST, contender.split("-", 1)[1], brokers, topic, group, str(n)], {}
    if contender.startswith("faststream-"):  # faststream-<mode>: manual-ack or default-ack
        return [PY, FAST, brokers, topic, group, str(n), contender.split("-", 1)[1]], {}
    name, lane = split_lane(contender)
    return ([lane_binary(lane), "consume", name, brokers, topic, group, str(n), reply_topic],
            {"LD_PRELOAD": lane_binary(lane, "libbench_malloc_count.so")})


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


def is_c_contender(c):
    c = split_lane(c)[0]
    return not (c.startswith("ruststream") or c.startswith("faststream"))


def round_records(args, c, rate, warm_n, n_topic, min_round):
    """Records for one reported round: TARGET_S seconds at the warm-up rate, at least min_round
    (not for FastStream, sized by time alone), never more than the topic holds."""
    n = max(warm_n, int(rate * args.target_s))
    if not c.startswith("faststream"):
        n = max(n, min_round)
    return min(n_topic, n)


def summarize(entry, args):
    """Fills the entry's figures from its valid rounds (called after every round, so that a
    results file saved mid-run is readable)."""
    ok = [r for r in entry["rounds"] if r.get("valid")]
    entry["valid"] = len(ok) == len(entry["rounds"]) and len(ok) > 0
    if not ok:
        return
    rates = [r["records_per_s"] for r in ok]
    med = statistics.median(rates)
    entry.update(median=med, best=max(rates), worst=min(rates),
                 spread=(max(rates) - min(rates)) / med if med else None,
                 min_round_s=min(r["seconds"] for r in ok),
                 short=min(r["seconds"] for r in ok) < args.target_s * 0.9,
                 peak_rss_kb=max(r["peak_rss_kb"] for r in ok))
    allocs = [r["allocs"] / r["records"] for r in ok if r.get("allocs", -1) >= 0 and r.get("records")]
    entry["allocs_per_record"] = statistics.median(allocs) if allocs else None


def add_ratios(entries):
    """Each contender's median as a multiple of raw-batch's (of its own librdkafka lane) on the same
    topic, and its peak RSS over raw-batch's."""
    for e in entries:
        base = next((b for b in entries if b["contender"] == baseline_of(e["contender"]) and b.get("median")), None)
        e["ratio_to_raw_batch"] = e["median"] / base["median"] if base and e.get("median") else None
        e["rss_ratio_to_raw_batch"] = (e["peak_rss_kb"] / base["peak_rss_kb"]
                                       if base and e.get("peak_rss_kb") and base.get("peak_rss_kb") else None)


def bench_topic(args, brokers, create, label, parts, n_topic, contenders, sink, keys=0, min_round=0, save_fn=None):
    """Warm-up of every contender, then args.rounds rounds, each running every contender once in a
    rotated order. sink(entry) is called once per contender (after its warm-up) with an entry that
    the later rounds keep updating; save_fn() persists the results after every round."""
    tag = uuid.uuid4().hex[:6]
    topic, reply = f"bench-{label}-{tag}", f"bench-{label}-{tag}-replies"
    create(topic, parts)
    create(reply, parts)
    produce(brokers, topic, parts, n_topic, keys)
    entries = {}
    for c in contenders:
        warm_n = min(n_topic, warmup_records(args, c))
        w = run_round(c, brokers, topic, warm_n, reply, args.round_timeout)
        entry = {"contender": c, "topic": label, "partitions": parts, "keys": keys, "valid": False, "rounds": []}
        if not w.get("valid"):
            log(f"  {c}: warm-up invalid: {w.get('error')}")
            entry.update(error=w.get("error"), warmup=w)
        else:
            entry.update(warmup_records_per_s=w["records_per_s"],
                         round_records=round_records(args, c, w["records_per_s"], warm_n, n_topic, min_round))
            entries[c] = entry
        sink(entry)
    if save_fn:
        save_fn()
    order = [c for c in contenders if c in entries]
    for k in range(args.rounds):
        rotated = order[k % len(order):] + order[:k % len(order)] if order else []
        log(f"  round {k + 1}/{args.rounds}: {' '.join(rotated)}")
        for pos, c in enumerate(rotated):
            e = entries[c]
            r = run_round(c, brokers, topic, e["round_records"], reply, args.round_timeout)
            r.update(round=k + 1, position=pos)
            e["rounds"].append(r)
            summarize(e, args)
            if not r.get("valid"):
                log(f"    {c}: round {k + 1} invalid: {r.get('error')}")
        add_ratios(list(entries.values()))
        if save_fn:
            save_fn()
    for c in order:
        e = entries[c]
        ratio = e.get("ratio_to_raw_batch")
        log(f"  {c:24s} n={e['round_records']:>8d} median={e.get('median', 0):>10.0f}/s "
            f"spread={100 * (e.get('spread') or 0):5.1f}% x{BASELINE}={ratio if ratio is None else round(ratio, 2)} "
            f"valid={e['valid']} allocs/rec={e.get('allocs_per_record')} rss={e.get('peak_rss_kb')} kB")
    return [entries.get(c) for c in order]


def run_callgrind(args, brokers, contenders):
    """Instructions per record of the C contenders (bench/callgrind.sh, its own 6-partition
    topics). Returns {contender: {ir_per_record, ...}}; a failed contender has an error instead."""
    out = {}
    for lane in dict.fromkeys(split_lane(c)[1] for c in contenders if is_c_contender(c)):
        cs = [split_lane(c)[0] for c in contenders if is_c_contender(c) and split_lane(c)[1] == lane]
        if BASELINE in cs:  # the raw loop that also reads headers: librdkafka's header parse, measured apart
            cs.insert(cs.index(BASELINE) + 1, "raw-batch-headers")
        suffix = "@" + lane if lane else ""
        log(f"callgrind{' (lane ' + lane + ')' if lane else ''}: {' '.join(cs)}")
        p = subprocess.run([os.path.join(HERE, "callgrind.sh"), brokers] + cs, capture_output=True, text=True,
                           env=dict(os.environ, CS_BENCH=lane_binary(lane)))
        mine = {}
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                r["contender"] += suffix
                mine[r["contender"]] = r
        base = mine.get(BASELINE + suffix, {}).get("ir_per_record")
        for r in mine.values():
            if base is not None and r.get("ir_per_record") is not None:
                r["ir_over_raw_batch"] = r["ir_per_record"] - base
        if p.returncode != 0:
            log(f"callgrind.sh exit {p.returncode}: {p.stderr.strip()[-300:]}")
        out.update(mine)
    return out


def attach_callgrind(results, cluster, cg):
    for e in results["runs"]:
        if e.get("cluster") == cluster and e["contender"] in cg:
            r = cg[e["contender"]]
            e["ir_per_record"] = r.get("ir_per_record")
            e["ir_over_raw_batch"] = r.get("ir_over_raw_batch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", action="append", choices=["real", "embedded"])
    ap.add_argument("--contender", action="append",
                    help=f"default: {' '.join(C_CONTENDERS + PEERS)} (also: {' '.join(EXTRA_CONTENDERS)})")
    ap.add_argument("--records", type=int, default=2_000_000, help="records per topic on the real broker")
    ap.add_argument("--embedded-records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", action="append", choices=[l for l, _ in REAL_SHAPES],
                    help="real broker topic shapes (default all)")
    ap.add_argument("--target-s", type=float, default=5.5)
    ap.add_argument("--min-round-records", type=int, default=1_000_000,
                    help="smallest reported round on the real broker (FastStream excepted; capped by --records)")
    ap.add_argument("--warmup", type=int, default=100_000)
    ap.add_argument("--warmup-faststream", type=int, default=300)
    ap.add_argument("--round-timeout", type=int, default=600, help="seconds; a 1,000,000-record round of a slow contender takes minutes")
    ap.add_argument("--callgrind", dest="callgrind", action="store_true", default=None,
                    help="instructions per record of the C contenders (bench/callgrind.sh, real broker only); default on")
    ap.add_argument("--no-callgrind", dest="callgrind", action="store_false")
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
               "args": vars(args), "runs": [], "callgrind": {}}
    for cluster in args.cluster or ["real", "embedded"]:
        def sink(e, cluster=cluster):
            e["cluster"] = cluster
            results["runs"].append(e)
            save(args, results)
        if cluster == "real":
            kafka = os.path.join(ROOT, "scripts", "kafka")
            was_running = subprocess.run([kafka, "status"], capture_output=True).returncode == 0
            brokers = subprocess.run([kafka, "start"], capture_output=True, text=True, check=True).stdout.strip()
            log(f"real broker at {brokers}")
            def create(topic, parts):
                subprocess.run([CS, "create-topic", brokers, topic, str(parts)], check=True)
            try:
                for label, parts in REAL_SHAPES:
                    if args.shape and label not in args.shape:
                        continue
                    log(f"real broker, {parts}-partition topic")
                    here_contenders = [c for c in contenders
                                       if not (c.startswith("faststream") and parts > FASTSTREAM_MAX_PARTITIONS)]
                    if len(here_contenders) < len(contenders):
                        log(f"  FastStream not run on {parts} partitions: aiokafka hands out a whole fetched batch "
                            f"(~1,900 records) of one partition before the next, so a round handles "
                            f"~{parts - 1} x 1,900 records and takes minutes (bench/peers/faststream/FINDINGS.md)")
                    bench_topic(args, brokers, create, label, parts, args.records, here_contenders, sink,
                                min_round=args.min_round_records, save_fn=lambda: save(args, results))
                if args.callgrind is not False:
                    results["callgrind"]["real"] = run_callgrind(args, brokers, contenders)
                    attach_callgrind(results, "real", results["callgrind"]["real"])
            finally:
                if not was_running:  # started here: do not leave it behind
                    subprocess.run([kafka, "stop"], capture_output=True)
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
            # sized by time only: --min-round-records is about the real broker
            bench_topic(args, brokers, create, f"{parts}p", parts, n, contenders, sink,
                        save_fn=lambda: save(args, results))
            if args.callgrind:  # callgrind.sh creates its topics through the Admin API, which the mock host lacks
                log("callgrind: real broker only (bench/callgrind.sh creates its own topics): skipped here")
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
