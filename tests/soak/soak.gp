# soak.gp — the soak's memory curve: gnuplot -e "csv='build/soak/soak.csv'; png='docs/soak.png'" tests/soak/soak.gp
# Columns of soak.csv: seconds, vm_rss_kb, rss_anon_kb, heap_kb, acked, produced, restarting.
set datafile separator ","
set terminal pngcairo size 1000,520 font ",11"
set output png
set title "make soak: a Tracked cstream service, 1% retries, broker restarted mid-run"
set xlabel "seconds"
set ylabel "memory (MB)"
set y2label "records acked (millions)"
set ytics nomirror
set y2tics
stats csv skip 1 using ($2/1024) name "RSS" nooutput
top = RSS_max * 1.25
set yrange [0:top]
set y2range [0:*]
set key left top
set grid
set style fill transparent solid 0.25 noborder
plot csv skip 1 using 1:($7 > 0 ? top : 1/0) with filledcurves x1 lc rgb "#f4a582" title "broker restarting", \
     csv skip 1 using 1:($2/1024) with lines lw 2 lc rgb "#2166ac" title "resident set (VmRSS)", \
     csv skip 1 using 1:($4/1024) with lines lw 2 lc rgb "#b2182b" title "live heap (mallinfo2)", \
     csv skip 1 using 1:($5/1e6) axes x1y2 with lines lw 1 lc rgb "#1b7837" title "records acked"
