#!/usr/bin/env bash
# check_exports.sh LIBCSTREAM_SO INCLUDE_DIR [CC]
# The shared library exports exactly the public API: every function and
# variable declared in the public headers (include/cstream.h and
# include/cstream/*.h), and nothing else (no cs__* internals, no tracker).
# Two allowances: a ThreadSanitizer build also exports the C11-threads
# functions src/kafka/tsan_c11_threads.c replaces (thrd_*, mtx_*, cnd_*),
# since libc's are looked up by name; and the toolchain's own names (_init,
# _fini, ...) start with "_". Fails listing both differences.
set -euo pipefail
lib=$1 inc=$2 cc=${3:-cc}
declared=$(mktemp) exported=$(mktemp)
trap 'rm -f "$declared" "$exported"' EXIT
# The declarations as the compiler sees them, comments and macros gone: a
# name followed directly by "(" is a function declaration (function-pointer
# typedefs read "cs_err (*cs_handler_fn)(", never "name("); "extern" lines
# are the variables.
pre=$(printf '#include "cstream.h"\n#include "cstream/testing.h"\n#include "cstream/rdkafka.h"\n' |
    "$cc" -E -P -I"$inc" -x c -)
{
    grep -oE '\bcs_[a-z0-9_]+\(' <<<"$pre" | tr -d '('
    grep -E '\bextern ' <<<"$pre" | grep -oE '\bcs_[a-z0-9_]+ *;' | tr -d ' ;'
} | sort -u >"$declared"
nm -D --defined-only "$lib" | awk '{print $NF}' | grep -vE '^(_|(thrd|mtx|cnd)_)' | sort -u >"$exported"
if [ ! -s "$declared" ]; then echo "no declarations found under $inc" >&2; exit 1; fi
missing=$(comm -23 "$declared" "$exported")
extra=$(comm -13 "$declared" "$exported")
if [ -n "$missing" ]; then echo "declared in the public headers but not exported by $lib:"; sed 's/^/  /' <<<"$missing"; fi
if [ -n "$extra" ]; then echo "exported by $lib but not declared in the public headers:"; sed 's/^/  /' <<<"$extra"; fi
[ -z "$missing" ] && [ -z "$extra" ] || exit 1
echo "$(wc -l <"$declared") public symbols, exported exactly"
