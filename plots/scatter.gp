# scatter.gp - per seed, proportional's average JCT against goldminer's (hours);
# above the diagonal goldminer is faster in that seed. Variables: data (the
# table make-plots.sh joins from a --per-seed TSV: seed, goldminer, proportional,
# in hours), out, term, ttl.
set terminal term size 700,650 font ",11"
set output out
set datafile separator "\t"
set title ttl noenhanced
set grid
set key top left noenhanced
set xlabel "goldminer: average JCT (hours)"
set ylabel "proportional: average JCT (hours)"
set size square
stats data skip 1 using 2:3 nooutput
m = (STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y) * 1.05
set xrange [0:m]
set yrange [0:m]
plot data skip 1 using 2:3 with points pt 7 ps 1.2 lc rgb "#1f77b4" title "one seed (above the line: goldminer faster)", \
     x with lines dt 2 lc rgb "#888888" title "equal"
