/*
 * run.c - goldminer run: a training script, unchanged, with goldminer serving its
 * DataLoaders.
 *
 *   goldminer run -- python3 train.py --epochs 3
 *   goldminer run --node SOCKET -- python3 train.py    (the workers in a node agent)
 *
 * execs the named interpreter (with its own options, if any) as
 * `PYTHON [OPTS] -m goldminer run SCRIPT ARGS...` with the goldminer Python
 * package this binary came with first on PYTHONPATH, and GOLDMINER_LIB set to
 * the library beside it when the environment names none: the rest (the plan,
 * the C or hybrid or Python workers, the summary at exit) is
 * python/goldminer/run.py. The process is the interpreter afterwards (exec, not a
 * child): signals, exit status and the terminal are the script's.
 *
 * Where the package is: this binary's directory's ../python (the source tree:
 * build/goldminer) or ../lib/goldminer/python (`make install`); with neither, the
 * interpreter's own (`pip install ./python`), or its "No module named goldminer".
 *
 * Its own options come before `--`: --help, and --node SOCKET, passed on to
 * run.py as its --node (which asks the agent before the script starts).
 *
 * Not done here: the interpreter's -m and -c (goldminer run serves a script file).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

static const char usage_text[] =
    "usage: goldminer run [--node SOCKET] -- PYTHON [PYTHON-OPTIONS] SCRIPT [ARGS...]\n\n"
    "Runs SCRIPT as `PYTHON SCRIPT ARGS` would (its argv, __main__, exit status and\n"
    "signals), with every torch DataLoader over a map-style dataset served by goldminer:\n"
    "torchvision ImageFolder transforms in C, a C+Python hybrid, or Python workers, per\n"
    "the plan; an IterableDataset stays with torch. At exit one line per loader: the\n"
    "plan, img/s, workers (local/remote), the trainer's stall share.\n"
    "  --node SOCKET      the workers run in the node agent at SOCKET (goldminer node),\n"
    "                     sized across the host's jobs, with its peers' workers; the\n"
    "                     script is not started when no agent answers there\n"
    "  GOLDMINER_NODE=SOCKET  the same as --node SOCKET (--node wins)\n"
    "  GOLDMINER_PLAN=1   print each loader's plan when it is built\n"
    "The same as: PYTHONPATH=<goldminer's python dir> PYTHON -m goldminer run [--node SOCKET]\n"
    "SCRIPT ARGS\n";

/* dir of this binary into buf; 0 or -errno */
static int exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

/* The goldminer package's parent directory into out, or -ENOENT. */
static int find_python_dir(const char *dir, char *out, size_t len)
{
	static const char *const rel[] = {"../python", "../lib/goldminer/python"};
	char probe[PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(probe, sizeof(probe), "%s/%s/goldminer/__init__.py", dir, rel[i]);
		if (access(probe, R_OK) == 0) {
			snprintf(probe, sizeof(probe), "%s/%s", dir, rel[i]);
			if (!realpath(probe, out) || strlen(out) >= len)
				return -ENOENT;
			return 0;
		}
	}
	return -ENOENT;
}

/* PYTHONPATH = pydir[:old]; GOLDMINER_LIB = dir/libgoldminer.so when unset and there. */
static int set_env(const char *dir, const char *pydir)
{
	const char *old = getenv("PYTHONPATH");
	size_t n = strlen(pydir) + (old ? strlen(old) : 0) + 2;
	char *pp = malloc(n), lib[PATH_MAX + 32];
	int ret = 0;

	if (!pp)
		return -ENOMEM;
	snprintf(pp, n, "%s%s%s", pydir, old && *old ? ":" : "", old && *old ? old : "");
	if (setenv("PYTHONPATH", pp, 1))
		ret = -errno;
	free(pp);
	snprintf(lib, sizeof(lib), "%s/libgoldminer.so", dir);
	if (!ret && !getenv("GOLDMINER_LIB") && access(lib, R_OK) == 0 &&
	    setenv("GOLDMINER_LIB", lib, 1))
		ret = -errno;
	return ret;
}

/* Index of SCRIPT in argv (after the interpreter and its options), or -1 with the
 * error printed. -X and -W take a value (joined or next); other options are
 * letters that take none, of which m and c (a module, a command) are refused. */
static int script_index(int argc, char **argv, int first)
{
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-")) {
			cmd_err("run", "-", "give a script file",
				"a script on stdin cannot be served");
			return -1;
		}
		if (a[0] != '-')
			return i;
		if (a[1] == 'X' || a[1] == 'W') {
			i += a[2] == '\0'; /* the option's value is the next argument */
			continue;
		}
		if (a[1] != '-' && strpbrk(a + 1, "mc")) {
			cmd_err("run", a, "give the script file: goldminer run -- python3 train.py",
				"the interpreter's -m and -c are not served");
			return -1;
		}
	}
	cmd_err("run", NULL, "goldminer run -- python3 train.py [ARGS]", "no script to run");
	return -1;
}

/* run's own options before `--` (or before the interpreter): --node's value into
 * *node. The index of the interpreter, or -1 with the error printed. */
static int own_options(int argc, char **argv, char **node)
{
	int k = 1;

	while (k < argc && argv[k][0] == '-') {
		char *a = argv[k];
		if (!strcmp(a, "--"))
			return k + 1;
		if (!strcmp(a, "--node") && k + 1 < argc) {
			*node = argv[k + 1];
			k += 2;
		} else if (!strncmp(a, "--node=", 7)) {
			*node = a + 7;
			k++;
		} else {
			cmd_err("run", a, "goldminer run [--node SOCKET] -- python3 train.py",
				!strcmp(a, "--node") ? "needs the node agent's socket"
						     : "not an option of run");
			return -1;
		}
		if (!**node) {
			cmd_err("run", "--node", "goldminer run --node SOCKET -- python3 train.py",
				"needs the node agent's socket, not an empty word");
			return -1;
		}
	}
	return k;
}

int gm_cmd_run(int argc, char **argv)
{
	char dir[PATH_MAX], pydir[PATH_MAX];
	char *node = NULL;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	int k = own_options(argc, argv, &node);
	if (k < 0)
		return 2;
	if (k >= argc) {
		cmd_err("run", NULL, "goldminer run -- python3 train.py [ARGS]",
			"no interpreter and script given");
		return 2;
	}
	int s = script_index(argc, argv, k + 1);
	if (s < 0)
		return 2;
	/* without a package beside the binary, the interpreter's own (pip install) */
	if (exe_dir(dir, sizeof(dir)) == 0 && find_python_dir(dir, pydir, sizeof(pydir)) == 0 &&
	    set_env(dir, pydir)) {
		cmd_err("run", "PYTHONPATH", NULL, "cannot set the environment: %s",
			strerror(errno));
		return 1;
	}
	/* PYTHON [OPTS] -m goldminer run [--node S] SCRIPT ARGS...: argc - k + 5 + NULL */
	char **av = calloc((size_t)(argc - k + 6), sizeof(*av));
	if (!av) {
		cmd_err("run", NULL, NULL, "out of memory");
		return 1;
	}
	int n = 0;
	for (int i = k; i < s; i++)
		av[n++] = argv[i];
	av[n++] = "-m";
	av[n++] = "goldminer";
	av[n++] = "run";
	if (node) {
		av[n++] = "--node";
		av[n++] = node;
	}
	for (int i = s; i < argc; i++)
		av[n++] = argv[i];
	av[n] = NULL;
	execvp(av[0], av);
	int e = errno;
	cmd_err("run", av[0], "name an interpreter on PATH, e.g. python3", "cannot run it: %s",
		strerror(e));
	free(av);
	return e == ENOENT ? 127 : 126;
}
