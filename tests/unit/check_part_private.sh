#!/bin/sh
# check_part_private.sh [SOURCE_DIR]
# A partition's state (struct cs_part, src/core/partition_internal.h) is
# private to src/core: every other file reaches it through the functions of
# partition.h and pipeline.h. Fails, listing the lines, if a C file outside
# src/core includes partition_internal.h or names a cs_part field through
# `->`. The compiler already refuses a field of the opaque type; this check
# also catches a file that includes the private header to get at them.
#
# The field names are read from the struct itself, so a new field is covered
# without touching this script. A name that other structs use too (below,
# SHARED) is checked only after something named like a partition (`part->`,
# `fp->part->`, `d->part->`, `other_part->`); every other field name is checked
# after any `->`.
set -eu
root=${1:-$(dirname "$0")/../..}
private="$root/src/core/partition_internal.h"
# Field names of other structs (deliveries, records, cs_part_metrics,
# fetch_part, the producer's) that are not cs_part's business.
SHARED="topic partition lock pipe held paused out_of_memory assigned refs stall_offset"

[ -f "$private" ] || { echo "check_part_private: $private not found" >&2; exit 1; }
# The member names of `struct cs_part { ... };`, comments removed.
fields=$(awk '/^struct cs_part \{/ { on = 1; next } on && /^\};/ { on = 0 } on' "$private" |
    sed -e 's|/\*.*\*/||g' -e 's|/\*.*||' -e 's|^ *\*.*||' -e 's|//.*||' | tr ';' '\n' |
    grep -oE '[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])? *(,|$)' | sed -E -e 's/\[.*//' -e 's/[ ,]//g' | sort -u)
[ -n "$fields" ] || { echo "check_part_private: no fields read from $private" >&2; exit 1; }

bare=
for f in $fields; do
    case " $SHARED " in *" $f "*) ;; *) bare="$bare${bare:+|}$f" ;; esac
done
all=$(echo $fields | tr ' ' '|')

files=$(find "$root/src" "$root/tests" "$root/bench" "$root/examples" "$root/include" "$root/fuzz" \
    -path "$root/src/core" -prune -o -path "$root/bench/peers" -prune -o -path "$root/bench/build" -prune -o \
    -type f \( -name '*.c' -o -name '*.h' \) -print 2>/dev/null | sort)

status=0
if hits=$(echo "$files" | xargs grep -nE '#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?partition_internal\.h' /dev/null); then
    echo "partition_internal.h is private to src/core; use partition.h:" >&2
    echo "$hits" >&2
    status=1
fi
if hits=$(echo "$files" | xargs grep -nE "(->[[:space:]]*($bare)\\b)|([A-Za-z_]*part[[:space:]]*->[[:space:]]*($all)\\b)" /dev/null); then
    echo "a cs_part field named outside src/core; use partition.h's functions:" >&2
    echo "$hits" >&2
    status=1
fi
exit $status
