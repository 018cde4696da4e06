/*
 * test_trace.c - trace, cluster and profile readers (sim/trace.c, sim/cluster.c,
 * sim/profile.c): the mapping of each format, the generator, and an error naming
 * file and line for every kind of malformed input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/trace.h"
#include "testutil.h"

static char dir[64];

static int setup(void **st)
{
	(void)st;
	return gm_test_tmpdir(dir, sizeof(dir), "gm-test-trace");
}

static int teardown(void **st)
{
	(void)st;
	gm_test_rm_tree(dir);
	return 0;
}

/* Write text to dir/name and return the path (static buffer). */
static const char *put(const char *name, const char *text)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

#define OPENB_HDR                                                                                  \
	"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"        \
	"deletion_time,scheduled_time\n"

static void test_openb_mapping(void **st)
{
	(void)st;
	struct gm_trace *t;
	char err[512];
	const char *p = put("pods.csv", OPENB_HDR
			    "p0,12000,1,2,1000,,LS,Succeeded,100,400,150\n"  /* 2 GPUs, 250 s */
			    "p1,4000,1,0,0,,BE,Running,50,900,60\n"	     /* CPU only */
			    "p2,6000,1,1,460,,LS,Failed,90,200,100\n"	     /* fractional */
			    "p3,8000,1,1,1000,,LS,Pending,80,1000,\n"	     /* never ran */
			    "p4,8000,1,1,1000,,LS,Running,70,1000,75\n"	     /* censored */
			    "p5,8000,1,1,1000,,LS,Running,120,500,130\n"     /* ran, ended */
			    "p6,8000,1,1,1000,,LS,Succeeded,130,130,130\n"); /* zero length */
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), 0);
	assert_string_equal(t->format, "openb");
	assert_int_equal(t->n, 3);
	assert_int_equal(t->skipped_cpu_only, 1);
	assert_int_equal(t->skipped_never_ran, 1);
	assert_int_equal(t->skipped_censored, 1);
	assert_int_equal(t->skipped_bad_time, 1);
	assert_int_equal(t->rounded_fraction, 1);
	/* sorted by submit and shifted so the first is 0 */
	assert_true(t->jobs[0].submit == 0 && t->jobs[0].gpus == 1);
	assert_true(t->jobs[0].duration == 100 && t->jobs[0].vcpu == 6.0f);
	assert_true(t->jobs[1].submit == 10 && t->jobs[1].gpus == 2);
	assert_true(t->jobs[1].duration == 250 && t->jobs[1].vcpu == 12.0f);
	assert_true(t->jobs[2].submit == 30 && t->jobs[2].duration == 370);
	assert_int_equal(t->jobs[2].line, 7);
	assert_int_equal(t->jobs[0].cls, GM_TRACE_CLASS_AUTO);
	gm_trace_destroy(t);
	gm_trace_destroy(NULL);
}

static void test_philly_mapping(void **st)
{
	(void)st;
	struct gm_trace *t;
	char err[512];
	const char *p = put("philly.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
					  "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
					  "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
					  "2017-10-09 06:13:04,10.0,0,0,6214e9\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), 0);
	assert_string_equal(t->format, "philly");
	assert_int_equal(t->n, 2);
	assert_int_equal(t->skipped_cpu_only, 1);
	assert_true(t->jobs[0].submit == 0 && t->jobs[0].gpus == 8);
	assert_true(t->jobs[0].duration == 2951 && t->jobs[0].vcpu == 0);
	assert_true(t->jobs[1].submit == 48 * 60 + 52 && t->jobs[1].duration == 66);
	gm_trace_destroy(t);
}

static void test_gm_roundtrip_and_synth(void **st)
{
	(void)st;
	struct gm_trace *a, *b, *c;
	char err[512], path[256];
	assert_int_equal(gm_trace_load(&a, "synth:jobs=500,seed=3,ia=30,gpumix=1:3/4:1,vcpu=2/6",
				       err, sizeof(err)),
			 0);
	assert_int_equal(a->n, 500);
	size_t g4 = 0;
	for (size_t i = 0; i < a->n; i++) {
		assert_true(a->jobs[i].gpus == 1 || a->jobs[i].gpus == 4);
		assert_true(a->jobs[i].vcpu == 2.0f * a->jobs[i].gpus ||
			    a->jobs[i].vcpu == 6.0f * a->jobs[i].gpus);
		assert_true(a->jobs[i].duration >= 1);
		if (i)
			assert_true(a->jobs[i].submit >= a->jobs[i - 1].submit);
		g4 += a->jobs[i].gpus == 4;
	}
	assert_in_range(g4, 80, 170); /* ~25% of 500 */
	/* mean interarrival ~30 s */
	assert_true(a->jobs[499].submit > 500 * 30 * 0.8 && a->jobs[499].submit < 500 * 30 * 1.2);
	snprintf(path, sizeof(path), "%s/a.tsv", dir);
	assert_int_equal(gm_trace_write(a, path), 0);
	assert_int_equal(gm_trace_load(&b, path, err, sizeof(err)), 0);
	assert_string_equal(b->format, "gm");
	assert_int_equal(b->n, a->n);
	for (size_t i = 0; i < a->n; i++) {
		assert_true(a->jobs[i].submit == b->jobs[i].submit);
		assert_true(a->jobs[i].duration == b->jobs[i].duration);
		assert_true(a->jobs[i].gpus == b->jobs[i].gpus);
		assert_true(a->jobs[i].vcpu == b->jobs[i].vcpu);
	}
	/* A longer trace starts with the same jobs (one RNG stream per job). */
	assert_int_equal(gm_trace_load(&c, "synth:jobs=800,seed=3,ia=30,gpumix=1:3/4:1,vcpu=2/6",
				       err, sizeof(err)),
			 0);
	assert_memory_equal(c->jobs, a->jobs, a->n * sizeof(*a->jobs));
	gm_trace_destroy(c);
	gm_trace_destroy(b);
	gm_trace_destroy(a);
	/* load-driven interarrival: 1-GPU, fixed 100 s jobs at load 0.5 on 10 GPUs = 20 s */
	assert_int_equal(gm_trace_load(&a,
				       "synth:jobs=2000,gpumix=1:1,median=100,sigma=0,"
				       "load=0.5,gpus=10",
				       err, sizeof(err)),
			 0);
	assert_true(fabs(a->jobs[1999].submit / 2000 - 20) < 2);
	gm_trace_destroy(a);
}

/* Each malformed input gives -EBADMSG and "FILE:LINE: ..." (or the spec). */
static void test_malformed_traces(void **st)
{
	(void)st;
	static const struct {
		const char *name, *text;
		int line;
	} cases[] = {
	    {"short.csv", OPENB_HDR "p0,1000,1,1,1000,,LS,Running,1,2\n", 2},
	    {"num.csv",
	     OPENB_HDR "p0,1000,1,1,1000,,LS,Running,1,5,1\np1,x,1,1,1000,,LS,Running,1,2,1\n", 3},
	    {"frac.csv", OPENB_HDR "p0,1000,1,1.5,1000,,LS,Running,1,2,1\n", 2},
	    {"time.csv", OPENB_HDR "p0,1000,1,1,1000,,LS,Running,1,zz,1\n", 2},
	    {"sched.csv", OPENB_HDR "p0,1000,1,1,1000,,LS,Running,1,5,q\n", 2},
	    {"multigpu.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n", 1},
	    {"philly1.csv",
	     "timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-01 00:00:00,1,1,1,c\n", 2},
	    {"philly2.csv",
	     "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,1,-1,1,c\n", 2},
	    {"philly3.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,1\n",
	     2},
	    {"gm.tsv", "# goldminer-trace v1\n0\t10\t1\t4\t-1\n5\t0\t1\t4\t-1\n", 3},
	    {"gm2.tsv", "# goldminer-trace v1\n0\t10\t1\t4\n", 2},
	    /* found by tests/fuzz/fuzz_trace: numbers too large for the job fields */
	    {"gm3.tsv", "# goldminer-trace v1\n0\t10\t1\t4\t333333333330\n", 2},
	    {"gm4.tsv", "# goldminer-trace v1\n0\t10\t1\t1e300\t0\n", 2},
	    {"gm5.tsv", "# goldminer-trace v1\n0\t10\t1\t4\t32\n", 2},
	    {"huge.csv", OPENB_HDR "p0,1000,1,5e9,1000,,LS,Running,1,5,1\n", 2},
	    {"hugecpu.csv", OPENB_HDR "p0,1e300,1,1,1000,,LS,Running,1,5,1\n", 2},
	    {"negsched.csv", OPENB_HDR "p0,1000,1,1,1000,,LS,Running,1,1e308,-1e308\n", 2},
	    {"philly4.csv",
	     "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,1,5e9,1,c\n", 2},
	    {"unknown.csv", "a,b,c\n", 1},
	    {"empty.csv", "", 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gm_trace *t = NULL;
		char err[512], want[300];
		const char *p = put(cases[i].name, cases[i].text);
		assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
		assert_null(t);
		snprintf(want, sizeof(want), "%s:%d: ", p, cases[i].line);
		if (strncmp(err, want, strlen(want)))
			fail_msg("case %s: got '%s', want prefix '%s'", cases[i].name, err, want);
	}
	struct gm_trace *t = NULL;
	char err[512];
	assert_int_equal(gm_trace_load(&t, "/nonexistent/trace.csv", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/trace.csv"));
	assert_int_equal(gm_trace_load(&t, "synth:jobs=10,bogus=1", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_trace_load(&t, "synth:jobs", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_trace_load(&t, "synth:gpumix=1:x", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_trace_load(&t, "synth:jobs=0", err, sizeof(err)), -EBADMSG);
	struct gm_trace_synth_opts o;
	gm_trace_synth_defaults(&o);
	o.gpu_k = 0;
	assert_int_equal(gm_trace_synth(&t, &o), -EINVAL);
	struct gm_trace empty = {0};
	assert_int_equal(gm_trace_write(t ? t : &empty, "/nonexistent/x"), -ENOENT);
}

static void test_clusters(void **st)
{
	(void)st;
	struct gm_cluster *c;
	char err[512];
	assert_int_equal(gm_cluster_load(&c, "8x(8gpu,96cpu)+2x(0gpu,64cpu)", err, sizeof(err)), 0);
	assert_int_equal(c->n, 10);
	assert_int_equal(c->total_gpus, 64);
	assert_int_equal(c->total_cpus, 8 * 96 + 128);
	assert_int_equal(c->max_gpus, 8);
	assert_int_equal(c->gpus[9], 0);
	gm_cluster_destroy(c);
	gm_cluster_destroy(NULL);

	const char *p = put("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
					 "n0,96000,1,8,V100\nn1,32000,1,0,\nn2,64500,1,2,P100\n");
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), 0);
	assert_int_equal(c->n, 3);
	assert_int_equal(c->total_gpus, 10);
	assert_int_equal(c->cpus[2], 64); /* whole vCPUs */
	gm_cluster_destroy(c);

	p = put("pai.csv", "m0,V100,96,512,8\nm1,CPU,96,512,0\n");
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), 0);
	assert_int_equal(c->n, 2);
	assert_int_equal(c->total_gpus, 8);
	assert_int_equal(c->total_cpus, 192);
	gm_cluster_destroy(c);

	static const struct {
		const char *name, *text;
		int line;
	} bad[] = {
	    {"n1.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1,8\n", 2},
	    {"n2.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1,8,V\nn1,x,1,8,V\n", 3},
	    {"n3.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1,2.5,V\n", 2},
	    {"p1.csv", "m0,V100,96,512\n", 1},
	    {"p2.csv", "m0,V100,96,512,8\nm1,CPU,-4,512,0\n", 2},
	    {"cpuonly.csv", "m0,CPU,96,512,0\n", 0},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[300];
		c = NULL;
		p = put(bad[i].name, bad[i].text);
		assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), -EBADMSG);
		assert_null(c);
		if (bad[i].line)
			snprintf(want, sizeof(want), "%s:%d: ", p, bad[i].line);
		else
			snprintf(want, sizeof(want), "%s: ", p);
		if (strncmp(err, want, strlen(want)))
			fail_msg("case %s: got '%s', want prefix '%s'", bad[i].name, err, want);
	}
	assert_int_equal(gm_cluster_load(&c, "8x(8gpu)", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_cluster_load(&c, "8x(8gpu,96cpu)+", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_cluster_load(&c, "0x(8gpu,96cpu)", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_cluster_load(&c, "/nonexistent/nodes.csv", err, sizeof(err)), -ENOENT);
}

/* Cores per node in a shape: fractions, after the memory, each shape its own. */
static void test_cluster_cores_per_node(void **st)
{
	(void)st;
	struct gm_cluster *c;
	char err[512];
	assert_int_equal(gm_cluster_load(&c,
					 "1x(4gpu,4cpu,0.25cores)+2x(1gpu,4cpu,500gb,0.75cores)"
					 "+1x(1gpu,8cpu)",
					 err, sizeof(err)),
			 0);
	assert_int_equal(c->n, 4);
	assert_true(c->cores[0] == 0.25 && c->cores[1] == 0.75 && c->cores[2] == 0.75);
	assert_true(c->cores[3] == 0); /* not given: every vCPU is a core */
	assert_int_equal(c->mem[1], 500);
	assert_int_equal(c->mem[0], 0);
	gm_cluster_destroy(c);
	assert_int_equal(gm_cluster_load(&c, "1x(1gpu,1cpu,2cores)", err, sizeof(err)), 0);
	assert_true(c->cores[0] == 2);
	gm_cluster_destroy(c);
	static const char *const bad[] = {
	    "1x(1gpu,1cpu,0cores)",	    "1x(1gpu,1cpu,0.0cores)",
	    "1x(1gpu,1cpu,0.1234567cores)", "1x(1gpu,1cpu,0.25)",
	    "1x(1gpu,1cpu,.5cores)",	    "1x(1gpu,1cpu,1.cores)",
	    "1x(1gpu,1cpu,0.5cores,5gb)",   "1x(1gpu,1cpu,2000000cores)",
	    "1x(1gpu,1cpu,-1cores)",	    "1x(1gpu,1cpu,0.5cores",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(gm_cluster_load(&c, bad[i], err, sizeof(err)), -EBADMSG);
		if (!strstr(err, "cores > 0"))
			fail_msg("%s: '%s' does not give the range of cores", bad[i], err);
	}
}

static void test_profile(void **st)
{
	(void)st;
	struct gm_profile a, b;
	char err[512];
	gm_profile_default(&a);
	assert_true(a.n >= 5);
	assert_true(gm_profile_find(&a, "resnet50") >= 0);
	assert_int_equal(gm_profile_find(&a, "nope"), -1);
	/* The committed table and the built-in copy agree (run from the repo root). */
	if (access("traces/profile-pytorch.tsv", R_OK) == 0) {
		assert_int_equal(
		    gm_profile_load(&b, "traces/profile-pytorch.tsv", err, sizeof(err)), 0);
		assert_int_equal(a.n, b.n);
		for (int i = 0; i < a.n; i++) {
			assert_string_equal(a.c[i].name, b.c[i].name);
			assert_true(a.c[i].gpu_rate == b.c[i].gpu_rate);
			assert_true(a.c[i].cpu_rate == b.c[i].cpu_rate);
			assert_true(a.c[i].share == b.c[i].share);
			assert_string_equal(a.c[i].gpu_source, b.c[i].gpu_source);
			assert_string_equal(a.c[i].cpu_source, b.c[i].cpu_source);
		}
	}
	/*
	 * The data-plane profile: the built-in table with the image classes' cpu_rate
	 * measured on goldminer's data plane (several times the PyTorch-era one), the
	 * rest equal.
	 */
	if (access("traces/profile-goldminer.tsv", R_OK) == 0) {
		assert_int_equal(
		    gm_profile_load(&b, "traces/profile-goldminer.tsv", err, sizeof(err)), 0);
		/* rows past the built-in ones: pipelines measured for reference, never
		 * drawn (share 0), so the mix is the built-in one */
		assert_true(b.n > a.n);
		for (int i = a.n; i < b.n; i++) {
			assert_true(b.c[i].share == 0);
			assert_true(
			    !strncmp(b.c[i].cpu_source, "measured: goldminer profile ", 28));
			assert_true(!strncmp(b.c[i].gpu_source, "assumption: ", 12));
		}
		for (int i = 0; i < a.n; i++) {
			bool image =
			    !strcmp(a.c[i].name, "resnet50") || !strcmp(a.c[i].name, "cv-light");
			assert_string_equal(a.c[i].name, b.c[i].name);
			assert_true(a.c[i].gpu_rate == b.c[i].gpu_rate);
			assert_true(a.c[i].share == b.c[i].share);
			if (!image) {
				assert_true(a.c[i].cpu_rate == b.c[i].cpu_rate);
				continue;
			}
			/* the C data plane against torchvision's DataLoader, both measured:
			 * several times faster (8.8x on 2026-12-01) */
			assert_true(b.c[i].cpu_rate > 2 * a.c[i].cpu_rate);
			assert_true(
			    !strncmp(b.c[i].cpu_source, "measured: goldminer profile ", 28));
		}
	}
	/* every shipped rate says what it is: checked, measured or an assumption */
	static const char *const shipped[] = {"traces/profile-pytorch.tsv",
					      "traces/profile-goldminer.tsv"};
	for (size_t f = 0; f < sizeof(shipped) / sizeof(shipped[0]); f++) {
		if (access(shipped[f], R_OK) != 0)
			continue;
		assert_int_equal(gm_profile_load(&b, shipped[f], err, sizeof(err)), 0);
		for (int i = 0; i < b.n; i++)
			for (int k = 0; k < 2; k++) {
				const char *src = k ? b.c[i].cpu_source : b.c[i].gpu_source;
				if (strncmp(src, "checked: ", 9) &&
				    strncmp(src, "measured: ", 10) &&
				    strncmp(src, "assumption: ", 12))
					fail_msg("%s: %s %s source says neither checked, measured "
						 "nor assumption: %.60s",
						 shipped[f], b.c[i].name, k ? "cpu" : "gpu", src);
			}
	}
	gm_profile_default(&b);
	for (int i = 0; i < b.n; i++)
		assert_true(!strncmp(b.c[i].gpu_source, "checked: ", 9) ||
			    !strncmp(b.c[i].gpu_source, "assumption: ", 12));
	const char *p = put("prof.tsv", "# c\nx\t100\t10\t1\tmade up\t\n");
	assert_int_equal(gm_profile_load(&b, p, err, sizeof(err)), 0);
	assert_int_equal(b.n, 1);
	assert_true(b.c[0].gpu_rate == 100 && b.c[0].cpu_rate == 10);
	static const struct {
		const char *text;
		int line;
	} bad[] = {
	    {"x\t100\t10\t1\n", 1},
	    {"# c\nx\t100\t0\t1\ts\ts\n", 2},
	    {"x\t100\t10\t1\ts\ts\nx\t100\t10\t1\ts\ts\n", 2},
	    {"x\t1e\t10\t1\ts\ts\n", 1},
	    {"x\t100\t10\t1\ts\ts\textra\n", 1},
	    {"x\t100\t10\t0\ts\ts\n", 1},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[300];
		p = put("bad.tsv", bad[i].text);
		assert_int_equal(gm_profile_load(&b, p, err, sizeof(err)), -EBADMSG);
		snprintf(want, sizeof(want), "%s:%d: ", p, bad[i].line);
		if (strncmp(err, want, strlen(want)))
			fail_msg("case %zu: got '%s', want prefix '%s'", i, err, want);
	}
	assert_int_equal(gm_profile_load(&b, "/nonexistent/p.tsv", err, sizeof(err)), -ENOENT);
}

/* The public traces, when the shared copy is there: the counts traces/README.md gives. */
static void test_public_traces(void **st)
{
	(void)st;
	const char *root = "../shared/traces";
	char p[256], err[512];
	struct gm_cluster *c;
	struct gm_trace *t;

	snprintf(p, sizeof(p), "%s/alibaba-gpu-v2023/openb_pod_list_default.csv", root);
	if (access(p, R_OK))
		skip();
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), 0);
	assert_int_equal(t->n, 6171);
	assert_int_equal(t->skipped_cpu_only, 1088);
	assert_int_equal(t->skipped_never_ran, 861);
	assert_int_equal(t->skipped_censored, 32);
	assert_int_equal(t->rounded_fraction, 2573);
	gm_trace_destroy(t);
	snprintf(p, sizeof(p), "%s/alibaba-gpu-v2023/openb_pod_list_multigpu20.csv", root);
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
	snprintf(p, sizeof(p), "%s/alibaba-gpu-v2023/openb_node_list_all_node.csv", root);
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), 0);
	assert_int_equal(c->n, 1523);
	assert_int_equal(c->total_gpus, 6212);
	assert_int_equal(c->total_cpus, 125514);
	gm_cluster_destroy(c);
	snprintf(p, sizeof(p), "%s/alibaba-gpu-v2020/pai_machine_spec.csv", root);
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), 0);
	assert_int_equal(c->n, 1897);
	assert_int_equal(c->total_gpus, 6742);
	assert_int_equal(c->total_cpus, 156576);
	gm_cluster_destroy(c);
	snprintf(p, sizeof(p), "%s/philly-pollux/philly.csv", root);
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), 0);
	assert_int_equal(t->n, 82247);
	for (size_t i = 1; i < t->n; i++)
		assert_true(t->jobs[i].submit >= t->jobs[i - 1].submit);
	gm_trace_destroy(t);
}

/*
 * Counts beyond 32 bits (and other out-of-range numbers) are refused with the
 * accepted range; before, sscanf's %u wrapped 4294967304 GPUs to 8.
 */
static void test_cluster_ranges(void **st)
{
	(void)st;
	struct gm_cluster *c = NULL;
	char err[512];
	static const char *const bad[] = {
	    "1x(4294967304gpu,8cpu)", "1x(8gpu,4294967297cpu)", "4294967297x(1gpu,1cpu)",
	    "1x(1025gpu,8cpu)",	      "1x(8gpu,1000001cpu)",	"1x(-8gpu,8cpu)",
	    "1x(8gpu,8cpu)+",	      "1x(8gpu,0cpu)",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (gm_cluster_load(&c, bad[i], err, sizeof(err)) != -EBADMSG)
			fail_msg("%s: accepted", bad[i]);
		assert_non_null(strstr(err, bad[i]));
	}
	assert_non_null(strstr(err, "no vCPUs"));
	assert_int_equal(gm_cluster_load(&c, "1x(4294967304gpu,8cpu)", err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "GPUs 0..1024"));
	/* a node list: the range and the line */
	const char *p = put("big.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
				       "n0,96000,1,8,V100\nn1,96000,1,4294967304,V100\n");
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, ":3: GPU count 4294967304 is not a whole number in 0..1024"));
	p = put("bigcpu.csv", "m0,V100,4294967297,512,8\n");
	assert_int_equal(gm_cluster_load(&c, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, ":1: 4294967297 vCPUs is beyond the accepted 0..1000000"));
	/* the edges are accepted */
	assert_int_equal(
	    gm_cluster_load(&c, "2x(1024gpu,1000000cpu)+1x(0gpu,0cpu)", err, sizeof(err)), 0);
	assert_int_equal(c->total_gpus, 2048);
	gm_cluster_destroy(c);
}

/* Durations and spans of submits beyond 100 years are refused with the line. */
static void test_time_bounds(void **st)
{
	(void)st;
	struct gm_trace *t = NULL;
	char err[512];
	const char *p =
	    put("dur.tsv", "# goldminer-trace v1\n0\t10\t1\t2\t-1\n0\t1e300\t1\t2\t-1\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "dur.tsv:3: "));
	assert_non_null(strstr(err, "100 years"));
	p = put("span.tsv", "# goldminer-trace v1\n5\t10\t1\t2\t-1\n4e9\t10\t1\t2\t-1\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "span.tsv:3: submitted"));
	p = put("philly-long.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
				   "2017-10-01 00:00:00,4e9,1,1,x\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "philly-long.csv:2: duration"));
	p = put("philly-span.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
				   "2017-10-01 00:00:00,10,1,1,x\n9999-10-01 00:00:00,10,1,1,x\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "philly-span.csv:3: "));
	p = put("edge.tsv", "# goldminer-trace v1\n0\t3155760000\t1\t2\t-1\n"
			    "3155760000\t1\t1\t2\t-1\n");
	assert_int_equal(gm_trace_load(&t, p, err, sizeof(err)), 0);
	gm_trace_destroy(t);
}

/*
 * synth:k=v parameters out of range, or ones that made NaN or infinite submit
 * times (sigma=1e308, an infinite weight, a load that gives an interarrival past
 * 100 years), are refused with the range; before, several loaded.
 */
static void test_synth_ranges(void **st)
{
	(void)st;
	struct gm_trace *t = NULL;
	char err[512];
	static const char *const bad[] = {
	    "synth:sigma=1e308",     "synth:gpumix=1:inf",
	    "synth:gpumix=1:nan",    "synth:gpumix=4294967297:1",
	    "synth:gpumix=1:0",	     "synth:jobs=1e30",
	    "synth:jobs=1.5",	     "synth:seed=18446744073709551616",
	    "synth:seed=-1",	     "synth:load=1e-300",
	    "synth:ia=1e9,jobs=100", "synth:vcpu=1e300",
	    "synth:median=1e300",    "synth:max=1e300",
	    "synth:gpus=1e300",	     "synth:jobs=2,ia=1e300",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = NULL;
		err[0] = 0;
		if (gm_trace_load(&t, bad[i], err, sizeof(err)) != -EBADMSG)
			fail_msg("%s: accepted", bad[i]);
		assert_null(t);
		assert_non_null(strstr(err, bad[i]));
	}
	assert_int_equal(gm_trace_load(&t, "synth:sigma=11", err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "sigma=11: the accepted range is 0..10"));
	assert_int_equal(gm_trace_load(&t, "synth:load=1e-300", err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "raise load or gpus"));
	/* the whole 64-bit seed range, and whole numbers written as reals, are accepted */
	assert_int_equal(
	    gm_trace_load(&t, "synth:jobs=1e1,seed=18446744073709551615", err, sizeof(err)), 0);
	assert_int_equal(t->n, 10);
	for (size_t i = 0; i < t->n; i++)
		assert_true(isfinite(t->jobs[i].submit) && isfinite(t->jobs[i].duration));
	gm_trace_destroy(t);
	/* the API refuses what the spec refuses */
	struct gm_trace_synth_opts o;
	gm_trace_synth_defaults(&o);
	o.gpu_p[0] = INFINITY;
	assert_int_equal(gm_trace_synth(&t, &o), -EINVAL);
	gm_trace_synth_defaults(&o);
	o.jobs = (size_t)GM_TRACE_MAX_JOBS + 1;
	assert_int_equal(gm_trace_synth(&t, &o), -EINVAL);
}

/* Profile rates outside 1e-6..1e12 samples/s are refused with the line. */
static void test_profile_ranges(void **st)
{
	(void)st;
	static struct gm_profile prof;
	char err[512];
	static const char *const bad[] = {"a\t1e300\t10\t1\t\t\n", "a\t100\t1e-300\t1\t\t\n",
					  "a\t100\t10\t1e300\t\t\n", "a\t100\tnan\t1\t\t\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = put("pr.tsv", bad[i]);
		assert_int_equal(gm_profile_load(&prof, p, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "pr.tsv:1: "));
		assert_non_null(strstr(err, "1e-06..1e+12"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_openb_mapping),
	    cmocka_unit_test(test_philly_mapping),
	    cmocka_unit_test(test_gm_roundtrip_and_synth),
	    cmocka_unit_test(test_malformed_traces),
	    cmocka_unit_test(test_clusters),
	    cmocka_unit_test(test_cluster_cores_per_node),
	    cmocka_unit_test(test_profile),
	    cmocka_unit_test(test_public_traces),
	    cmocka_unit_test(test_cluster_ranges),
	    cmocka_unit_test(test_time_bounds),
	    cmocka_unit_test(test_synth_ranges),
	    cmocka_unit_test(test_profile_ranges),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
