#!/usr/bin/env bash
# bench/callgrind.sh — instructions per record of the consuming process, by slope:
# (Ir at N2 records - Ir at N1 records) / (N2 - N1), every thread of the consumer process
# counted (librdkafka's threads included), so fixed costs (start, group join, close) cancel.
# usage: bench/callgrind.sh BROKERS [CONTENDER...]   (default: raw-batch raw-poll cs-auto cs-tracked-1w)
# Each size reads its own 6-partition topic of exactly that many records: on a longer topic the
# consumer would fetch and decode records past its round (the raw batch loop takes up to 10,000
# at a time) and the extra work would land in one size and not the other.
# Prints one JSON line per contender. N1, N2 override the sizes (default 5000, 20000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cs="${CS_BENCH:-$here/build/cs_bench}" # CS_BENCH: another build of it, to compare
brokers=$1; shift
if [ $# -gt 0 ]; then contenders=("$@"); else contenders=(raw-batch raw-poll cs-auto cs-tracked-1w); fi
n1=${N1:-5000}; n2=${N2:-20000}
tag=bench-cg-$$-$RANDOM
for n in "$n1" "$n2"; do
    "$cs" create-topic "$brokers" "$tag-$n" 6
    "$cs" produce "$brokers" "$tag-$n" 6 "$n" >/dev/null
done
"$cs" create-topic "$brokers" "$tag-replies" 6
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() { # Ir of the whole program from a callgrind output file
    # awk reads to the end: an early exit would SIGPIPE callgrind_annotate, which pipefail turns into a failure
    callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !seen {gsub(",","",$1); print $1; seen=1}'
}
for c in "${contenders[@]}"; do
    for n in "$n1" "$n2"; do
        BENCH_IDLE_TIMEOUT_S=120 valgrind --tool=callgrind --callgrind-out-file="$out/$c.$n.out" \
            "$cs" consume "$c" "$brokers" "$tag-$n" "cg-$c-$n-$RANDOM" "$n" "$tag-replies" >"$out/$c.$n.json" 2>"$out/$c.$n.err" || {
            echo "{\"contender\":\"$c\",\"error\":\"run with $n records failed: $(tail -c 300 "$out/$c.$n.err" | tr -d '"\n')\"}"; continue 2; }
    done
    ir1=$(total "$out/$c.$n1.out")
    ir2=$(total "$out/$c.$n2.out")
    echo "{\"contender\":\"$c\",\"n1\":$n1,\"ir1\":$ir1,\"n2\":$n2,\"ir2\":$ir2,\"ir_per_record\":$(( (ir2 - ir1) / (n2 - n1) ))}"
done
