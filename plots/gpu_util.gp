# gpu_util.gp - cluster GPU utilisation over the contended window, one panel per
# policy: the fraction of all GPUs doing useful work (solid) and allocated
# (dashed), with the reference policy's busy fraction (static) in grey behind each
# panel. Variables (gnuplot -e): dir, policies, out, term, ttl as jct_cdf.gp, x0,
# x1 (the window in hours, make-plots.sh: the middle 90% of submits) and ref.
n = words(policies)
set terminal term size 1000, 170 * n + 80
set output out
set datafile separator "\t"
set grid
set yrange [0:1.35]
set ytics 0, 0.5, 1
set xrange [x0:x1]
set key top right horizontal noenhanced samplen 2 font ",9"
set lmargin 10
set multiplot layout n, 1 title ttl noenhanced
do for [i=1:n] {
	p = word(policies, i)
	set format x (i == n ? "%g" : "")
	set xlabel (i == n ? "simulated time (hours)" : "")
	set ylabel p noenhanced
	plot dir."/".ref."/timeseries.tsv" skip 1 using ($1/3600):3 with lines lw 1 lc rgb "#bbbbbb" \
		title (p eq ref ? "" : ref." busy"), \
	     dir."/".p."/timeseries.tsv" skip 1 using ($1/3600):3 with lines lw 2 lc rgb "#1f77b4" \
		title "busy", \
	     dir."/".p."/timeseries.tsv" skip 1 using ($1/3600):2 with lines dt 2 lc rgb "#d62728" \
		title "allocated"
}
unset multiplot
