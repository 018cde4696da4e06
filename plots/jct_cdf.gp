# jct_cdf.gp - CDF of job completion time, one line per policy.
# Variables (gnuplot -e): dir (experiment dir with one subdir per policy),
# policies (space-separated), out (PNG path), term (pngcairo or png), ttl (title).
set terminal term size 900,600
set output out
set datafile separator "\t"
set title ttl noenhanced
set key bottom right noenhanced
set logscale x
set grid
set xlabel "job completion time (s, log scale)"
set ylabel "fraction of jobs"
set yrange [0:1]
plot for [p in policies] dir."/".p."/jobs.tsv" skip 1 using 8:(1.0) smooth cnormal \
	with lines lw 2 title p
