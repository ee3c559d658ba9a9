#!/bin/sh
# check_core_generic.sh [SOURCE_DIR]
# The core knows no Kafka: no file of src/core names Kafka's header, a
# librdkafka call or a cs_kafka_/cs_sub_ symbol, not even in a comment (what the
# core needs from a broker goes through src/core/broker.h). Fails listing the
# lines that do.
set -eu
root=${1:-$(dirname "$0")/../..}
if hits=$(grep -rnE 'kafka\.h|rd_kafka|cs_kafka_|cs_sub_' "$root/src/core"); then
    echo "src/core names Kafka (route it through src/core/broker.h):" >&2
    echo "$hits" >&2
    exit 1
fi
