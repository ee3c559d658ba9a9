"""FastStream (Kafka broker, aiokafka) contender of cstream's benchmark harness.

usage: bench_faststream.py BROKERS TOPIC GROUP N
Manual ack: AckPolicy.MANUAL and `await msg.ack()` per record (commits that offset).
Decodes each record into a pydantic model (FastStream's own JSON decoding), marks its id,
stops once ids 0..N-1 were all seen; prints one JSON line like `cs_bench consume`.
"""
import asyncio
import json
import sys
import time

from faststream import AckPolicy, FastStream
from faststream.kafka import KafkaBroker, KafkaMessage
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from pydantic import BaseModel


class Payment(BaseModel):
    id: int
    amount_cents: int
    memo: str


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


async def main():
    brokers, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    idle = 30.0
    seen = bytearray(n)
    st = {"distinct": 0, "dups": 0, "t0": None, "t1": None}
    done = asyncio.Event()
    broker = KafkaBroker(brokers, logger=None)

    @broker.subscriber(topic, group_id=group, auto_offset_reset="earliest", ack_policy=AckPolicy.MANUAL,
                       session_timeout_ms=6000, partition_assignment_strategy=(RangePartitionAssignor,))
    async def handle(p: Payment, msg: KafkaMessage):
        if st["t0"] is None:
            st["t0"] = time.monotonic()
        if p.id < n:
            if seen[p.id]:
                st["dups"] += 1
            else:
                seen[p.id] = 1
                st["distinct"] += 1
                if st["distinct"] == n:
                    st["t1"] = time.monotonic()
                    done.set()
        await msg.ack()

    start = time.monotonic()
    async with broker:
        await broker.start()
        last, last_t = 0, time.monotonic()
        while not done.is_set():
            try:
                await asyncio.wait_for(done.wait(), 0.5)
            except asyncio.TimeoutError:
                pass
            if st["distinct"] != last:
                last, last_t = st["distinct"], time.monotonic()
            elif time.monotonic() - last_t > idle:
                print(f"no progress at {last} of {n}", file=sys.stderr)
                break
    total = time.monotonic() - start
    valid = st["distinct"] == n
    secs = (st["t1"] - st["t0"]) if valid else 0.0
    print(json.dumps({"contender": "faststream-manual-ack", "records": n, "distinct": st["distinct"],
                      "duplicates": st["dups"], "bad": 0, "seconds": round(secs, 6),
                      "records_per_s": round(n / secs, 1) if valid and secs > 0 else 0, "allocs": -1,
                      "peak_rss_kb": peak_rss_kb(), "total_seconds": round(total, 3), "valid": valid}))
    sys.exit(0 if valid else 3)


asyncio.run(main())
