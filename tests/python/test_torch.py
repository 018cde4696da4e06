"""goldminer.torch.Loader: (images, labels) like DataLoader over ImageFolder, tensors
over the ring without a copy, the same bytes as the plain binding, the GPU path."""
import contextlib
import ctypes
import gc
import io
import os

from helpers import LIB, GmTest, children, dataset, memfd_maps

import goldminer

SIZE, BATCH, SEED = 32, 8, 11


class TestTorchAdapter(GmTest):
    needs = ("lib", "torch", "numpy")

    def setUp(self):
        super().setUp()
        import torch
        import goldminer.torch as gt
        self.torch, self.gt = torch, gt

    def test_uint8_batches_look_like_dataloader_and_match_the_binding(self):
        torch = self.torch
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE) as l:
            ref = [(goldminer.checksum64(b.data), list(b.labels)) for b in l]
        with self.gt.Loader(root, batch_size=BATCH, workers=2, seed=SEED, size=SIZE,
                            output="uint8") as tl:
            self.assertEqual(len(tl), len(ref))
            got = []
            for x, y in tl:
                self.assertEqual(x.dtype, torch.uint8)
                self.assertEqual(tuple(x.shape), (y.shape[0], 3, SIZE, SIZE))
                self.assertTrue(x.is_contiguous(memory_format=torch.channels_last))
                self.assertEqual(y.dtype, torch.int64)
                # NHWC bytes as the ring holds them
                got.append((goldminer.checksum64(x.permute(0, 2, 3, 1)), y.tolist()))
        self.assertEqual(got, ref)

    def test_float32_batches_are_normalised_nchw(self):
        torch = self.torch
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE,
                              output="float32") as l:
            ref = [goldminer.checksum64(b.data) for b in l]
        with self.gt.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE) as tl:
            got = []
            for x, y in tl:
                self.assertEqual(x.dtype, torch.float32)
                self.assertTrue(x.is_contiguous())
                self.assertEqual(tuple(x.shape), (y.shape[0], 3, SIZE, SIZE))
                got.append(goldminer.checksum64(x))
        self.assertEqual(got, ref)

    def test_float16_batches_are_half_nchw(self):
        torch = self.torch
        root = dataset()
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE,
                              output="float16") as l:
            ref = [goldminer.checksum64(b.data) for b in l]
        spec = ("read | decode | random_resized_crop %d | flip 0.5 | normalize imagenet |"
                " to_chw_f16 | batch %d" % (SIZE, BATCH))
        for kw in (dict(output="float16", batch_size=BATCH, size=SIZE), dict(pipeline=spec)):
            with self.gt.Loader(root, workers=1, seed=SEED, **kw) as tl:
                got = []
                for x, y in tl:
                    self.assertEqual(x.dtype, torch.float16)
                    self.assertTrue(x.is_contiguous())
                    self.assertEqual(tuple(x.shape), (y.shape[0], 3, SIZE, SIZE))
                    got.append(goldminer.checksum64(x))
            self.assertEqual(got, ref, kw)

    def test_tensors_are_views_of_the_ring_and_clones_survive(self):
        with self.gt.Loader(dataset(), batch_size=4, workers=2, seed=1, size=SIZE,
                            output="uint8") as tl:
            it = iter(tl)
            x0, _ = next(it)
            self.assertEqual(x0.data_ptr(), tl.loader._raw.data)  # no copy was made
            kept = x0.clone()
            h = goldminer.checksum64(kept)
            for _ in it:
                pass
            self.assertEqual(goldminer.checksum64(kept), h)
            self.assertNotEqual(goldminer.checksum64(x0.permute(0, 2, 3, 1)),
                                goldminer.checksum64(kept.permute(0, 2, 3, 1)))

    def test_batches_the_caller_keeps_are_never_overwritten_and_dropped_ones_reuse_slots(self):
        # copy=True (goldminer run's C path): a batch kept in any form (the tensor,
        # a view, a NumPy array, its storage; held across more batches than the ring
        # has slots, so most are detached into private copies) holds its bytes to
        # the end; batches dropped at once are views of their slots, not copies.
        torch = self.torch
        root = dataset()
        kw = dict(batch_size=4, workers=2, seed=3, size=128, output="float32", epochs=2)
        with self.gt.Loader(root, **kw) as tl:
            ref = [goldminer.checksum64(x) for _ in range(2) for x, _ in tl]
        forms = (lambda x: x, lambda x: x[1:], lambda x: x.numpy(), lambda x: x.storage())

        def whole(obj):  # the batch's bytes again, from what was kept
            if isinstance(obj, torch.Tensor):
                return obj
            if not hasattr(obj, "dtype") or not hasattr(obj, "shape"):  # a storage
                return torch.tensor([], dtype=torch.float32).set_(obj)
            return torch.from_numpy(obj)
        kept, seen, ptrs = {}, 0, set()
        slots = ctypes.c_uint32()
        with self.gt.Loader(root, copy=True, **kw) as tl:
            gm = tl.loader
            for epoch in range(2):
                for x, _ in tl:
                    k, seen = seen, seen + 1
                    self.assertEqual(goldminer.checksum64(x), ref[k], k)
                    # the workers always have 2 slots to fill
                    held = gm._L.gm_loader_kept(gm._h, ctypes.byref(slots))
                    self.assertLessEqual(held, slots.value - 1, k)
                    if epoch == 0 and k % 2 == 0:  # keep half the first epoch
                        obj = forms[k // 2 % len(forms)](x)
                        kept[k] = (obj, goldminer.checksum64(whole(obj).contiguous()))
                    elif epoch == 1:  # keep none: each batch is its slot's view
                        ptrs.add(x.data_ptr())
                        copied = gm.stats()["kept_copied"]
                        if k + 3 >= len(ref):  # epoch 0's kept ones were copied by now
                            self.assertEqual(copied, len(kept))
                    del x
            self.assertEqual(tl._copy.buffers(), [])  # nothing was copied by Python
        self.assertEqual(seen, len(ref))
        self.assertGreater(len(kept), slots.value)
        for k, (obj, h) in kept.items():
            self.assertEqual(goldminer.checksum64(whole(obj).contiguous()), h, k)
        # a slot's second mapping serves all its batches; a slot whose batch was
        # detached is mapped anew (epoch 0's last 2 kept are detached in epoch 1)
        self.assertLessEqual(len(ptrs), slots.value + 2)

    def test_labels_are_imagefolder_targets(self):
        if not __import__("helpers").have("torchvision"):
            self.skipTest("torchvision is not importable")
        from torchvision import datasets
        root = dataset()
        ds = datasets.ImageFolder(root)
        with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE) as l:
            self.assertEqual(l.num_classes, len(ds.classes))
            for b in l:
                for sid, lab in zip(b.sample_ids, b.labels):
                    self.assertEqual(ds.samples[sid][1], lab)

    def test_training_step_runs_on_the_batches(self):
        torch = self.torch
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(4, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with self.gt.Loader(dataset(), batch_size=BATCH, workers=2, seed=1, size=SIZE,
                            output="uint8") as tl:
            for x, y in tl:
                loss = torch.nn.functional.cross_entropy(model(x.float() / 255), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.assertTrue(torch.isfinite(loss))

    def test_state_dict_resumes_with_the_same_tensors(self):
        kw = dict(batch_size=4, workers=2, seed=5, size=SIZE, output="float32", epochs=2)
        with self.gt.Loader(dataset(), **kw) as tl:
            full = [goldminer.checksum64(x) for _ in range(2) for x, _ in tl]
        with self.gt.Loader(dataset(), **kw) as tl:
            it = iter(tl)
            for _ in range(5):
                next(it)
            sd = tl.state_dict()
        with self.gt.Loader(dataset(), **kw) as tl:
            tl.load_state_dict(sd)
            rest = [goldminer.checksum64(x) for _ in range(2) for x, _ in tl]
        self.assertEqual(rest, full[5:])

    def test_gc_and_close_leave_nothing(self):
        before = set(children())
        tl = self.gt.Loader(dataset(), batch_size=4, workers=2, size=SIZE)
        x, y = next(iter(tl))
        del x, y, tl
        gc.collect()
        self.assertEqual(set(children()) - before, set())
        self.assertEqual(memfd_maps(), [])

    def test_a_tensor_read_after_close_is_stale_not_a_crash(self):
        before = set(children())
        tl = self.gt.Loader(dataset(), batch_size=4, workers=2, size=SIZE)
        x, _ = next(iter(tl))
        h = goldminer.checksum64(x.contiguous())
        tl.close()
        self.assertEqual(set(children()) - before, set(), "workers left after close()")
        self.assertNotEqual(memfd_maps(), [], "the ring stays mapped under a live tensor")
        self.assertEqual(goldminer.checksum64(x.contiguous()), h)
        del x
        gc.collect()
        self.assertEqual(memfd_maps(), [], "the last tensor unmaps the ring")

    def test_slot_is_given_back_only_after_the_device_copy_completed(self):
        # The order the adapter must keep with device="cuda": wait for the copy
        # event of batch k, then ask for batch k+1 (which releases slot k).
        order = []

        class Event:
            def synchronize(self):
                order.append("sync")

        with self.gt.Loader(dataset(), batch_size=4, workers=1, size=SIZE) as tl:
            real = tl.loader._next_raw

            def next_raw():
                order.append("next")
                return real()
            tl.loader._next_raw = next_raw
            it = iter(tl)
            next(it)
            tl._pending = Event()  # as _convert leaves it after a non_blocking copy
            next(it)
            self.assertEqual(order, ["next", "sync", "next"])
            tl._pending = Event()
            order.clear()
            tl.close()  # close waits for the copy too
            self.assertEqual(order, ["sync"])

    def test_cuda_device_without_cuda_raises(self):
        if self.torch.cuda.is_available():
            self.skipTest("a CUDA device is present")
        with self.assertRaisesRegex(RuntimeError, "CUDA"):
            self.gt.Loader(dataset(), batch_size=4, workers=1, size=SIZE, device="cuda")

    def test_a_loader_cannot_be_pickled_and_says_why(self):
        import pickle
        with self.gt.Loader(dataset(), batch_size=4, workers=1, size=SIZE) as l:
            with self.assertRaisesRegex(TypeError, r"^goldminer\.torch\.Loader cannot be "
                                        r"pickled .*worker processes and a shared-memory ring"):
                pickle.dumps(l)


class TestTorchGpuDecode(GmTest):
    """gpu_decode: coefficient slots finished by the trainer (the host path here)."""
    needs = ("lib", "torch", "numpy")

    def setUp(self):
        super().setUp()
        import goldminer.torch as gt
        self.gt = gt

    def _sums(self, gpu, output, mode, epochs=2, root=None, **kw):
        got = []
        with self.gt.Loader(root or dataset(), batch_size=BATCH, workers=2, seed=SEED, size=SIZE,
                            output=output, mode=mode, epochs=epochs, gpu_decode=gpu,
                            **kw) as tl:
            # the consumer keeps its batches and sums them after: its own time
            # per batch stays near nothing (gpu_decode='auto' measures it)
            kept = [(x.clone(), y.clone()) for _ in range(epochs) for x, y in tl]
            on = tl.gpu_decode
        for x, y in kept:
            if output == "uint8":
                x = x.permute(0, 2, 3, 1)  # the ring's NHWC bytes
            got.append((goldminer.checksum64(x.contiguous()), y.tolist()))
        return got, on

    def test_gpu_decode_batches_are_the_cpu_paths_bytes(self):
        for output in ("uint8", "float32"):
            for mode in ("train", "eval"):
                ref, on = self._sums(False, output, mode)
                self.assertFalse(on)
                got, on = self._sums(True, output, mode)
                self.assertTrue(on)
                self.assertEqual(len(got), 2 * 5, (output, mode))  # 36 samples / 8
                self.assertEqual(got, ref, (output, mode))

    def test_gpu_decode_plain_binding_finishes_too(self):
        root = dataset()
        kw = dict(batch_size=BATCH, workers=1, seed=SEED, size=SIZE, epochs=1)
        with goldminer.Loader(root, **kw) as l:
            ref = [(goldminer.checksum64(b.data), list(b.labels)) for b in l]
        with goldminer.Loader(root, gpu_decode=True, **kw) as l:
            got = [(goldminer.checksum64(b.data), list(b.labels)) for b in l]
            self.assertEqual(l.stats()["sample_bytes"] > l.out_bytes, True)
        self.assertEqual(got, ref)

    def test_gpu_decode_auto_stays_off_without_a_device_and_says_why(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("a CUDA device is here: auto may turn it on")
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            got, on = self._sums("auto", "uint8", "train", epochs=1)
        self.assertFalse(on)
        said = err.getvalue()
        self.assertEqual(said.count("gpu_decode='auto'"), 1, said)
        self.assertIn("off: no CUDA device", said)
        ref, _ = self._sums(False, "uint8", "train", epochs=1)
        self.assertEqual(got, ref)

    def test_gpu_decode_auto_turns_on_when_workers_fall_short_and_a_device_is_there(self):
        # A device pretended (torch.cuda.is_available -> True; the batches stay on
        # the host, device=None), and this thread given one CPU (auto weighs a
        # worker's rate x the CPUs it may use): a worker decoding photo-sized
        # JPEGs (500x375: 650-1,400 img/s here) cannot keep up with a consumer
        # that does nothing (2,800-11,000 img/s, three spinning loops beside it),
        # so auto turns it on mid-epoch; the bytes stay the CPU path's. (On
        # dataset()'s 40-96 px images with both CPUs: a worker made ~14,000
        # img/s, x2 against the consumer's ~23,000; a loaded machine read
        # 'enough'.)
        import contextlib
        import io
        import torch
        real, root = torch.cuda.is_available, dataset("photo-sized", synth=True)
        cpus = os.sched_getaffinity(0)
        err = io.StringIO()
        try:
            torch.cuda.is_available = lambda: True
            os.sched_setaffinity(0, {min(cpus)})
            with contextlib.redirect_stderr(err):
                got, on = self._sums("auto", "float32", "train", epochs=3, root=root,
                                     shuffle=True)
        finally:
            torch.cuda.is_available = real
            os.sched_setaffinity(0, cpus)
        said = err.getvalue()
        self.assertEqual(said.count("gpu_decode='auto'"), 1, said)
        self.assertIn("gpu_decode='auto': on:", said)
        self.assertTrue(on)
        ref, _ = self._sums(False, "float32", "train", epochs=3, root=root, shuffle=True)
        self.assertEqual(got, ref)

    def test_gpu_decode_refuses_other_values(self):
        for bad in ("yes", 1, None):
            with self.assertRaises(ValueError):
                self.gt.Loader(dataset(), gpu_decode=bad)

    def _where(self, device, plugin=None):
        """(gpu_decode_on_device, gpu_decode_reason, stderr) of a gpu_decode=True
        Loader on `device`, torch pretending a CUDA device (no batch is taken, so
        none goes near one); plugin: $GOLDMINER_CUDA_PLUGIN for the open."""
        import torch
        real, env = torch.cuda.is_available, os.environ.get("GOLDMINER_CUDA_PLUGIN")
        err = io.StringIO()
        self.gt._SAID.clear()  # (the line is said once a process)
        try:
            torch.cuda.is_available = lambda: True
            if plugin:
                os.environ["GOLDMINER_CUDA_PLUGIN"] = plugin
            with contextlib.redirect_stderr(err):
                with self.gt.Loader(dataset(), batch_size=BATCH, workers=1, size=SIZE,
                                    device=device, gpu_decode=True) as tl:
                    got = (tl.gpu_decode_on_device, tl.gpu_decode_reason)
        finally:
            torch.cuda.is_available = real
            if env is None:
                os.environ.pop("GOLDMINER_CUDA_PLUGIN", None)
            else:
                os.environ["GOLDMINER_CUDA_PLUGIN"] = env
        return got + (err.getvalue(),)

    def test_gpu_decode_on_cuda_without_a_device_finishes_on_the_host_and_says_why(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("a CUDA device is here (TestTorchCuda finishes on it)")
        on, why, said = self._where("cuda")
        self.assertFalse(on)
        built = os.path.exists(os.path.join(os.path.dirname(LIB), "libgoldminer-cuda.so"))
        # the plugin is looked for first, then the device that libgoldminer sees
        missing = "no CUDA device: " if built else "libgoldminer-cuda.so not built: "
        self.assertIn("gpu_decode=True given; finished on the host, then copied to cuda: "
                      + missing, why)
        self.assertEqual(said.count("\n"), 1, said)
        self.assertIn("goldminer.torch.Loader: gpu_decode: finished on the host, then copied "
                      "to cuda: " + missing, said)

    def test_gpu_decode_without_the_plugin_finishes_on_the_host_and_says_not_built(self):
        on, why, said = self._where("cuda", plugin="/nonexistent/libgoldminer-cuda.so")
        self.assertFalse(on)
        self.assertIn("finished on the host, then copied to cuda: libgoldminer-cuda.so not "
                      "built: no /nonexistent/libgoldminer-cuda.so", why)
        self.assertIn("make builds it", why)
        self.assertEqual(said.count("libgoldminer-cuda.so not built"), 1, said)

    def test_gpu_decode_without_a_device_argument_finishes_on_the_host_silently(self):
        on, why, said = self._where(None)
        self.assertFalse(on)
        self.assertEqual(why, "gpu_decode=True given; finished on the host (device=None)")
        self.assertEqual(said, "")


class TestTorchCuda(GmTest):
    needs = ("lib", "torch", "numpy", "cuda")

    def test_cuda_batches_have_the_ring_bytes(self):
        import goldminer.torch as gt
        root = dataset()
        for output in ("uint8", "float32"):
            with goldminer.Loader(root, batch_size=BATCH, workers=1, seed=SEED, size=SIZE,
                                  output=output) as l:
                ref = [goldminer.checksum64(b.data) for b in l]
            with gt.Loader(root, batch_size=BATCH, workers=2, seed=SEED, size=SIZE,
                           output=output, device="cuda") as tl:
                got = []
                for x, y in tl:
                    self.assertEqual(x.device.type, "cuda")
                    self.assertEqual(y.device.type, "cuda")
                    if output == "uint8":
                        x = x.permute(0, 2, 3, 1)
                    got.append(goldminer.checksum64(x.contiguous().cpu()))
                st = tl.stats()
            self.assertEqual(got, ref, output)
        self.assertTrue(st["pinned"], "the ring was not registered with CUDA")

    def test_gpu_decode_on_the_device_gives_the_cpu_paths_bytes(self):
        # device="cuda" with the plugin built and a device: the kernels finish every
        # batch into a CUDA tensor, the bytes of gpu_decode=False's
        import goldminer.torch as gt
        root = dataset()
        for output in ("uint8", "float32", "float16"):
            sums = {}
            for gpu in (False, True):
                with gt.Loader(root, batch_size=BATCH, workers=2, seed=SEED, size=SIZE,
                               output=output, device="cuda", gpu_decode=gpu) as tl:
                    if gpu and not tl.gpu_decode_on_device:
                        self.skipTest(tl.gpu_decode_reason)
                    got = []
                    for x, y in tl:
                        self.assertEqual(x.device.type, "cuda")
                        if output == "uint8":
                            x = x.permute(0, 2, 3, 1)
                        got.append((goldminer.checksum64(x.contiguous().cpu()), y.tolist()))
                sums[gpu] = got
            self.assertEqual(sums[True], sums[False], output)
