"""FastStream (Kafka broker, aiokafka) contender of cstream's benchmark harness.

usage: bench_faststream.py BROKERS TOPIC GROUP N [MODE]
MODE manual-ack (default; contender faststream-manual-ack): AckPolicy.MANUAL and
`await msg.ack()` per record, which commits the consumed positions of every assigned partition
and waits for the broker's answer (KafkaAckableMessage.ack -> AIOKafkaConsumer.commit).
MODE default-ack (contender faststream-default-ack): the subscriber's default policy,
AckPolicy.ACK_FIRST for Kafka, i.e. aiokafka's auto-commit (enable_auto_commit=True, every
5 s in the background) and no commit per record; the handler does not call ack().
Decodes each record into a pydantic model (FastStream's own JSON decoding), marks its id,
stops once ids 0..N-1 were all seen; prints one JSON line like `cs_bench consume`.
On a topic of several partitions aiokafka hands over a whole fetched batch of one partition
(~1,900 records of cs_bench's producer) before the next, so a small N handles far more records
than N: see FINDINGS.md.
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


MODES = ("manual-ack", "default-ack")


async def main():
    brokers, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    mode = sys.argv[5] if len(sys.argv) > 5 else "manual-ack"
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    manual = mode == "manual-ack"
    # default-ack passes no ack_policy at all, so it measures whatever FastStream defaults to
    policy = {"ack_policy": AckPolicy.MANUAL} if manual else {}
    idle = 30.0
    seen = bytearray(n)
    st = {"distinct": 0, "dups": 0, "t0": None, "t1": None, "handled": 0}
    done = asyncio.Event()
    broker = KafkaBroker(brokers, logger=None)

    @broker.subscriber(topic, group_id=group, auto_offset_reset="earliest", **policy,
                       session_timeout_ms=6000, partition_assignment_strategy=(RangePartitionAssignor,))
    async def handle(p: Payment, msg: KafkaMessage):
        if st["t0"] is None:
            st["t0"] = time.monotonic()
        st["handled"] += 1
        if p.id < n:
            if seen[p.id]:
                st["dups"] += 1
            else:
                seen[p.id] = 1
                st["distinct"] += 1
                if st["distinct"] == n:
                    st["t1"] = time.monotonic()
                    st["handled_at_end"] = st["handled"]
                    done.set()
        if manual:
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
    print(json.dumps({"contender": f"faststream-{mode}", "records": n, "distinct": st["distinct"],
                      "duplicates": st["dups"], "bad": 0, "seconds": round(secs, 6),
                      "handled": st.get("handled_at_end", st["handled"]),
                      # Records HANDLED per second: aiokafka hands out one partition's fetched
                      # batch (~1,900 records) before the next partition's, so a round of n ids
                      # handles more than n records (FINDINGS.md); n / seconds would understate it.
                      "records_per_s": round(st["handled_at_end"] / secs, 1) if valid and secs > 0 else 0, "allocs": -1,
                      "peak_rss_kb": peak_rss_kb(), "total_seconds": round(total, 3), "valid": valid}))
    sys.exit(0 if valid else 3)


asyncio.run(main())
