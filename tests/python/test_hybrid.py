"""goldminer.hybrid: the C half of a hybrid sample from Python. A PIL image mapped
over the buffer C filled (no copy after C), a uint8 tensor viewing the HWC buffer,
float tensors as the folded ToTensor/Normalize give; the same pixels in each
layout; the draws keyed by Python's seeded `random`; a bad file raises naming it."""
import os
import random

from helpers import GmTest, dataset

TRAIN = {"mode": "train", "size": 40, "scale": (0.08, 1.0), "ratio": (3 / 4, 4 / 3),
         "flip_p": 0.5}


def _first_jpeg(root):
    c = sorted(os.listdir(root))[0]
    return os.path.join(root, c, sorted(os.listdir(os.path.join(root, c)))[0])


class TestHybrid(GmTest):
    needs = ("lib", "torch", "PIL", "numpy")

    def setUp(self):
        super().setUp()
        from goldminer import hybrid
        why = hybrid.has_hybrid()
        if why:
            self.skipTest(why)
        self.h = hybrid
        self.path = _first_jpeg(dataset())

    def sampler(self, **kw):
        c = dict(TRAIN, **kw)
        return self.h.Sampler(c)

    def test_pil_image_maps_the_buffer_c_wrote(self):
        import numpy as np
        im = self.sampler(out="uint8", layout="pil").sample(self.path, 5)
        self.assertEqual((im.mode, im.size), ("RGB", (40, 40)))
        t = self.sampler(out="uint8", layout="uint8").sample(self.path, 5)
        self.assertTrue(np.array_equal(np.asarray(im), t.permute(1, 2, 0).numpy()))
        # PIL holds the bytes C wrote (mapped: read-only, as Image.frombuffer's are),
        # not a copy an unpacker made
        self.assertEqual(im.readonly, 1)

    def test_uint8_tensor_is_a_chw_view_of_hwc_memory(self):
        t = self.sampler(out="uint8", layout="uint8").sample(self.path, 5)
        self.assertEqual(tuple(t.shape), (3, 40, 40))
        self.assertEqual(t.stride(), (1, 120, 3))

    def test_float_output_is_totensor_then_normalize_of_the_same_pixels(self):
        import torch
        u8 = self.sampler(out="uint8", layout="uint8").sample(self.path, 9)
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        f = self.sampler(out="float32", layout="float", mean=mean, std=std).sample(self.path, 9)
        self.assertEqual((f.dtype, tuple(f.shape)), (torch.float32, (3, 40, 40)))
        want = (u8.float() / 255 - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(
            3, 1, 1)
        self.assertLess(float((f - want).abs().max()), 1e-5)
        h = self.sampler(out="float16", layout="float").sample(self.path, 9)
        self.assertEqual(h.dtype, torch.float16)
        self.assertLess(float((h.float() - u8.float() / 255).abs().max()), 1e-3)

    def test_draws_follow_the_seeded_python_generator(self):
        ds = self.h.HybridDataset([(self.path, 3)] * 2, dict(TRAIN, out="uint8",
                                                             layout="uint8"))
        random.seed(77)
        a, ya = ds[0]
        random.seed(77)
        b, _ = ds[1]
        self.assertTrue(bool((a == b).all()))
        self.assertEqual(ya, 3)
        differ = 0
        for s in range(78, 84):
            random.seed(s)
            differ += not bool((ds[0][0] == a).all())
        self.assertEqual(differ, 6)

    def test_a_bad_file_raises_naming_it(self):
        bad = os.path.join(dataset("hybrid-bad", classes=1, per_class=2, bad=True), "class00",
                           "zz_garbage.jpg")
        s = self.sampler(out="uint8", layout="pil")
        with self.assertRaises(OSError) as cm:
            s.sample(bad, 1)
        self.assertIn("zz_garbage.jpg", str(cm.exception))
        with self.assertRaises(OSError) as cm:
            s.sample("/nonexistent/x.jpg", 1)
        self.assertIn("/nonexistent/x.jpg", str(cm.exception))
