# bimodal.gp - per seed of the CPU-short openb run, the vCPUs per GPU its class
# draw needs (GPU-time weighted) against goldminer's and proportional's average
# JCT; the nodes' vCPUs per GPU dotted. Variables: data (experiments.sh's demand
# TSV: seed, demand, goldminer, proportional), out, term, vpg (the nodes' vCPUs per
# GPU), cluster (its shape, for the title).
set terminal term size 900,560 font ",11"
set output out
set datafile separator "\t"
set title cluster.", one point per seed: the vCPUs the class draw needs, and the JCT" font ",11"
set grid
set key top left
set xlabel "vCPUs per GPU the seed's class draw needs (GPU-time weighted)"
set ylabel "average JCT (hours)"
set yrange [0:*]
set arrow from vpg, graph 0 to vpg, graph 1 nohead dt 3 lc rgb "black"
set label "vCPUs per GPU on the nodes" at vpg, graph 0.95 offset 0.5,0 font ",9"
plot data skip 1 using 2:3 with points pt 7 ps 1.3 lc rgb "#1f77b4" title "goldminer", \
     data skip 1 using 2:4 with points pt 5 ps 1.1 lc rgb "#ff7f0e" title "proportional"
