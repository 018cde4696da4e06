# gpu_util.gp - cluster GPU utilisation over time (fraction of all GPUs doing
# useful work, dashed: allocated), one colour per policy. Variables as jct_cdf.gp.
set terminal term size 1000,600
set output out
set datafile separator "\t"
set title ttl noenhanced
set key outside right noenhanced
set grid
set xlabel "simulated time (hours)"
set ylabel "fraction of cluster GPUs"
set yrange [0:1.05]
plot for [i=1:words(policies)] dir."/".word(policies, i)."/timeseries.tsv" skip 1 \
	using ($1/3600):3 with lines lw 2 lc i title word(policies, i)." busy", \
     for [i=1:words(policies)] dir."/".word(policies, i)."/timeseries.tsv" skip 1 \
	using ($1/3600):2 with lines dt 2 lc i title word(policies, i)." allocated"
