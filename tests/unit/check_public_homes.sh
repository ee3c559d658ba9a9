#!/usr/bin/env bash
# check_public_homes.sh SOURCE_DIR BUILD_DIR
# Every public function is defined in the source file of its concept: a
# function declared in include/cstream/X.h is defined (nm: T, in the
# library's object files under BUILD_DIR) in src/**/X.c, in src/**/X_*.c, or
# in a file of a folder X (src/**/X/), so a reader who opens the header knows which file to
# open next. The exceptions are listed below, each with its reason. Fails
# listing every function defined elsewhere (or nowhere).
set -euo pipefail
root=$1 build=$2
objdir=$build/CMakeFiles/cstream_objects.dir/src

# HEADER FILE (src/-relative, no extension): allowed besides the rule.
allowed='
main.h ops/cli
main.h ops/app_metrics
rdkafka.h kafka/broker/subscription
'
# main.h is the operations surface: the command line (and the AsyncAPI
# document it prints) in cli.c, cs_app_metrics in app_metrics.c; a main.c
# would only forward to them. rdkafka.h is the escape hatch to librdkafka's
# handles: cs_sub_rdkafka_consumer reads the consumer under the subscription's
# stats_lock, which subscription.c owns.

objs=$(find "$objdir" -name '*.o' 2>/dev/null | sort)
if [ -z "$objs" ]; then
    echo "check_public_homes: no object files under $objdir: build the library first" >&2
    exit 1
fi
defs=$(for o in $objs; do
    f=${o#"$objdir"/}
    nm --defined-only "$o" | awk -v f="${f%.c.o}" '$2 == "T" {print $3, f}'
done)
bad=0 checked=0
for h in "$root"/include/cstream/*.h; do
    x=$(basename "$h" .h)
    for fn in $(grep -oE 'CS_API[^(;]*\bcs_[a-z0-9_]+\(' "$h" | grep -oE 'cs_[a-z0-9_]+\($' | tr -d '('); do
        checked=$((checked + 1))
        file=$(awk -v s="$fn" '$1 == s {print $2}' <<<"$defs")
        base=${file##*/} dirs=/${file%/*}/
        if [ -z "$file" ]; then
            echo "$fn (cstream/$x.h) is defined in no object file of the library"
            bad=1
        elif [ "$base" = "$x" ] || [ "${base#"${x}"_}" != "$base" ] || [ "${dirs#*/"$x"/}" != "$dirs" ] ||
            grep -qxF "$x.h $file" <<<"$allowed"; then
            :
        else
            echo "$fn is declared in cstream/$x.h but defined in src/$file.c (expected src/**/$x.c, $x""_*.c or src/$x/)"
            bad=1
        fi
    done
done
if [ "$checked" -eq 0 ]; then echo "no CS_API declarations under $root/include/cstream" >&2; exit 1; fi
echo "check_public_homes: $checked public functions checked"
exit $bad
