# bars.gp - average JCT and GPU utilisation per policy, from the table that
# make-plots.sh writes (policy, avg_jct, gpu_util, gpu_busy). Variables: data
# (that table), out, term, ttl.
set terminal term size 1000,450
set output out
set datafile separator "\t"
set style fill solid 0.7 border -1
set boxwidth 0.6
set grid ytics
set xtics noenhanced
unset key
set multiplot layout 1,2 title ttl noenhanced
set title "average JCT (hours)"
set yrange [0:*]
plot data skip 1 using 0:($2/3600):xtic(1) with boxes lc 1, \
     data skip 1 using 0:($2/3600):(sprintf("%.2f", $2/3600)) with labels offset 0,0.7
set title "GPU utilisation (busy / allocated)"
set yrange [0:1.1]
plot data skip 1 using 0:3:xtic(1) with boxes lc 2, \
     data skip 1 using 0:3:(sprintf("%.2f", $3)) with labels offset 0,0.7
unset multiplot
