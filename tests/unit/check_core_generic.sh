#!/usr/bin/env bash
# check_core_generic.sh [SOURCE_DIR [BUILD_DIR]]
# The core knows no Kafka (what it needs from a broker goes through
# src/core/broker.h), nor do base and ops, which it builds on. "The generic
# side" below is src/core, src/base and src/ops. Three checks, each failing
# with the lines that break it:
# - no file of the generic side names Kafka's header, a librdkafka call or a
#   cs_kafka_/cs_sub_ symbol, not even in a comment;
# - no file of the generic side includes a public header that includes, directly or
#   through other public headers, cstream/kafka.h or cstream/rdkafka.h (the
#   core takes the record types from cstream/record.h);
# - with BUILD_DIR: no object file of the generic side uses a symbol that an
#   object file of src/kafka defines (nm), so a call to a public function the Kafka
#   side defines is caught whatever its name.
set -euo pipefail
root=${1:-$(dirname "$0")/../..}
build=${2:-}
inc=$root/include
status=0

generic="$root/src/core $root/src/base $root/src/ops"
# shellcheck disable=SC2086
if hits=$(grep -rnE 'kafka\.h|rd_kafka|cs_kafka_|cs_sub_' $generic); then
    echo "the generic side (src/core, src/base, src/ops) names Kafka (route it through src/core/broker.h):" >&2
    echo "$hits" >&2
    status=1
fi

# The public headers a public header includes, transitively.
closure() {
    local seen=" $1 " todo=$1 h next
    while [ -n "$todo" ]; do
        next=
        for h in $todo; do
            for n in $(grep -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]+["<]cstream/[a-z0-9_]+\.h[">]' "$inc/$h" |
                grep -oE 'cstream/[a-z0-9_]+\.h'); do
                case $seen in *" $n "*) ;; *) seen="$seen$n " next="$next $n" ;; esac
            done
        done
        todo=$next
    done
    echo "$seen"
}
while IFS=: read -r file line text; do
    h=$(grep -oE 'cstream/[a-z0-9_]+\.h' <<<"$text")
    [ -f "$inc/$h" ] || continue
    c=$(closure "$h")
    case $c in
    *" cstream/kafka.h "* | *" cstream/rdkafka.h "*)
        echo "$file:$line: includes $h, which brings in the Kafka headers ($c)" >&2
        status=1
        ;;
    esac
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+["<]cstream/' $generic)

if [ -n "$build" ]; then
    objdir=$build/CMakeFiles/cstream_objects.dir/src
    generic_objs=$(find "$objdir/core" "$objdir/base" "$objdir/ops" -name '*.o' 2>/dev/null | sort)
    kafka_objs=$(find "$objdir/kafka" -name '*.o' 2>/dev/null | sort)
    if [ -z "$generic_objs" ] || [ -z "$kafka_objs" ]; then
        echo "check_core_generic: no object files under $objdir: build the library first" >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    kafka_defs=$(nm --defined-only $kafka_objs | awk 'NF == 3 && $2 ~ /[TDRB]/ {print $3}' | sort -u)
    for o in $generic_objs; do
        hits=$(nm --undefined-only "$o" | awk '{print $NF}' | sort -u | comm -12 - <(echo "$kafka_defs"))
        if [ -n "$hits" ]; then
            echo "${o#"$objdir"/}: calls into src/kafka (route it through src/core/broker.h):" $hits >&2
            status=1
        fi
    done
fi
exit $status
