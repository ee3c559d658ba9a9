"""Diagnostic, not a contender: runs bench_faststream.py with aiokafka's commit and fetch calls timed.

usage: probe.py bench_faststream.py BROKERS TOPIC GROUP N [MODE]
Wraps (monkeypatches) aiokafka's GroupCoordinator._do_commit_offsets (one OffsetCommit round trip),
Fetcher._proc_fetch_request (one Fetch round trip) and Fetcher.next_record (one record handed to
FastStream, i.e. one record handled, whether its id is < N or not), then prints to stderr
`PROBE {...}`: count, total seconds, median and max milliseconds of each. PROBE_EVENTS=K also
prints the first K timed calls; PROBE_MPFB=BYTES overrides max_partition_fetch_bytes.
Used for bench/peers/faststream/FINDINGS.md.
"""
import atexit
import collections
import json
import os
import runpy
import sys
import time

import aiokafka
from aiokafka.consumer import fetcher as fm
from aiokafka.consumer import group_coordinator as gc

if os.environ.get("PROBE_MPFB"):
    _consumer_init = aiokafka.AIOKafkaConsumer.__init__

    def _init(self, *a, **k):
        k["max_partition_fetch_bytes"] = int(os.environ["PROBE_MPFB"])
        _consumer_init(self, *a, **k)

    aiokafka.AIOKafkaConsumer.__init__ = _init

stats = collections.defaultdict(list)
events = []
T0 = time.monotonic()


def timed(cls, name, key, info=None):
    orig = getattr(cls, name)

    async def wrapper(self, *a, **k):
        t = time.monotonic()
        try:
            return await orig(self, *a, **k)
        finally:
            d = time.monotonic() - t
            stats[key].append(d)
            events.append((round(t - T0, 4), key, round(d * 1000, 1), info(self, *a) if info else None))

    setattr(cls, name, wrapper)


def fetch_info(self, assignment, node_id, request):
    return [(t, [p[0] for p in ps]) for t, ps in request.topics] if hasattr(request, "topics") else None


timed(gc.GroupCoordinator, "_do_commit_offsets", "commit", lambda self, assignment, offsets: len(offsets))
timed(fm.Fetcher, "_proc_fetch_request", "fetch", fetch_info)
timed(fm.Fetcher, "next_record", "next_record", lambda self, partitions: None)


@atexit.register
def report():
    out = {}
    for k, v in stats.items():
        v = sorted(v)
        out[k] = {"count": len(v), "total_s": round(sum(v), 3), "median_ms": round(v[len(v) // 2] * 1000, 2),
                  "max_ms": round(v[-1] * 1000, 1)}
    print("PROBE " + json.dumps(out), file=sys.stderr)
    for e in events[: int(os.environ.get("PROBE_EVENTS", "0"))]:
        print("EV", e, file=sys.stderr)


sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
