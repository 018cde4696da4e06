# bars.gp - average JCT and GPU utilisation per policy with their 95% intervals,
# from the table make-plots.sh writes (policy, avg_jct, its half-width, gpu_util,
# its half-width; the mean over the seeds where the experiment has them). Variables:
# data (that table), out, term, ttl.
set terminal term size 1100,520 font ",11"
set output out
set datafile separator "\t"
set style fill solid 0.7 border -1
set boxwidth 0.6
set grid ytics
set xtics noenhanced rotate by -30 left font ",11"
set bmargin 6
unset key
set multiplot layout 1,2 title ttl noenhanced
set title "average JCT (hours)"
set yrange [0:*]
plot data skip 1 using 0:($2/3600):xtic(1) with boxes lc rgb "#1f77b4", \
     data skip 1 using 0:($2/3600):($3/3600) with yerrorbars lc rgb "black" pt -1, \
     data skip 1 using 0:(($2+$3)/3600):(sprintf("%.1f", $2/3600)) with labels offset 0,0.8
set title "GPU utilisation (busy / allocated)"
set yrange [0:1.15]
plot data skip 1 using 0:4:xtic(1) with boxes lc rgb "#2ca02c", \
     data skip 1 using 0:4:5 with yerrorbars lc rgb "black" pt -1, \
     data skip 1 using 0:($4+$5):(sprintf("%.2f", $4)) with labels offset 0,0.8
unset multiplot
