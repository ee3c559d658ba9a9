#!/usr/bin/env python3
"""bench/latency.py — what a record's trip costs, per contender, side by side (docs/benchmarks.md, "Latency").

  python3 bench/latency.py --out bench/results/latency.json          (make bench-latency)

Every round is one contender, one topic shape, one offered load, on fresh topics: the contender
(`cs_latency serve` or the RustStream peer) and `cs_latency drive` start together; drive writes
512-byte records at the offered rate, each stamped with its due time (CLOCK_REALTIME, microseconds; every
process runs on this machine and reads the same clock). Until the contender handled its first
record (reply shape: until the reader saw the first reply) and for WARM_S seconds after, the
stamps mark warm-up (never sampled); then RATE x SECONDS
measured records, at least 10,000 so that p99.9 rests on 10 samples or more.

Two shapes. Arrival: the handler (the raw loop's poll) samples now - stamp where it starts.
Reply: the handler replies with the stamp; drive's read_committed reader samples when the reply
is readable. The contenders of one shape (topic, load) run round by round in rotated order
(A B C, B C A, ...), so a slow minute of the machine lands on all of them; each figure is the
median over the rounds of that percentile.

Settings: `tuned` gives every client of every contender the same latency-bound librdkafka
properties (fetch.wait.max.ms=10, fetch.min.bytes=1, socket.nagle.disable=true, producer
linger.ms=1: what cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY) sets; the cs contenders call it);
`defaults` runs each framework as it comes.

--sweep raises the load on 6 partitions until each contender saturates (its p50 passes 1 s, or
it cannot finish): the latency-versus-load curve of docs/latency.png.
"""
import argparse, json, os, queue, statistics, subprocess, sys, tempfile, threading, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(HERE, "build")
LAT = os.path.join(BUILD, "cs_latency")
CS = os.path.join(BUILD, "cs_bench")
RUST = os.path.join(HERE, "peers", "ruststream", "target", "release", "cstream-bench-ruststream")

ARRIVAL = ["raw", "cs-auto", "cs-tracked-1w", "cs-tracked-4w", "ruststream-auto", "ruststream-tracked"]
REPLY = ["raw-reply", "cs-reply", "cs-txn-reply-10", "cs-txn-reply-100", "ruststream-reply"]
SWEEP = ["raw", "cs-tracked-4w", "ruststream-tracked", "raw-reply", "cs-reply", "ruststream-reply"]
SWEEP_RATES = [1000, 10000, 25000, 50000, 100000, 150000, 200000]
SATURATED_P50_US = 1_000_000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def shape_of(contender):
    return "reply" if "reply" in contender else "arrival"


def seconds_for(rate, args):
    return max(args.seconds, -(-10000 // rate))  # at least 10,000 measured records


def contender_cmd(c, brokers, tin, tout, measured, settings):
    if c.startswith("ruststream-"):
        mode = "latency-" + c.split("-", 1)[1]
        return [RUST, mode, brokers, tin, f"lat-{uuid.uuid4().hex[:8]}", str(measured), tout, settings]
    return [LAT, "serve", c, brokers, tin, tout, str(measured), settings]


def pump(stream, q, tag):
    for line in stream:
        q.put((tag, line.rstrip("\n")))
    q.put((tag, None))


def run_round(c, brokers, create, delete, parts, rate, args, settings):
    tag = uuid.uuid4().hex[:8]
    tin, tout = f"lat-{tag}-in", f"lat-{tag}-out"
    create(tin, parts)
    create(tout, parts)
    seconds = seconds_for(rate, args)
    measured = rate * seconds
    shape = shape_of(c)
    q = queue.Queue()
    # stderr into files: a pipe nobody reads until the end would block a talkative child
    serve_err, drive_err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    serve = subprocess.Popen(contender_cmd(c, brokers, tin, tout, measured, settings), stdout=subprocess.PIPE,
                             stderr=serve_err, text=True)
    drive = subprocess.Popen([LAT, "drive", brokers, tin, tout, str(rate), str(seconds), str(args.warm_s), shape],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=drive_err, text=True)
    threads = [threading.Thread(target=pump, args=(serve.stdout, q, "serve"), daemon=True),
               threading.Thread(target=pump, args=(drive.stdout, q, "drive"), daemon=True)]
    for t in threads:
        t.start()
    lines = {"serve": [], "drive": []}
    ended, went = set(), False
    # A contender that cannot keep up would take minutes to drain its backlog: past 3x the
    # measured time (plus joining) the round is cut and reported as not finished.
    deadline = time.time() + args.warm_s + 3 * seconds + 60
    while len(ended) < 2 and time.time() < deadline:
        try:
            tag_, line = q.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            ended.add(tag_)
            continue
        lines[tag_].append(line)
        if line == "first" and not went and tag_ == ("drive" if shape == "reply" else "serve"):
            went = True
            drive.stdin.write("go\n")
            drive.stdin.flush()
    for p in (serve, drive):
        if p.poll() is None:
            p.kill()
        p.wait()
    delete(tin, tout)
    js = {k: [json.loads(l) for l in v if l.startswith("{")] for k, v in lines.items()}
    drive_js = [j for j in js["drive"] if "sent" in j]
    result = next((j for j in (js["drive"] if shape == "reply" else js["serve"]) if "p50_us" in j), None)
    r = {"contender": c, "partitions": parts, "rate": rate, "settings": settings, "seconds": seconds,
         "producer": drive_js[0] if drive_js else None}
    if not result or not result.get("valid"):
        serve_err.seek(0)
        drive_err.seek(0)
        err = (result or {}).get("error") or (serve_err.read()[-400:] + drive_err.read()[-400:]).strip()
        if time.time() >= deadline:
            err = f"did not finish within {args.warm_s + 3 * seconds + 60} s: saturated at this load"
        r.update(valid=False, error=err or f"exit {serve.returncode}/{drive.returncode}")
    else:
        r.update(valid=True, **{k: result[k] for k in ("samples", "p50_us", "p90_us", "p99_us", "p999_us", "max_us")})
    return r


def summarize(rounds):
    ok = [r for r in rounds if r.get("valid")]
    out = {"rounds": len(rounds), "valid_rounds": len(ok)}
    for k in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
        out[k] = statistics.median(r[k] for r in ok) if ok else None
    behind = [r["producer"]["producer_behind_max_us"] for r in ok if r.get("producer")]
    out["producer_behind_max_us"] = max(behind) if behind else None
    return out


def run_cell(contenders, brokers, create, delete, parts, rate, args, settings, results, save):
    log(f"{settings}, {parts} partition(s), {rate} records/s: {' '.join(contenders)}")
    rounds = {c: [] for c in contenders}
    for k in range(args.rounds):
        order = contenders[k % len(contenders):] + contenders[:k % len(contenders)]
        for c in order:
            r = run_round(c, brokers, create, delete, parts, rate, args, settings)
            rounds[c].append(r)
            if r["valid"]:
                log(f"  round {k + 1} {c:20s} p50 {r['p50_us'] / 1000:8.2f} ms  p99 {r['p99_us'] / 1000:8.2f} ms  "
                    f"p99.9 {r['p999_us'] / 1000:8.2f} ms  max {r['max_us'] / 1000:8.2f} ms")
            else:
                log(f"  round {k + 1} {c:20s} invalid: {r['error']}")
    cells = []
    for c in contenders:
        e = {"contender": c, "partitions": parts, "rate": rate, "settings": settings, "shape": shape_of(c),
             "runs": rounds[c]}
        e.update(summarize(rounds[c]))
        cells.append(e)
        results["cells"].append(e)
    save()
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", choices=["real", "embedded"], default="real")
    ap.add_argument("--contender", action="append", help=f"default: {' '.join(ARRIVAL + REPLY)}")
    ap.add_argument("--partitions", type=int, action="append", help="default: 1 and 6")
    ap.add_argument("--rate", type=int, action="append", help="default: 1000 10000 50000")
    ap.add_argument("--settings", action="append", choices=["tuned", "defaults"], help="default: tuned")
    ap.add_argument("--defaults-cell", default="6:10000",
                    help="PARTITIONS:RATE also run with each framework's defaults ('' for none)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4, help="measured seconds (more at low rates: >= 10,000 records)")
    ap.add_argument("--warm-s", type=int, default=2, help="warm-up seconds after the contender's first record")
    ap.add_argument("--sweep", action="store_true", help="also the latency-versus-load sweep (6 partitions, 1 round)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latency.json"))
    args = ap.parse_args()
    contenders = args.contender or ARRIVAL + REPLY
    if any(c.startswith("ruststream") for c in contenders) and not os.path.exists(RUST):
        log("RustStream peer not built (cargo build --release in bench/peers/ruststream): skipped")
        contenders = [c for c in contenders if not c.startswith("ruststream")]
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "git_head": subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                                          text=True).stdout.strip(),
               "git_dirty_files": subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "src", "include", "bench"],
                                                 capture_output=True, text=True).stdout.split("\n"),
               "machine": {"nproc": os.cpu_count(), "uname": " ".join(os.uname())},
               "librdkafka": subprocess.run(["pkg-config", "--modversion", "rdkafka"], capture_output=True,
                                            text=True).stdout.strip(),
               "cluster": args.cluster, "args": vars(args), "cells": [], "sweep": [], "saturated": []}

    def save():
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    host = None
    if args.cluster == "real":
        kafka = os.path.join(ROOT, "scripts", "kafka")
        brokers = subprocess.run([kafka, "start"], capture_output=True, text=True, check=True).stdout.strip()

        def create(topic, parts):
            subprocess.run([CS, "create-topic", brokers, topic, str(parts)], check=True)

        def delete(*topics):
            subprocess.run([CS, "delete-topic", brokers, *topics], capture_output=True)
    else:
        host = subprocess.Popen([CS, "mock-host"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        brokers = host.stdout.readline().strip()

        def create(topic, parts):
            host.stdin.write(f"{topic}:{parts}\n")
            host.stdin.flush()
            ans = host.stdout.readline().strip()
            if ans != "ok":
                raise SystemExit(f"mock topic {topic}: {ans}")

        def delete(*topics):
            pass  # the mock cluster goes away with the run
    log(f"{args.cluster} cluster at {brokers}")
    try:
        for settings in args.settings or ["tuned"]:
            for parts in args.partitions or [1, 6]:
                saturated = set()  # a contender saturated at a lower load is not run at a higher one
                for rate in sorted(args.rate or [1000, 10000, 50000]):
                    for shape in ("arrival", "reply"):
                        cs = [c for c in contenders if shape_of(c) == shape and c not in saturated]
                        if not cs:
                            continue
                        for e in run_cell(cs, brokers, create, delete, parts, rate, args, settings, results, save):
                            if not e["valid_rounds"] or e["p50_us"] > SATURATED_P50_US:
                                log(f"  {e['contender']} saturated at {rate} records/s: not run at higher loads")
                                saturated.add(e["contender"])
                                results["saturated"].append({"contender": e["contender"], "partitions": parts,
                                                             "settings": settings, "rate": rate})
        if args.defaults_cell and "defaults" not in (args.settings or []):
            parts, rate = (int(x) for x in args.defaults_cell.split(":"))
            for shape in ("arrival", "reply"):
                cs = [c for c in contenders if shape_of(c) == shape]
                if cs:
                    run_cell(cs, brokers, create, delete, parts, rate, args, "defaults", results, save)
        if args.sweep:
            live = [c for c in SWEEP if c in contenders]
            for rate in SWEEP_RATES:
                if not live:
                    break
                one = argparse.Namespace(**dict(vars(args), rounds=1))
                for shape in ("arrival", "reply"):
                    cs = [c for c in live if shape_of(c) == shape]
                    if not cs:
                        continue
                    for e in run_cell(cs, brokers, create, delete, 6, rate, one, "tuned", {"cells": results["sweep"]},
                                      save):
                        if not e["valid_rounds"] or e["p50_us"] > SATURATED_P50_US:
                            log(f"  {e['contender']} saturated at {rate} records/s")
                            live.remove(e["contender"])
    finally:
        save()
        if host:
            host.stdin.close()
            host.wait(timeout=60)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
