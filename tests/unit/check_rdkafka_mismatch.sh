#!/usr/bin/env bash
# A service built against newer librdkafka headers than the library it loads
# at run time is refused at cs_app_start, naming both versions (the current
# lane: built with .cache/librdkafka/<version>, run here with the system's
# older librdkafka put first by LD_LIBRARY_PATH, which overrides RUNPATH).
#   check_rdkafka_mismatch.sh DEMO OLD_LIBDIR OLD_VERSION BUILT_VERSION
set -uo pipefail
demo="$1" old_libdir="$2" old="$3" built="$4"
out=$(LD_LIBRARY_PATH="$old_libdir" CSTREAM_LOG_LEVEL=error timeout 60 "$demo" 2>&1)
status=$?
if [ $status -eq 0 ]; then
    echo "FAIL: $demo ran on librdkafka $old although it was built with $built headers" >&2
    exit 1
fi
want="librdkafka $old, older than the librdkafka $built headers"
if ! grep -qF "$want" <<<"$out"; then
    echo "FAIL: exit $status without \"$want\"; it printed:" >&2
    echo "$out" | tail -20 >&2
    exit 1
fi
echo "refused as it should (exit $status): $(grep -F "$want" <<<"$out" | head -1)"
