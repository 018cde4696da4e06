"""goldminer.Loader: the C API's bytes, one epoch per `for`, zero-copy views, errors,
resume, scaling."""
import ctypes
import errno
import io
import os
import re
import subprocess
import sys
import tarfile
import time

import helpers
from helpers import GmTest, c_reference, dataset, pyfnv_batches

import goldminer

SIZE, BATCH, SEED = 32, 8, 7


def epoch_hashes(loader, epochs):
    return [pyfnv_batches(loader) for _ in range(epochs)]


class TestBytes(GmTest):
    needs = ("lib", "cc")

    def _compare(self, output, out_code):
        root = dataset()
        ref = c_reference(root, BATCH, 2, SEED, 2, SIZE, out_code)
        self.assertEqual(len(ref), 2)
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, epochs=2,
                              size=SIZE, output=output) as l:
            got = epoch_hashes(l, 2)
            self.assertTrue(l.finished)
        for e in range(2):
            self.assertEqual(got[e][0], ref[e][1], "epoch %d data bytes differ from C" % e)
            self.assertEqual(got[e][1], ref[e][2], "epoch %d labels differ from C" % e)
        self.assertNotEqual(got[0][0], got[1][0], "two epochs gave the same bytes")

    def test_uint8_batches_equal_the_c_api(self):
        self._compare("uint8", 0)

    def test_float32_batches_equal_the_c_api(self):
        self._compare("float32", 1)

    def test_float16_batches_equal_the_c_api(self):
        self._compare("float16", 2)

    def test_epoch_checksums_equal_goldminer_bench_checksum(self):
        exe = os.path.join(helpers.BUILD, "goldminer")
        if not os.access(exe, os.X_OK):
            self.skipTest("no %s to compare with" % exe)
        root = dataset()
        for output in ("uint8", "float32", "float16"):
            r = subprocess.run([exe, "bench", root, "--workers", "2", "--batch", str(BATCH),
                                "--epochs", "2", "--size", str(SIZE), "--seed", str(SEED),
                                "--output", output, "--checksum", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            cli = helpers.json_line(r.stdout, "checksum")
            self.assertIsNotNone(cli, r.stdout)
            ends = cli["epoch_end_s"]  # when each epoch ended, in order, within the run
            self.assertEqual(len(ends), 2, r.stdout)
            self.assertTrue(0 <= ends[0] <= ends[1] <= cli["wall_s"], r.stdout)
            with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, epochs=2,
                                  size=SIZE, output=output) as l:
                got = [h for h, _ in epoch_hashes(l, 2)]
            self.assertEqual(got, cli["checksum"], output)

    def test_webdataset_shards_from_python_tarfile_give_the_same_bytes(self):
        # Shards as Python's tarfile writes them (pax headers: a long member name
        # forces one), in the tree's order: the same batches as the tree itself.
        import tarfile
        root = dataset()
        out = os.path.join(helpers.tmpdir(), "wds-pax")
        os.makedirs(out, exist_ok=True)
        files = [(c, f) for c in sorted(os.listdir(root))
                 for f in sorted(os.listdir(os.path.join(root, c)))]
        for k in range(0, len(files), 10):
            with tarfile.open(os.path.join(out, "s%03d.tar" % (k // 10)), "w",
                              format=tarfile.PAX_FORMAT) as t:
                for c, f in files[k:k + 10]:
                    label = sorted(os.listdir(root)).index(c)
                    stem = f.rsplit(".", 1)[0].replace(".", "_") + "_" + "x" * 120
                    t.add(os.path.join(root, c, f), arcname="%s/%s.jpg" % (c, stem))
                    info = tarfile.TarInfo("%s/%s.cls" % (c, stem))
                    data = b"%d\n" % label
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        kw = dict(batch_size=BATCH, workers=2, seed=SEED, epochs=2, size=SIZE)
        with goldminer.Loader(root, **kw) as l:
            ref = epoch_hashes(l, 2)
        with goldminer.Loader(out, **kw) as l:
            self.assertEqual(l.dataset_size, len(files))
            got = epoch_hashes(l, 2)
        self.assertEqual(got, ref)

    def test_resume_from_state_dict_gives_the_same_bytes(self):
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=2, seed=SEED, epochs=2,
                              size=SIZE) as l:
            full = [(b.epoch, b.index, goldminer.checksum64(b.data)) for _ in range(2) for b in l]
        with goldminer.Loader(root, batch_size=BATCH, workers=2, seed=SEED, epochs=2,
                              size=SIZE) as l:
            it = iter(l)
            for _ in range(3):
                next(it)
            sd = l.state_dict()
        self.assertEqual((sd["epoch"], sd["batch"]), (0, 3))
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, epochs=2,
                              size=SIZE) as l:
            l.load_state_dict(sd)
            rest, chained = [], []
            for _ in range(2):
                h = goldminer.checksum.FNV_OFFSET
                for b in l:
                    rest.append((b.epoch, b.index, goldminer.checksum64(b.data)))
                    h = goldminer.checksum64(b.data, h)
                chained.append(goldminer.hexdigest(h))
            self.assertTrue(l.finished)
        self.assertEqual(rest, full[3:])
        # the C API, opened at the same position, delivers the same bytes
        ref = c_reference(root, BATCH, 2, SEED, 2, SIZE, 0, start=(0, 3))
        self.assertEqual([r[1] for r in ref], chained)
        self.assertEqual(ref[0][4], len(l) - 3)

    def test_state_dict_from_another_seed_is_refused(self):
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=1, size=SIZE) as a, \
                goldminer.Loader(root, batch_size=BATCH, workers=1, seed=2, size=SIZE) as b:
            with self.assertRaisesRegex(ValueError, "seed"):
                b.load_state_dict(a.state_dict())


class TestIteration(GmTest):
    needs = ("lib", "numpy")

    def test_epochs_len_shapes_and_permutation(self):
        import numpy as np
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=2, seed=3, epochs=2,
                              size=SIZE) as l:
            self.assertEqual(len(l), (36 + BATCH - 1) // BATCH)
            self.assertEqual(l.dataset_size, 36)
            self.assertEqual(l.num_classes, 3)
            for epoch in range(2):
                ids, n = [], 0
                for k, b in enumerate(l):
                    self.assertEqual((b.epoch, b.index), (epoch, k))
                    self.assertEqual(b.data.dtype, np.uint8)
                    self.assertEqual(b.data.shape, (len(b), SIZE, SIZE, 3))
                    self.assertTrue(((b.labels >= 0) & (b.labels < 3)).all())
                    ids += list(b.sample_ids)
                    n += 1
                self.assertEqual(n, len(l))
                self.assertEqual(sorted(ids), list(range(36)))
            self.assertEqual(list(l), [])  # all epochs delivered
            self.assertTrue(l.finished)
            st = l.stats()
            self.assertEqual(st["batches"], 2 * len(l))
            self.assertEqual(st["samples"], 72)

    def test_float32_is_normalised_chw(self):
        import numpy as np
        with goldminer.Loader(dataset(), batch_size=BATCH, workers=1, size=SIZE,
                              output="float32") as l:
            b = l.next_batch()
            self.assertEqual(b.data.dtype, np.float32)
            self.assertEqual(b.data.shape, (BATCH, 3, SIZE, SIZE))
            self.assertTrue(np.isfinite(b.data).all())
            self.assertLess(abs(float(b.data.mean())), 2.5)
            self.assertGreater(float(b.data.std()), 0.05)

    def test_float16_is_float32_rounded_to_half(self):
        import numpy as np
        kw = dict(batch_size=BATCH, workers=1, seed=2, size=SIZE, epochs=1)
        with goldminer.Loader(dataset(), output="float32", **kw) as l:
            f32 = [b.data.copy() for b in l]
        with goldminer.Loader(dataset(), output="float16", workers=2,
                              **{k: v for k, v in kw.items() if k != "workers"}) as l:
            self.assertEqual(l.output, "float16")
            f16 = [b.data.copy() for b in l]
        self.assertEqual(len(f16), len(f32))
        for a, h in zip(f32, f16):
            self.assertEqual(h.dtype, np.float16)
            self.assertEqual(h.shape, a.shape)
            # numpy's float32 -> float16 is IEEE round-to-nearest-even, as the C side
            self.assertTrue((a.astype(np.float16).view(np.uint16) == h.view(np.uint16)).all())

    def test_pipeline_spec_decides_layout_and_batch_size(self):
        import numpy as np
        spec = ("read | decode | random_resized_crop %d | flip 0.5 | normalize imagenet |"
                " to_chw_f32 | batch 6" % SIZE)
        with goldminer.Loader(dataset(), pipeline=spec, workers=1, seed=4) as l:
            self.assertEqual(l.output, "float32")
            self.assertEqual(len(l), 6)
            bs = [(b.data.shape, b.data.dtype, goldminer.checksum64(b.data)) for b in l]
        self.assertEqual(bs[0][:2], ((6, 3, SIZE, SIZE), np.float32))
        with goldminer.Loader(dataset(), batch_size=6, workers=1, seed=4, size=SIZE,
                              output="float32") as l:
            self.assertEqual([goldminer.checksum64(b.data) for b in l], [h for _, _, h in bs])

    def test_batch_is_a_view_of_the_ring_and_copies_survive(self):
        with goldminer.Loader(dataset(), batch_size=4, workers=2, seed=1, size=SIZE) as l:
            self.assertGreater(len(l), 5)
            it = iter(l)
            b0 = next(it)
            # zero-copy: the array's memory is the slot gm_loader_next returned
            self.assertEqual(b0.data.__array_interface__["data"][0], b0._raw.data)
            self.assertFalse(b0.data.flags.owndata)
            kept = b0.data.copy()
            h0 = goldminer.checksum64(kept)
            for b in it:   # the whole epoch: every slot is reused
                pass
            self.assertEqual(goldminer.checksum64(kept), h0, "a kept copy was modified")
            # the old view now shows a later batch: that is why copies are needed
            self.assertNotEqual(goldminer.checksum64(b0.data), h0)

    def test_copy_option_gives_batches_the_caller_owns(self):
        # every batch of the epoch held at once, more than the ring's slots (so the
        # library copies the oldest out from under their views), and read after
        # close(): the bytes of a loader that keeps none
        with goldminer.Loader(dataset(), batch_size=4, workers=1, seed=1, size=SIZE,
                              copy=True) as l:
            bs = list(l)
            slots = ctypes.c_uint32()
            l._L.gm_loader_kept(l._h, ctypes.byref(slots))
            self.assertGreater(len(bs), slots.value)
        with goldminer.Loader(dataset(), batch_size=4, workers=1, seed=1, size=SIZE) as l:
            hs = [goldminer.checksum64(b.data) for b in l]
        self.assertEqual([goldminer.checksum64(b.data) for b in bs], hs)

class TestControl(GmTest):
    needs = ("lib",)

    def test_loop_left_early_continues_in_the_next_loop(self):
        with goldminer.Loader(dataset(), batch_size=BATCH, workers=1, size=SIZE) as l:
            seen = []
            for b in l:
                seen.append((b.epoch, b.index))
                if b.index == 1:
                    break
            for b in l:
                seen.append((b.epoch, b.index))
            self.assertEqual(seen, [(0, k) for k in range(len(l))])
            # a loop left right after an epoch's last batch: the next loop is the next epoch
            for b in l:
                last = b
            self.assertEqual((last.epoch, last.index), (1, len(l) - 1))
            nxt = [(b.epoch, b.index) for b in l]
            self.assertEqual(nxt, [(2, k) for k in range(len(l))])

    def test_same_seed_same_bytes_other_seed_other_bytes(self):
        def run(seed, workers):
            with goldminer.Loader(dataset(), batch_size=BATCH, workers=workers, seed=seed,
                                  size=SIZE) as l:
                return pyfnv_batches(l)
        a = run(5, 1)
        self.assertEqual(a, run(5, 2))
        self.assertNotEqual(a[0], run(6, 1)[0])

    def test_killed_workers_do_not_change_the_bytes(self):
        root = dataset()
        kw = dict(batch_size=4, workers=2, seed=3, size=96)
        with goldminer.Loader(root, **kw) as ref, \
                goldminer.Loader(root, chaos_kill_ms=5, **kw) as chaos:
            for epoch in range(60):
                self.assertEqual(pyfnv_batches(chaos), pyfnv_batches(ref), "epoch %d" % epoch)
                if chaos.stats()["chaos_kills"] >= 3:
                    break
            st = chaos.stats()
        self.assertGreaterEqual(st["chaos_kills"], 3, "the chaos option killed nobody")

    def test_scale_changes_the_worker_count(self):
        with goldminer.Loader(dataset(), batch_size=4, workers=1, size=SIZE) as l:
            l.scale(3)
            deadline = time.monotonic() + 20
            while l.stats()["workers"] != 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(l.stats()["workers"], 3)
            self.assertEqual(len(list(l)), len(l))
            with self.assertRaises(ValueError):
                l.scale(0)
            with self.assertRaisesRegex(ValueError, r"scale\(n\) must be an int in 1\.\.256"):
                l.scale(100000)

    def test_auto_workers_deliver_the_same_bytes(self):
        with goldminer.Loader(dataset(), batch_size=BATCH, workers="auto", seed=9, size=SIZE,
                              max_workers=2) as l:
            auto = pyfnv_batches(l)
            st = l.stats()
        self.assertTrue(1 <= st["target_workers"] <= 2, st["target_workers"])
        with goldminer.Loader(dataset(), batch_size=BATCH, workers=1, seed=9, size=SIZE) as l:
            self.assertEqual(pyfnv_batches(l), auto)

    def test_eval_mode_is_deterministic_across_seeds_without_shuffle(self):
        def run(seed):
            with goldminer.Loader(dataset(), batch_size=BATCH, workers=1, seed=seed,
                                  size=SIZE, mode="eval", resize=40, shuffle=False) as l:
                return [(goldminer.checksum64(b.data), list(b.sample_ids)) for b in l]
        self.assertEqual(run(1), run(2))


class TestErrors(GmTest):
    needs = ("lib",)

    def test_without_numpy_batches_are_memoryviews(self):
        code = r"""
import sys
sys.modules["numpy"] = None          # make `import numpy` fail
sys.path.insert(0, sys.argv[1])
import goldminer
with goldminer.Loader(sys.argv[2], batch_size=4, workers=1, size=16) as l:
    b = l.next_batch()
    assert isinstance(b.data, memoryview), type(b.data)
    assert b.data.shape == (4, 16, 16, 3), b.data.shape
    assert isinstance(b.labels, list) and len(b.labels) == 4
    h = goldminer.checksum64(b.data)
print("OK %016x" % h)
"""
        r = subprocess.run([sys.executable, "-B", "-c", code, os.path.join(helpers.REPO, "python"),
                            dataset()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout)
        with goldminer.Loader(dataset(), batch_size=4, workers=1, size=16) as l:
            h = goldminer.checksum64(l.next_batch().data)
        self.assertIn("OK %016x" % h, r.stdout)


    def test_views_alive_at_interpreter_exit_stay_readable(self):
        # A script's last batches are still referenced when the interpreter exits,
        # and weakref.finalize's exit hook runs before the teardown that may read
        # them (an atexit handler registered earlier runs after it): the workers
        # stop but the ring and the kept slots stay mapped (once: unmapped, and
        # the read below died of SIGSEGV; a second close() then used the freed
        # handle, which ASan reported).
        code = r"""
import atexit, sys
sys.path.insert(0, sys.argv[1])
kept = {}
def late():
    print("LATE %016x %016x" % (goldminer.checksum64(kept["view"].data),
                                goldminer.checksum64(kept["owned"].data)), flush=True)
    kept["l1"].close()  # after the exit hook: the handle it closed is not used again
    kept["l2"].close()
atexit.register(late)
import goldminer
kept["l1"] = goldminer.Loader(sys.argv[2], batch_size=4, workers=1, size=16, seed=2)
kept["view"] = kept["l1"].next_batch()
kept["l2"] = goldminer.Loader(sys.argv[2], batch_size=4, workers=1, size=16, seed=2,
                              copy=True)
kept["owned"] = kept["l2"].next_batch()
print("EARLY %016x" % goldminer.checksum64(kept["owned"].data), flush=True)
"""
        r = subprocess.run([sys.executable, "-B", "-c", code, os.path.join(helpers.REPO, "python"),
                            dataset()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout)
        early = re.search(r"EARLY ([0-9a-f]{16})", r.stdout)
        late = re.search(r"LATE ([0-9a-f]{16}) ([0-9a-f]{16})", r.stdout)
        self.assertIsNotNone(early, r.stdout)
        self.assertIsNotNone(late, r.stdout)
        self.assertEqual(late.group(1), early.group(1), r.stdout)
        self.assertEqual(late.group(2), early.group(1), r.stdout)
        self.assertNotIn("AddressSanitizer", r.stdout)

    def test_except_goldminererror_catches_each_kind_and_its_builtin_too(self):
        root = dataset()
        kinds = ((lambda: goldminer.Loader(root, batch_size=0), goldminer.ArgumentError,
                  ValueError),
                 (lambda: goldminer.Loader(12, workers=1), goldminer.ArgumentTypeError,
                  TypeError),
                 (lambda: goldminer.Loader("/nonexistent/gm-root", workers=1),
                  goldminer.LoaderError, OSError),
                 (lambda: goldminer.Loader(root, workers=1, pipeline="read | decode | x 3"),
                  goldminer.LoaderError, RuntimeError))
        for make, kind, builtin in kinds:
            with self.assertRaises(goldminer.GoldminerError) as cm:
                make()
            self.assertIsInstance(cm.exception, kind)
            with self.assertRaises(builtin):  # code written without goldminer
                make()
        l = goldminer.Loader(root, batch_size=4, workers=1, size=SIZE)
        l.close()
        with self.assertRaises(goldminer.GoldminerError) as cm:
            l.next_batch()
        self.assertIsInstance(cm.exception, ValueError)
        # the constructor of before (errno, message) makes the run-time kind
        e = goldminer.GoldminerError(errno.EIO, "x")
        self.assertIsInstance(e, goldminer.LoaderError)
        self.assertEqual((e.errno, e.strerror), (errno.EIO, "x"))
        # no library: LibraryError, an ImportError
        code = ("import goldminer\ntry:\n    goldminer.library_path()\n"
                "except goldminer.GoldminerError as e:\n"
                "    print(type(e).__name__, isinstance(e, ImportError))\n")
        env = dict(os.environ, GOLDMINER_LIB="/nonexistent/libgoldminer.so",
                   PYTHONPATH=os.path.dirname(os.path.dirname(goldminer.__file__)))
        r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(r.stdout.strip(), "LibraryError True")

    def test_missing_root_raises_with_the_c_message(self):
        with self.assertRaises(goldminer.GoldminerError) as cm:
            goldminer.Loader("/nonexistent/gm-root", workers=1)
        e = cm.exception
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, errno.ENOENT)
        self.assertIn("gm_loader_open", str(e))
        self.assertIn("/nonexistent/gm-root", str(e))

    def test_empty_root_raises(self):
        d = os.path.join(helpers.tmpdir(), "empty")
        os.makedirs(d, exist_ok=True)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            goldminer.Loader(d, workers=1)
        self.assertIn(d, str(cm.exception))

    def test_bad_options_raise(self):
        root = dataset()
        for kw in (dict(output="int8"), dict(on_error="ignore"), dict(workers=0),
                   dict(workers="many"), dict(batch_size=0), dict(mode="test"), dict(size=-1)):
            with self.assertRaises(ValueError, msg=str(kw)):
                goldminer.Loader(root, **kw)
        with self.assertRaisesRegex(ValueError, r"batch_size must be an int in 1\.\.65536"):
            goldminer.Loader(root, workers=1, batch_size=1 << 20)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            goldminer.Loader(root, workers=1, pipeline="read | decode | random_crop 3")
        self.assertIn("gm_loader_open", str(cm.exception))
        self.assertIn("random_crop", str(cm.exception))

    def test_copy_to_device_without_a_gpu_raises_enodev(self):
        if helpers.need_problem("cuda") is None:
            self.skipTest("a CUDA device is present")
        with goldminer.Loader(dataset(), batch_size=4, workers=1, size=SIZE) as l:
            b0 = l.next_batch()
            with self.assertRaises(goldminer.GoldminerError) as cm:
                l.copy_to_device(b0, 0)
            self.assertEqual(cm.exception.errno, errno.ENODEV)
            self.assertIn("gm_loader_copy_to_device", str(cm.exception))
            l.next_batch()
            with self.assertRaisesRegex(ValueError, "no longer current"):
                l.copy_to_device(b0, 0)

    def test_closed_loader_raises(self):
        l = goldminer.Loader(dataset(), batch_size=4, workers=1, size=SIZE)
        l.close()
        l.close()  # idempotent
        self.assertTrue(l.closed)
        for f in (l.next_batch, l.stats, lambda: iter(l), l.state_dict):
            with self.assertRaisesRegex(ValueError, "closed"):
                f()

    def test_on_error_skip_counts_and_names_the_bad_files(self):
        root = dataset("bad", bad=True)
        with goldminer.Loader(root, batch_size=4, workers=2, size=SIZE, seed=2) as l:
            n = sum(len(b) for b in l)
            self.assertEqual(n, 38)
            st = l.stats()
            self.assertEqual(st["errors"], 2)
            errs = l.errors()
            self.assertEqual(sorted(os.path.basename(p) for p, _ in errs),
                             ["zz_garbage.jpg", "zz_truncated.jpg"])
            self.assertTrue(all(m for _, m in errs))

    def test_on_error_fail_raises_naming_the_file(self):
        root = dataset("bad", bad=True)
        with goldminer.Loader(root, batch_size=4, workers=2, size=SIZE, seed=2,
                              on_error="fail") as l:
            with self.assertRaises(goldminer.GoldminerError) as cm:
                for _ in l:
                    pass
            self.assertEqual(cm.exception.errno, errno.EBADMSG)
            self.assertRegex(str(cm.exception), "zz_(garbage|truncated).jpg")


class TestRanges(GmTest):
    """Numbers outside what the C fields hold are refused, naming the range; never
    wrapped (ctypes would) or changed."""
    needs = ("lib",)

    def test_limits_match_limits_h(self):
        from goldminer import loader as gl
        text = open(os.path.join(helpers.REPO, "include", "goldminer", "limits.h")).read()
        for name in ("GM_MAX_WORKERS", "GM_MAX_BATCH", "GM_MAX_SLOTS", "GM_MAX_CHAOS_MS"):
            m = re.search(r"#define\s+%s\s+(\d+)" % name, text)
            self.assertIsNotNone(m, name)
            self.assertEqual(getattr(gl, name), int(m.group(1)), name)
        job = open(os.path.join(helpers.REPO, "include", "goldminer", "job.h")).read()
        m = re.search(r"#define\s+GM_MAX_LEASE_MS\s+(\d+)", job)
        self.assertIsNotNone(m, "GM_MAX_LEASE_MS")
        self.assertEqual(gl.GM_MAX_LEASE_MS, int(m.group(1)))

    def test_out_of_range_numbers_are_refused_naming_the_range(self):
        root = dataset()
        bad = [
            (dict(seed=1 << 64), r"seed must be an int in 0\.\.18446744073709551615"),
            (dict(seed=-1), r"seed must be an int in 0\.\.18446744073709551615 .*not -1"),
            (dict(seed=1.5), r"seed must be an int"),
            (dict(batch_size=(1 << 32) + 4), r"batch_size must be an int in 1\.\.65536"),
            (dict(batch_size=65537), r"batch_size must be an int in 1\.\.65536"),
            (dict(max_pixels=-1), r"max_pixels must be an int in 0\.\.1000000000000"),
            (dict(max_pixels=1 << 64), r"max_pixels must be an int in 0\.\.1000000000000"),
            (dict(workers=(1 << 32) + 1), r"workers must be an int in 1\.\.256"),
            (dict(epoch=1 << 32), r"epoch must be an int in 0\.\.4294967295"),
            (dict(epochs=-1), r"epochs must be an int in 0\.\.4294967295"),
            (dict(start_batch=1 << 64), r"start_batch must be an int in 0\.\."),
            (dict(size=(1 << 32) + 16), r"size must be an int in 1\.\.8192"),
            (dict(resize=-256, mode="eval"), r"resize must be an int in 1\.\.32768"),
            (dict(slots=1 << 32), r"slots must be an int in 0\.\.1024"),
            (dict(max_workers=1 << 32), r"max_workers must be an int in 0\.\.256"),
            (dict(chaos_kill_ms=1 << 32), r"chaos_kill_ms must be an int in 0\.\.3600000"),
            (dict(scale=(0.5, 1e39)), r"scale\[1\] must be a finite number"),
            (dict(ratio=(float("nan"), 1.0)), r"ratio\[0\] must be a finite number"),
            (dict(flip_p=float("inf")), r"flip_p must be a finite number in \[0, 1\]"),
            (dict(mean=(0.5, 0.5)), r"mean must be 3 numbers"),
            (dict(std=(0.2, -1e40, 0.2)), r"std\[1\] must be a finite number"),
            (dict(pipeline=""), r"pipeline must not be empty"),
            (dict(pipeline="  "), r"pipeline must not be empty"),
        ]
        for kw, want in bad:
            with self.assertRaisesRegex(ValueError, want, msg=str(kw)):
                goldminer.Loader(root, **kw)
        # the edges themselves are taken as they are
        with goldminer.Loader(root, batch_size=4, workers=1, size=SIZE, seed=(1 << 64) - 1,
                              epoch=(1 << 32) - 2, epochs=1, max_pixels=0) as l:
            self.assertEqual(l.seed, (1 << 64) - 1)
            self.assertEqual(l.position(), ((1 << 32) - 2, 0))
            b = l.next_batch()
            self.assertEqual(b.epoch, (1 << 32) - 2)
            with self.assertRaisesRegex(ValueError, r"scale\(n\) must be an int in 1\.\.256"):
                l.scale((1 << 32) + 1)
            sd = l.state_dict()
            sd["epoch"] = 1 << 32
            with self.assertRaisesRegex(ValueError, r"state_dict epoch must be an int in"):
                l.load_state_dict(sd)
            self.assertFalse(l.closed)  # refused before anything was closed

    def test_long_path_keeps_the_cause_in_the_message(self):
        d = os.path.join(helpers.tmpdir(), "deep")
        while len(d) + 280 < 4000:
            d = os.path.join(d, "d" * 240)
        os.makedirs(d, exist_ok=True)
        shard = os.path.join(d, "corrupt.tar")
        with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tf:
            for name, data in (("k.jpg", b"abc"), ("k.cls", b"1\n")):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        with open(shard, "r+b") as f:
            f.seek(1024)  # the .cls member's header
            f.write(b"X")
        self.assertGreater(len(shard), 3800)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            goldminer.Loader(shard, workers=1)
        msg = str(cm.exception)
        self.assertIn("gm_loader_open", msg)
        self.assertIn("...", msg)
        self.assertIn("dd/corrupt.tar: offset 1024: bad tar header checksum", msg)

        # a corrupt JPEG deep down, on_error="fail": the file name and the cause
        root = os.path.join(d, "tree", "class_a")
        os.makedirs(root, exist_ok=True)
        src = os.path.join(dataset(), sorted(os.listdir(dataset()))[0])
        for k, name in enumerate(sorted(os.listdir(src))[:3]):
            with open(os.path.join(src, name), "rb") as f, \
                    open(os.path.join(root, "img%d.jpg" % k), "wb") as g:
                g.write(f.read())
        with open(os.path.join(root, "zz_bad.jpg"), "wb") as f:
            f.write(b"this is not a jpeg" * 20)
        with goldminer.Loader(os.path.dirname(root), batch_size=4, workers=1, size=SIZE,
                              on_error="fail") as l:
            with self.assertRaises(goldminer.GoldminerError) as cm:
                for _ in l:
                    pass
        msg = str(cm.exception)
        self.assertEqual(cm.exception.errno, errno.EBADMSG)
        self.assertIn("gm_loader_next", msg)
        self.assertRegex(msg, r"dd/tree/class_a/zz_bad\.jpg: .*Not a JPEG file")


class TestArguments(GmTest):
    """root and node are paths in any of Python's forms; what cannot reach the C
    library as a path or as text is refused naming the argument; a Loader refuses
    pickling in words."""
    needs = ("lib",)

    def _hashes(self, root):
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, epochs=1,
                              size=SIZE) as l:
            return pyfnv_batches(l)

    def test_root_as_bytes_or_pathlike_gives_the_same_bytes(self):
        import pathlib
        root = dataset()
        want = self._hashes(root)
        self.assertEqual(self._hashes(os.fsencode(root)), want)
        self.assertEqual(self._hashes(pathlib.Path(root)), want)

    def test_root_whose_name_is_not_utf8_opens_as_bytes_or_as_its_str(self):
        import shutil
        src = dataset()
        raw = os.path.join(os.fsencode(helpers.tmpdir()), b"caf\xe9-\xff")  # not UTF-8
        if not os.path.isdir(raw):
            shutil.copytree(os.fsencode(src), raw)
        want = self._hashes(src)
        self.assertEqual(self._hashes(raw), want)
        name = os.fsdecode(raw)  # what os.listdir() gives: surrogate escapes
        self.assertIn("\udce9", name)
        self.assertEqual(self._hashes(name), want)

    def test_root_node_or_pipeline_that_cannot_be_encoded_is_refused_naming_it(self):
        root = dataset()
        cases = [
            (dict(root="/tmp/gm-\ud800"), ValueError, r"^root '/tmp/gm-\\ud800' is not a "
                                                     r"file name this system can encode"),
            (dict(root="/tmp/gm\0x"), ValueError, r"^root must not contain a NUL byte"),
            (dict(root=b"/tmp/gm\0x"), ValueError, r"^root must not contain a NUL byte"),
            (dict(root=42), TypeError, r"^root must be a path \(str, bytes or os\.PathLike\)"
                                       r", not int"),
            (dict(root=None), TypeError, r"^root must be a path .*, not NoneType"),
            (dict(root=root, node=7), TypeError, r"^node must be a path .*, not int"),
            (dict(root=root, node="/tmp/\udfff\ud800"), ValueError, r"^node .* is not a file "
                                                                   r"name"),
            (dict(root=root, pipeline="read | decode\ud800"), ValueError,
             r"^pipeline must be text that UTF-8 can encode"),
        ]
        for kw, exc, pattern in cases:
            with self.assertRaises(exc, msg=repr(kw)) as cm:
                goldminer.Loader(workers=1, **kw)
            # the binding's own words and kind, not a raw codec or attribute error
            kind = {ValueError: goldminer.ArgumentError, TypeError: goldminer.ArgumentTypeError}
            self.assertIs(type(cm.exception), kind[exc], repr(kw))
            self.assertRegex(str(cm.exception), pattern)

    def test_a_loader_cannot_be_pickled_and_says_why(self):
        import copy
        import pickle
        with goldminer.Loader(dataset(), batch_size=4, workers=1, size=SIZE) as l:
            for f in (pickle.dumps, copy.copy, copy.deepcopy):
                with self.assertRaises(TypeError, msg=f.__name__) as cm:
                    f(l)
                self.assertIsInstance(cm.exception, goldminer.ArgumentTypeError)
                msg = str(cm.exception)
                self.assertIn("goldminer.Loader cannot be pickled", msg)
                self.assertIn("worker processes and a shared-memory ring", msg)
                self.assertIn("pickle its arguments instead", msg)
            l.next_batch()  # still usable


class TestPackage(GmTest):
    needs = ()

    def test_import_goldminer_loads_no_tool_and_the_tools_live_apart(self):
        # what a trainer imports (goldminer, and goldminer.torch where torch is)
        # loads no tool; the tools are goldminer.tools' modules, not the package's
        import pkgutil
        code = ("import sys, goldminer\n"
                "try:\n    import goldminer.torch\nexcept ImportError:\n    pass\n"
                "print(' '.join(sorted(m for m in sys.modules if m.startswith('goldminer'))))\n")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(goldminer.__file__)))
        r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        loaded = set(r.stdout.split())
        self.assertIn("goldminer.loader", loaded, r.stdout)
        self.assertEqual({m for m in loaded if "tools" in m}, set(), r.stdout)
        tools = {"bench", "gpucheck", "profile_classes"}
        top = {m.name for m in pkgutil.iter_modules(goldminer.__path__)}
        self.assertEqual(top & tools, set())
        self.assertEqual({m.name for m in pkgutil.iter_modules(
            [os.path.join(os.path.dirname(goldminer.__file__), "tools")])}, tools)

    def test_every_error_the_package_raises_is_a_goldminer_error(self):
        # `raise X(...)` of a built-in exception anywhere in the package (not its
        # tools) is one of these, each with why it is not a GoldminerError kind
        import ast
        import builtins
        allowed = {
            ("run.py", "ValueError"): 2,  # goldminer run's argv, caught by run.main
            ("plan.py", "LookupError"): 2,  # caught in plan.py: the hybrid plan then
            ("_worker.py", "EOFError"): 1,  # a worker's start: it exits, the pool says so
        }
        found = {}
        pkg = os.path.dirname(goldminer.__file__)
        for name in sorted(os.listdir(pkg)):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(pkg, name)) as f:
                tree = ast.parse(f.read(), name)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                        and isinstance(node.exc.func, ast.Name)):
                    t = getattr(builtins, node.exc.func.id, None)
                    if isinstance(t, type) and issubclass(t, BaseException):
                        key = (name, t.__name__)
                        found[key] = found.get(key, 0) + 1
        self.assertEqual(found, allowed)
