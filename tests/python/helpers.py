"""helpers - shared fixtures of the Python test suite (tests/python/).

Test datasets (small JPEG ImageFolder trees made with PIL, or with
`goldminer synth` when PIL is missing) live in a mkdtemp() directory removed at
exit. A reference consumer written in C against loader.h is compiled on demand
(cc) and linked to the library under test, so the Python batches can be compared
with the C API's for the same options. /proc helpers find worker processes and
memfd mappings for the leak tests.
"""
import array
import atexit
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

BUILD = os.environ.get("B", "build")
if not os.path.isabs(BUILD):
    BUILD = os.path.join(REPO, BUILD)
os.environ.setdefault("GOLDMINER_LIB", os.path.join(BUILD, "libgoldminer.so"))
LIB = os.environ["GOLDMINER_LIB"]

_tmp = None


def tmpdir():
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="gm-pytest-")
        atexit.register(shutil.rmtree, _tmp, True)
    return _tmp


def lib_problem():
    """None if the library has the loader, else why the tests must skip."""
    try:
        import goldminer
        goldminer.library_path()
    except Exception as e:  # LibraryError or an OSError from dlopen
        return "libgoldminer not usable (%s)" % e
    return None


def have(mod):
    try:
        __import__(mod)
        return True
    except Exception:
        return False


# --- datasets -------------------------------------------------------------------
def _write_jpegs(root, classes, per_class, seed):
    from PIL import Image
    rnd = random.Random(seed)
    for c in range(classes):
        d = os.path.join(root, "class%02d" % c)
        os.makedirs(d)
        for i in range(per_class):
            w, h = rnd.randint(40, 96), rnd.randint(40, 96)
            # smooth gradient + noise: realistic enough for JPEG, distinct per file
            raw = bytearray(w * h * 3)
            base = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
            for y in range(h):
                for x in range(w):
                    o = (y * w + x) * 3
                    raw[o] = (base[0] + x * 3 + rnd.randrange(16)) & 255
                    raw[o + 1] = (base[1] + y * 3 + rnd.randrange(16)) & 255
                    raw[o + 2] = (base[2] + (x ^ y) + rnd.randrange(16)) & 255
            Image.frombytes("RGB", (w, h), bytes(raw)).save(
                os.path.join(d, "img%03d.jpg" % i), quality=85)


_datasets = {}


def dataset(name="small", classes=3, per_class=12, bad=False, synth=False):
    """Path of a cached test dataset; bad=True adds one corrupt and one truncated JPEG;
    synth=True: `goldminer synth`'s photo-sized images (500x375: a decode costs
    milliseconds), not PIL's 40-96 px ones."""
    if name in _datasets:
        return _datasets[name]
    root = os.path.join(tmpdir(), name)
    if have("PIL") and not synth:
        _write_jpegs(root, classes, per_class, seed=zlib.crc32(name.encode()))
    else:
        exe = os.path.join(BUILD, "goldminer")
        subprocess.run([exe, "synth", root, "--images", str(classes * per_class)], check=True,
                       stdout=subprocess.DEVNULL)
    if bad:
        cdir = os.path.join(root, sorted(os.listdir(root))[0])
        with open(os.path.join(cdir, "zz_garbage.jpg"), "wb") as f:
            f.write(b"this is not a jpeg" * 20)
        good = os.path.join(cdir, sorted(os.listdir(cdir))[0])
        data = open(good, "rb").read()
        with open(os.path.join(cdir, "zz_truncated.jpg"), "wb") as f:
            f.write(data[:len(data) // 3])
    _datasets[name] = root
    return root


# --- the C reference consumer ---------------------------------------------------
REF_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "goldminer/checksum.h"
#include "goldminer/loader.h"
/* usage: ref ROOT BATCH WORKERS SEED EPOCHS SIZE OUT(0|1) [START_EPOCH START_BATCH]
 * prints per epoch: "<epoch> <data hash> <label hash> <id hash> <batches> <samples>" */
int main(int argc, char **argv)
{
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	char err[512];
	if (argc < 8)
		return 2;
	gm_loader_opts_default(&o);
	o.root = argv[1];
	o.batch_size = (uint32_t)atoi(argv[2]);
	o.workers = atoi(argv[3]);
	o.seed = strtoull(argv[4], NULL, 0);
	o.epochs = (uint32_t)atoi(argv[5]);
	o.aug.size = (uint32_t)atoi(argv[6]);
	o.aug.out = (enum gm_out_type)atoi(argv[7]);
	if (argc > 9) {
		o.epoch = (uint32_t)atoi(argv[8]);
		o.start_batch = strtoull(argv[9], NULL, 0);
	}
	int rc = gm_loader_open(&l, &o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	uint64_t hd = GM_CHECKSUM_INIT, hl = GM_CHECKSUM_INIT, hi = GM_CHECKSUM_INIT, nb = 0, ns = 0, ep = 0;
	for (;;) {
		rc = gm_loader_next(l, &b);
		if (rc < 0) {
			fprintf(stderr, "%s\n", gm_loader_errmsg(l));
			gm_loader_close(l);
			return 1;
		}
		if (rc == GM_LOADER_END)
			break;
		if (rc == GM_LOADER_END_OF_EPOCH) {
			printf("%llu %016llx %016llx %016llx %llu %llu\n", (unsigned long long)ep,
			       (unsigned long long)hd, (unsigned long long)hl, (unsigned long long)hi,
			       (unsigned long long)nb, (unsigned long long)ns);
			hd = hl = hi = GM_CHECKSUM_INIT;
			nb = ns = 0;
			continue;
		}
		ep = b.epoch;
		hd = gm_checksum64(hd, b.data, (size_t)b.size * b.sample_bytes);
		hl = gm_checksum64(hl, b.labels, (size_t)b.size * sizeof(int32_t));
		hi = gm_checksum64(hi, b.sample_ids, (size_t)b.size * sizeof(uint32_t));
		nb++;
		ns += b.size;
	}
	gm_loader_close(l);
	return 0;
}
"""

ABI_C = r"""
#include <stdio.h>
#include <stddef.h>
#include "goldminer/bind.h"
#include "goldminer/jitter.h"
#include "goldminer/loader.h"
#define S(t) printf("%s sizeof %zu\n", #t, sizeof(struct t));
#define F(t, f) printf("%s %s %zu\n", #t, #f, offsetof(struct t, f));
int main(void)
{
	S(gm_aug_spec) F(gm_aug_spec, mode) F(gm_aug_spec, size) F(gm_aug_spec, scale_min)
	F(gm_aug_spec, scale_max) F(gm_aug_spec, ratio_min) F(gm_aug_spec, ratio_max)
	F(gm_aug_spec, flip_p) F(gm_aug_spec, resize) F(gm_aug_spec, out) F(gm_aug_spec, mean)
	F(gm_aug_spec, std) F(gm_aug_spec, max_pixels) F(gm_aug_spec, jitter)
	S(gm_loader_opts) F(gm_loader_opts, root) F(gm_loader_opts, pipeline)
	F(gm_loader_opts, aug) F(gm_loader_opts, batch_size) F(gm_loader_opts, workers)
	F(gm_loader_opts, seed) F(gm_loader_opts, epoch) F(gm_loader_opts, epochs)
	F(gm_loader_opts, start_batch) F(gm_loader_opts, slots) F(gm_loader_opts, on_error)
	F(gm_loader_opts, drop_last) F(gm_loader_opts, shuffle) F(gm_loader_opts, no_pin)
	F(gm_loader_opts, chaos_kill_ms) F(gm_loader_opts, max_workers) F(gm_loader_opts, node)
	F(gm_loader_opts, lease_timeout_ms) F(gm_loader_opts, order) F(gm_loader_opts, order_len) F(gm_loader_opts, gpu_decode)
	S(gm_batch) F(gm_batch, epoch) F(gm_batch, index) F(gm_batch, size)
	F(gm_batch, n_errors) F(gm_batch, data) F(gm_batch, sample_bytes) F(gm_batch, labels)
	F(gm_batch, sample_ids) F(gm_batch, slot)
	S(gm_loader_stats) F(gm_loader_stats, batches) F(gm_loader_stats, samples)
	F(gm_loader_stats, elapsed_s) F(gm_loader_stats, img_per_s) F(gm_loader_stats, read_ns)
	F(gm_loader_stats, decode_ns) F(gm_loader_stats, augment_ns)
	F(gm_loader_stats, write_ns) F(gm_loader_stats, wait_ns) F(gm_loader_stats, errors)
	F(gm_loader_stats, workers) F(gm_loader_stats, worker_deaths)
	F(gm_loader_stats, reissued) F(gm_loader_stats, batches_per_epoch)
	F(gm_loader_stats, dataset_size) F(gm_loader_stats, num_classes)
	F(gm_loader_stats, pinned) F(gm_loader_stats, chaos_kills)
	F(gm_loader_stats, detect_ns_max) F(gm_loader_stats, detect_ns_sum)
	F(gm_loader_stats, batch_size) F(gm_loader_stats, size) F(gm_loader_stats, out)
	F(gm_loader_stats, mode) F(gm_loader_stats, sample_bytes)
	F(gm_loader_stats, target_workers) F(gm_loader_stats, demand_img_per_s)
	F(gm_loader_stats, worker_img_per_s)
	F(gm_loader_stats, kept_copied)
	S(gm_bind_pool_cfg) F(gm_bind_pool_cfg, argv) F(gm_bind_pool_cfg, workers)
	F(gm_bind_pool_cfg, slots) F(gm_bind_pool_cfg, batch_max)
	F(gm_bind_pool_cfg, payload_bytes) F(gm_bind_pool_cfg, first_task)
	F(gm_bind_pool_cfg, end_task) F(gm_bind_pool_cfg, lease_timeout_ms)
	F(gm_bind_pool_cfg, budget) F(gm_bind_pool_cfg, zygote_argv)
	F(gm_bind_pool_cfg, spec_fd) F(gm_bind_pool_cfg, sparse)
	F(gm_bind_pool_cfg, zygote_server)
	S(gm_bind_batch) F(gm_bind_batch, epoch) F(gm_bind_batch, batch) F(gm_bind_batch, idx)
	F(gm_bind_batch, n)
	S(gm_jitter) F(gm_jitter, n) F(gm_jitter, order) F(gm_jitter, factor)
	return 0;
}
"""


def cc():
    for c in (os.environ.get("CC"), "cc", "gcc"):
        if c and shutil.which(c):
            return c
    return None


def compile_c(name, src, link_lib):
    """Compile src into tmpdir()/name; returns the path (raises on failure)."""
    exe = os.path.join(tmpdir(), name)
    if os.path.exists(exe):
        return exe
    cpath = exe + ".c"
    with open(cpath, "w") as f:
        f.write(src)
    cmd = [cc(), "-std=c11", "-D_GNU_SOURCE", "-O1", "-I", os.path.join(REPO, "include"),
           "-o", exe, cpath]
    if link_lib:
        libdir = os.path.dirname(os.path.abspath(LIB))
        cmd += [os.path.abspath(LIB), "-Wl,-rpath," + libdir]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        raise RuntimeError("compiling %s failed:\n%s" % (name, r.stdout))
    return exe


def c_reference(root, batch, workers, seed, epochs, size, out, start=None):
    """Per-epoch (epoch, data, labels, ids, batches, samples) from the C API."""
    exe = compile_c("ref", REF_C, True)
    args = [exe, root, str(batch), str(workers), str(seed), str(epochs), str(size), str(out)]
    if start:
        args += [str(start[0]), str(start[1])]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(LIB)))
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=120)
    if r.returncode:
        raise RuntimeError("C reference failed: " + r.stderr)
    out_rows = []
    for line in r.stdout.splitlines():
        e, hd, hl, hi, nb, ns = line.split()
        out_rows.append((int(e), hd, hl, hi, int(nb), int(ns)))
    return out_rows


def abi_layout():
    """{struct: {"sizeof": n, field: offset}} from the C compiler."""
    exe = compile_c("abi", ABI_C, False)
    out = {}
    for line in subprocess.run([exe], stdout=subprocess.PIPE, text=True,
                               check=True).stdout.splitlines():
        s, f, v = line.split()
        out.setdefault(s, {})[f] = int(v)
    return out


# --- processes and mappings -------------------------------------------------------
def children(pid=None, server=False):
    """[(pid, state)] of the processes whose parent is pid (default: this one),
    zombies included; the process's zygote server (gm-zserver: it lives as long
    as its trainer, goldminer/_zserver.py) only with server=True."""
    pid = os.getpid() if pid is None else pid
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rfind(")") + 2:].split()
        if int(rest[1]) == pid and (server or st[st.find("(") + 1:st.rfind(")")]
                                    != "gm-zserver"):
            out.append((int(d), rest[0]))
    return out


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rfind(")") + 2:].split()[0] != "Z"


def memfd_maps(pid="self"):
    """Lines of /proc/PID/maps that map a memfd."""
    with open("/proc/%s/maps" % pid) as f:
        return [l for l in f if "/memfd:" in l]


def memfd_fds(pid="self"):
    out = []
    d = "/proc/%s/fd" % pid
    for fd in os.listdir(d):
        try:
            t = os.readlink(os.path.join(d, fd))
        except OSError:
            continue
        if t.startswith("/memfd:"):
            out.append(t)
    return out


def copy_of(data):
    """An owned copy of a batch's data (NumPy array or memoryview)."""
    return data.copy() if hasattr(data, "copy") else bytes(data)


def json_line(text, key):
    """The first JSON object in text that has key."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if key in d:
                return d
    return None


def pyfnv_batches(batches):
    """Per-epoch hash of (data, labels) of an iterable of goldminer Batches."""
    import goldminer
    hd = hl = goldminer.checksum.FNV_OFFSET
    for b in batches:
        hd = goldminer.checksum64(b.data, hd)
        lab = b.labels if not isinstance(b.labels, list) else array.array("i", b.labels)
        hl = goldminer.checksum64(lab, hl)
    return goldminer.hexdigest(hd), goldminer.hexdigest(hl)


_problems = {}


def need_problem(need):
    """None when `need` is available here, else a reason to skip."""
    if need not in _problems:
        if need == "lib":
            p = lib_problem()
        elif need == "cc":
            p = None if cc() else "no C compiler (cc) on PATH"
        elif need == "cuda":
            p = "needs torch" if not have("torch") else None
            if p is None:
                import torch
                p = None if torch.cuda.is_available() else "no CUDA device visible to torch"
        else:
            p = None if have(need) else "%s is not importable by %s" % (need, sys.executable)
        _problems[need] = p
    return _problems[need]


class GmTest(unittest.TestCase):
    """Base class: skips each test whose `needs` are missing, with the reason."""
    needs = ("lib",)

    def setUp(self):
        for n in self.needs:
            p = need_problem(n)
            if p:
                self.skipTest(p)
