#!/usr/bin/env bash
# bench/callgrind.sh — instructions per record of the consuming process, by slope:
# (Ir at N2 records - Ir at N1 records) / (N2 - N1), every thread of the consumer process
# counted (librdkafka's threads included), so fixed costs (start, group join, close) cancel.
# usage: bench/callgrind.sh BROKERS [CONTENDER...]   (topic made and filled here, 6 partitions)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cs="$here/build/cs_bench"
brokers=$1; shift
contenders=("${@:-raw-batch raw-poll cs-auto cs-tracked-1w}")
n1=${N1:-5000}; n2=${N2:-20000}
topic=bench-cg-$$-$RANDOM
"$cs" create-topic "$brokers" "$topic" 6
"$cs" create-topic "$brokers" "$topic-replies" 6
"$cs" produce "$brokers" "$topic" 6 "$n2" >/dev/null
out=$(mktemp -d)
for c in ${contenders[@]}; do
    for n in $n1 $n2; do
        valgrind --tool=callgrind --callgrind-out-file="$out/$c.$n.out" \
            "$cs" consume "$c" "$brokers" "$topic" "cg-$c-$n-$RANDOM" "$n" "$topic-replies" >/dev/null 2>"$out/$c.$n.err" || {
            echo "{\"contender\":\"$c\",\"error\":\"run with $n records failed\"}"; continue 2; }
    done
    ir1=$(callgrind_annotate "$out/$c.$n1.out" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1; exit}')
    ir2=$(callgrind_annotate "$out/$c.$n2.out" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1; exit}')
    echo "{\"contender\":\"$c\",\"n1\":$n1,\"ir1\":$ir1,\"n2\":$n2,\"ir2\":$ir2,\"ir_per_record\":$(( (ir2 - ir1) / (n2 - n1) ))}"
done
rm -rf "$out"
