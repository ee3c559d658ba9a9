#!/usr/bin/env bash
# check_plain_include.sh CC CSTREAM_INCLUDE RDKAFKA_INCLUDE SOURCE...
# A service's own strict flags must not break on cstream's public headers,
# nor on librdkafka's as they pull them in: each SOURCE (the out-of-tree
# example) and a unit that includes every public header, <cstream/rdkafka.h>
# with librdkafka's among them, compile with plain -I (not -isystem, as a
# hand-written Makefile has it) and -std=c11 -Wall -Wextra -Werror against
# this lane's librdkafka headers (2.3.0 and later declare a `const int`
# return type that -Wextra reports).
set -euo pipefail
cc=$1 inc=$2 rdk=$3
shift 3
unit=$(mktemp --suffix=.c)
trap 'rm -f "$unit"' EXIT
printf '#include <cstream.h>\n#include <cstream/rdkafka.h>\n#include <cstream/testing.h>\nint main(void) { return 0; }\n' >"$unit"
for src in "$unit" "$@"; do
    "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -I"$inc" -I"$rdk" -fsyntax-only "$src"
    echo "ok: $src (-I$rdk)"
done
