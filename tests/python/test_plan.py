"""goldminer.torch.plan: which ops of an ImageFolder's transform run in C, which in
Python, and why (unknown op, unsupported parameter, order); the path (C, hybrid,
python) and the C pipeline; and that the C path's bytes, goldminer's own, keep
torchvision's statistics: crop scale and ratio and the flip rate over 10,000 draws
(two-sample Kolmogorov-Smirnov against torchvision's get_params, fixed seeds),
ColorJitter's factors and order likewise, its pixels torchvision's tensor ops with
the same draws, and eval output torchvision's bytes on the photos (within 0.1/255
in float)."""
import contextlib
import math
import os
import random
import sys
import types
from unittest import mock

from helpers import GmTest, dataset, tmpdir

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PHOTOS = os.environ.get("PHOTOS") or "/var/tmp/goldminer-photos"


@contextlib.contextmanager
def v2_stand_in():
    """torchvision.transforms.v2 and torchvision.tv_tensors as stand-ins, in
    sys.modules and as attributes of their parents for the with-block only, for
    a torchvision without them (0.14 here). Each class has the module, name and
    public attributes, as __init__ stores them, of the real one: pytorch/vision
    torchvision/transforms/v2/_geometry.py and _misc.py at commit 0077a7c5 (the
    0.16 series: tv_tensors; antialias "warn" until 0.17 made it True, the
    default here), _type_conversion.py at 0ceda796, _color.py at 02526afc,
    _container.py at 030495ed and _auto_augment.py's RandAugment (num_ops,
    magnitude, num_magnitude_bins; interpolation and fill from its base). None
    transforms anything: the plan only reads them."""
    import torch
    import torchvision
    from torchvision import transforms
    from torchvision.transforms import InterpolationMode as IM

    def cls(module, name, init=None, base=object):
        body = {"__module__": "torchvision." + module}
        if init is not None:
            body["__init__"] = init
        return type(name, (base,), body)

    def square(size):  # v2/_utils.py _setup_size: an int or (n,) is (n, n)
        return (size, size) if isinstance(size, int) else \
            (size[0], size[0]) if len(size) == 1 else tuple(size)

    def rrc(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
            interpolation=IM.BILINEAR, antialias=True):
        self.size, self.scale, self.ratio = square(size), scale, ratio
        self.interpolation, self.antialias = interpolation, antialias

    def resize(self, size, interpolation=IM.BILINEAR, max_size=None, antialias=True):
        self.size = [size] if isinstance(size, int) else list(size)
        self.interpolation, self.max_size, self.antialias = interpolation, max_size, antialias

    def jitter(self, brightness=None, contrast=None, saturation=None, hue=None):
        def check(v, center):  # ColorJitter._check_input: None, or (lo, hi) floats
            if v is None:
                return None
            v = [center - v, center + v] if isinstance(v, (int, float)) else list(v)
            if center == 1:
                v[0] = max(v[0], 0.0)
            return None if v[0] == v[1] == center else (float(v[0]), float(v[1]))
        self.brightness, self.contrast = check(brightness, 1), check(contrast, 1)
        self.saturation, self.hue = check(saturation, 1), check(hue, 0)

    def rand_augment(self, *, num_ops=2, magnitude=9, num_magnitude_bins=31,
                     interpolation=IM.NEAREST, fill=None):
        self.num_ops, self.magnitude, self.num_magnitude_bins = num_ops, magnitude, \
            num_magnitude_bins
        self.interpolation, self.fill = interpolation, fill

    def set_attrs(*names, **defaults):
        def init(self, *args, **kw):
            for k, v in zip(names, args):
                kw[k] = v
            for k in names:
                setattr(self, k, kw[k] if k in kw else defaults[k])
        return init

    tvt = types.ModuleType("torchvision.tv_tensors")
    tvt.Image = cls("tv_tensors._image", "Image", base=torch.Tensor)
    tvt.Image.__new__ = lambda c, data: torch.as_tensor(data).as_subclass(c)
    v2 = types.ModuleType("torchvision.transforms.v2")
    geo, misc = "transforms.v2._geometry", "transforms.v2._misc"
    for name, module, init in (
            ("RandomResizedCrop", geo, rrc),
            ("RandomHorizontalFlip", geo, set_attrs("p", p=0.5)),
            ("Resize", geo, resize),
            ("CenterCrop", geo, lambda self, size: setattr(self, "size", square(size))),
            ("ToImage", "transforms.v2._type_conversion", None),
            ("PILToTensor", "transforms.v2._type_conversion", None),
            ("ToDtype", misc, set_attrs("dtype", "scale", scale=False)),
            ("ConvertImageDtype", misc, set_attrs("dtype", dtype=torch.float32)),
            ("Normalize", misc, set_attrs("mean", "std", "inplace", inplace=False)),
            ("Compose", "transforms.v2._container", set_attrs("transforms")),
            ("ColorJitter", "transforms.v2._color", jitter),
            ("RandAugment", "transforms.v2._auto_augment", rand_augment)):
        setattr(v2, name, cls(module, name, init))
    with mock.patch.dict(sys.modules, {"torchvision.transforms.v2": v2,
                                       "torchvision.tv_tensors": tvt}), \
            mock.patch.object(transforms, "v2", v2, create=True), \
            mock.patch.object(torchvision, "tv_tensors", tvt, create=True):
        yield v2, tvt


class TestPlan(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL")

    def setUp(self):
        super().setUp()
        import torch
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms as T
        import goldminer.torch as gt
        self.torch, self.DL, self.ds, self.T, self.gt = torch, DataLoader, datasets, T, gt

    def plan(self, ops, root=None, **kw):
        T = self.T
        ds = self.ds.ImageFolder(root or dataset(), T.Compose(ops) if ops is not None else None,
                                 target_transform=kw.pop("target_transform", None))
        return self.gt.plan(self.DL(ds, batch_size=kw.pop("batch_size", 8), **kw))

    def wheres(self, p):
        return [(o.text.split("(")[0], o.where) for o in p.ops]

    def test_the_train_recipe_runs_whole_in_c(self):
        T = self.T
        p = self.plan([T.RandomResizedCrop(32, scale=(0.2, 1)), T.RandomHorizontalFlip(0.3),
                       T.ToTensor(), T.Normalize(MEAN, STD)], shuffle=True)
        self.assertEqual(p.path, "C", p.text())
        self.assertTrue(all(o.where == "C" for o in p.ops))
        self.assertEqual(p.spec, "read | decode | random_resized_crop 32 scale=0.2,1 "
                         "ratio=0.75,1.33333333 | flip 0.3 | normalize 0.485,0.456,0.406/"
                         "0.229,0.224,0.225 | to_chw_f32 | batch 8")
        d = p.as_dict()
        self.assertEqual((d["path"], len(d["ops"]), d["c"]["out"]), ("C", 4, "float32"))
        self.assertIn("C pipeline: read | decode", p.text())

    def test_eval_and_uint8_and_converted_recipes_run_in_c(self):
        T, torch = self.T, self.torch
        p = self.plan([T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.assertEqual((p.path, p.c["mode"], p.c["resize"]), ("C", "eval", 40))
        self.assertIn("resize 40 | center_crop 32", p.spec)
        p = self.plan([T.RandomResizedCrop(32), T.PILToTensor()])
        self.assertEqual((p.path, p.c["out"]), ("C", "uint8"))
        p = self.plan([T.RandomResizedCrop(32), T.PILToTensor(),
                       T.ConvertImageDtype(torch.float16), T.Normalize(MEAN, STD)])
        self.assertEqual((p.path, p.c["out"]), ("C", "float16"), p.text())

    def test_a_python_op_after_a_c_prefix_makes_a_hybrid(self):
        T = self.T
        p = self.plan([T.RandomResizedCrop(32), T.RandomHorizontalFlip(),
                       T.GaussianBlur(3), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.assertEqual(p.path, "hybrid")
        self.assertEqual(self.wheres(p), [("RandomResizedCrop", "C"),
                                          ("RandomHorizontalFlip", "C"),
                                          ("GaussianBlur", "python"), ("ToTensor", "python"),
                                          ("Normalize", "python")])
        self.assertIn("unknown op GaussianBlur", p.ops[2].why)
        self.assertEqual(p.ops[3].why, "order: after GaussianBlur")
        self.assertEqual(p.c["layout"], "pil")  # GaussianBlur gets a PIL image
        p = self.plan([T.RandomResizedCrop(32), T.ToTensor(), T.Normalize(MEAN, STD),
                       T.RandomErasing()])
        self.assertEqual((p.path, p.c["layout"]), ("hybrid", "float"))  # a tensor
        self.assertEqual(self.wheres(p)[-1], ("RandomErasing", "python"))
        p = self.plan([T.RandomResizedCrop(32), T.RandAugment(), T.ToTensor()])
        self.assertEqual((p.path, p.ops[1].where), ("hybrid", "python"))

    def test_color_jitter_runs_in_c_with_its_ranges(self):
        T = self.T
        p = self.plan([T.RandomResizedCrop(32), T.RandomHorizontalFlip(),
                       T.ColorJitter(0.4, (0.5, 2.0), 0), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.assertEqual(p.path, "C", p.text())
        self.assertEqual(p.c["jitter"], ((0.6, 1.4), (0.5, 2.0), None, None))
        self.assertIn("| flip 0.5 | color_jitter brightness=0.6,1.4 contrast=0.5,2"
                      " saturation=1,1 hue=0,0 | normalize", p.spec)
        # the C loader parses what the plan wrote
        loader = self.gt.Loader(dataset(), pipeline=p.spec, workers=1)
        x, _ = next(iter(loader))
        self.assertEqual(tuple(x.shape), (8, 3, 32, 32))
        loader.close()
        p = self.plan([T.RandomResizedCrop(32), T.ColorJitter(0.4, 0.4, 0.4, 0.1),
                       T.ToTensor()])
        self.assertEqual(p.path, "C", p.text())
        self.assertEqual(p.c["jitter"][3], (-0.1, 0.1))
        self.assertIn("saturation=0.6,1.4 hue=-0.1,0.1 | to_chw_f32", p.spec)
        p = self.plan([T.RandomResizedCrop(32), T.ColorJitter(brightness=(0, 0)),
                       T.ToTensor()])  # every pixel black: not a range C takes
        self.assertEqual((p.path, p.ops[1].where), ("hybrid", "python"), p.text())
        self.assertIn("unsupported parameter: brightness=(0, 0)", p.ops[1].why)
        p = self.plan([T.RandomResizedCrop(32), T.ToTensor(), T.Normalize(MEAN, STD),
                       T.ColorJitter(0.4)])
        self.assertEqual((p.path, p.ops[3].where), ("hybrid", "python"), p.text())
        self.assertIn("order: ColorJitter after Normalize", p.ops[3].why)

    def test_unsupported_parameters_and_orders_are_named(self):
        T = self.T
        from torchvision.transforms import InterpolationMode as IM
        cases = [
            ([T.RandomResizedCrop(32, interpolation=IM.NEAREST), T.ToTensor()],
             "unsupported parameter: interpolation"),
            ([T.RandomResizedCrop((32, 48)), T.ToTensor()], "unsupported parameter: size"),
            ([T.RandomHorizontalFlip(), T.RandomResizedCrop(32), T.ToTensor()], "order:"),
            ([T.Resize(40), T.ToTensor()], "order: C makes Resize only with a CenterCrop"),
            ([T.Resize(30), T.CenterCrop(32), T.ToTensor()], "unsupported parameter:"
             " CenterCrop size"),
            ([T.Resize((40, 50)), T.CenterCrop(32), T.ToTensor()],
             "unsupported parameter: size"),
            ([T.Grayscale(3), T.RandomResizedCrop(32), T.ToTensor()], "unknown op Grayscale"),
            ([T.ColorJitter(0.4), T.RandomResizedCrop(32), T.ToTensor()],
             "order: C makes ColorJitter only after the crop"),
        ]
        for ops, why in cases:
            p = self.plan(ops)
            self.assertEqual(p.path, "python", p.text())
            self.assertIn(why, p.ops[0].why, p.text())
            self.assertTrue(all(o.where == "python" for o in p.ops))
        p = self.plan([T.RandomResizedCrop(32), T.ToTensor(), T.ToTensor()])
        self.assertEqual(p.path, "hybrid")
        self.assertIn("order: ToTensor after ToTensor", p.ops[2].why)

    def test_options_only_python_honours_keep_c_per_sample_in_a_hybrid(self):
        T = self.T
        from torch.utils.data import Sampler, WeightedRandomSampler

        class Every2nd(Sampler):  # a sampler of the user's: Python workers iterate it
            def __iter__(self):
                return iter(range(0, 36, 2))

            def __len__(self):
                return 18
        ops = [T.RandomResizedCrop(32), T.ToTensor()]
        p = self.plan(ops, sampler=Every2nd(None))
        self.assertEqual(p.path, "hybrid")
        self.assertIn("sampler Every2nd (not one of torch's", p.why)
        p = self.plan(ops, sampler=WeightedRandomSampler([1.0] * 36, 36))  # torch's: C
        self.assertEqual(p.path, "C", p.text())
        self.assertIn("WeightedRandomSampler's indices", " ".join(p.notes))
        p = self.plan(ops, target_transform=lambda y: y + 1)
        self.assertIn("target_transform", p.why)
        p = self.plan(ops, collate_fn=lambda b: b)
        self.assertIn("collate_fn", p.why)

    def test_other_datasets_and_files_stay_in_python(self):
        T, torch = self.T, self.torch
        p = self.gt.plan(self.DL(torch.utils.data.TensorDataset(torch.zeros(4, 2))))
        self.assertEqual(p.path, "python")
        self.assertIn("TensorDataset, not torchvision's ImageFolder", p.why)
        from PIL import Image
        root = os.path.join(tmpdir(), "withpng")
        os.makedirs(os.path.join(root, "a"), exist_ok=True)
        Image.new("RGB", (8, 8)).save(os.path.join(root, "a", "x.png"))
        Image.new("RGB", (8, 8)).save(os.path.join(root, "a", "y.jpg"))
        p = self.plan([T.RandomResizedCrop(32), T.ToTensor()], root=root)
        self.assertEqual(p.path, "python")
        self.assertIn("x.png is not a JPEG", p.why)
        p = self.plan(None)
        self.assertEqual(p.path, "python")

    def test_v2_transforms_are_read_like_v1(self):
        try:
            from torchvision.transforms import v2
        except ImportError:
            self.skipTest("torchvision %s has no transforms.v2"
                          % __import__("torchvision").__version__)
        if not hasattr(v2, "ToImage"):
            self.skipTest("torchvision %s's transforms.v2 predates ToImage and ToDtype's"
                          " scale (0.16)" % __import__("torchvision").__version__)
        for to_tensor in (v2.PILToTensor, v2.ToImage):
            ds = self.ds.ImageFolder(dataset(), v2.Compose([
                v2.RandomResizedCrop(32), v2.RandomHorizontalFlip(), to_tensor(),
                v2.ToDtype(self.torch.float32, scale=True), v2.Normalize(MEAN, STD)]))
            p = self.gt.plan(self.DL(ds, batch_size=4))
            self.assertEqual(p.path, "C", p.text())

    def v2_plan(self, v2, ops, **kw):
        ds = self.ds.ImageFolder(dataset(), v2.Compose(ops))
        return self.gt.plan(self.DL(ds, batch_size=kw.pop("batch_size", 8), **kw))

    def test_v2_stand_in_recipes_take_the_paths_of_their_v1_twins(self):
        T, torch, f32 = self.T, self.torch, self.torch.float32
        with v2_stand_in() as (v2, tvt):
            import torchvision
            from torchvision.transforms import v2 as imported
            self.assertIs(imported, v2)
            self.assertIs(torchvision.tv_tensors, tvt)
            p = self.v2_plan(v2, [v2.RandomResizedCrop(32, scale=(0.2, 1)),
                                  v2.RandomHorizontalFlip(0.3), v2.ToImage(),
                                  v2.ToDtype(f32, scale=True), v2.Normalize(MEAN, STD)])
            self.assertEqual(p.path, "C", p.text())
            self.assertEqual(p.spec, self.plan([T.RandomResizedCrop(32, scale=(0.2, 1)),
                                                T.RandomHorizontalFlip(0.3), T.ToTensor(),
                                                T.Normalize(MEAN, STD)]).spec)
            for to_tensor in (v2.ToImage, v2.PILToTensor):  # uint8, unscaled, in C
                p = self.v2_plan(v2, [v2.RandomResizedCrop(32), to_tensor()])
                self.assertEqual((p.path, p.c["out"]), ("C", "uint8"), p.text())
                self.assertTrue(p.spec.endswith("| to_hwc_u8 | batch 8"), p.spec)
            p = self.v2_plan(v2, [v2.Resize(40), v2.CenterCrop(32), v2.ToImage(),
                                  v2.ConvertImageDtype(torch.float16), v2.Normalize(MEAN, STD)])
            self.assertEqual((p.path, p.c["mode"], p.c["resize"], p.c["out"]),
                             ("C", "eval", 40, "float16"), p.text())
            p = self.v2_plan(v2, [v2.RandomResizedCrop(32), v2.ColorJitter(0.4, 0.4, 0.4, 0.1),
                                  v2.PILToTensor(), v2.ToDtype(f32, scale=True)])
            self.assertEqual((p.path, p.c["jitter"]),
                             ("C", ((0.6, 1.4), (0.6, 1.4), (0.6, 1.4), (-0.1, 0.1))), p.text())
            # an op C does not make after the prefix: a hybrid, handed a uint8 tensor
            p = self.v2_plan(v2, [v2.RandomResizedCrop(32), v2.RandomHorizontalFlip(),
                                  v2.ToImage(), v2.RandAugment(), v2.ToDtype(f32, scale=True)])
            self.assertEqual(self.wheres(p), [("RandomResizedCrop", "C"),
                                              ("RandomHorizontalFlip", "C"), ("ToImage", "C"),
                                              ("RandAugment", "python"), ("ToDtype", "python")])
            self.assertIn("unknown op RandAugment", p.ops[3].why)
            self.assertEqual((p.path, p.c["layout"], p.c.get("tv_image")),
                             ("hybrid", "uint8", True))
        import torchvision
        from torchvision import transforms
        self.assertIsNot(sys.modules.get("torchvision.transforms.v2"), v2)
        self.assertIsNot(getattr(transforms, "v2", None), v2)
        self.assertIsNot(sys.modules.get("torchvision.tv_tensors"), tvt)
        self.assertIsNot(getattr(torchvision, "tv_tensors", None), tvt)

    def test_v2_stand_in_conversions_c_does_not_make_are_named(self):
        torch, f32 = self.torch, self.torch.float32
        from torchvision.transforms import InterpolationMode as IM
        with v2_stand_in() as (v2, tvt):
            crop = v2.RandomResizedCrop(32)
            cases = [  # (ops after the crop, why the C prefix stops at the second)
                ([v2.ToImage(), v2.ToDtype(f32)], "unsupported parameter: ToDtype(dtype="
                 "torch.float32, scale=False)"),
                ([v2.PILToTensor(), v2.ToDtype(torch.uint8, scale=True)],
                 "unsupported parameter: ToDtype"),
                # a table by type: a plain tensor after PILToTensor takes "others"
                ([v2.PILToTensor(), v2.ToDtype({tvt.Image: f32, "others": None}, scale=True)],
                 "unsupported parameter: ToDtype"),
                ([v2.PILToTensor(), v2.ToDtype({tvt.Image: f32}, scale=True)],
                 "unsupported parameter: ToDtype"),
                ([v2.ToImage(), v2.ToDtype({torch.Tensor: f32}, scale=True)],
                 "unsupported parameter: ToDtype"),
            ]
            for ops, why in cases:
                p = self.v2_plan(v2, [crop] + ops)
                self.assertEqual((p.path, p.c["out"]), ("hybrid", "uint8"), p.text())
                self.assertEqual([o.where for o in p.ops], ["C", "C", "python"], p.text())
                self.assertIn(why, p.ops[2].why, p.text())
            for table, to_tensor, out in (
                    ({tvt.Image: f32, "others": None}, v2.ToImage, "float32"),
                    ({torch.Tensor: torch.float16}, v2.PILToTensor, "float16"),
                    ({"others": f32}, v2.ToImage, "float32")):
                p = self.v2_plan(v2, [crop, to_tensor(), v2.ToDtype(table, scale=True)])
                self.assertEqual((p.path, p.c["out"]), ("C", out), p.text())
            cases = [
                ([v2.Resize(40, max_size=50), v2.CenterCrop(32), v2.ToImage()],
                 "unsupported parameter: size=[40] (C resizes the shorter side to an int,"
                 " no max_size)"),
                ([v2.Resize((40, 50)), v2.CenterCrop(32)], "unsupported parameter: size=[40, 50]"),
                ([v2.RandomResizedCrop(32, interpolation=IM.NEAREST), v2.ToImage()],
                 "unsupported parameter: interpolation"),
                ([v2.ToImage(), v2.RandomResizedCrop(32), v2.ToDtype(f32, scale=True)],
                 "order: C makes ToImage only after the crop"),
                ([v2.RandAugment(), v2.RandomResizedCrop(32), v2.ToImage()],
                 "unknown op RandAugment"),
            ]
            for ops, why in cases:
                p = self.v2_plan(v2, ops)
                self.assertEqual(p.path, "python", p.text())
                self.assertIn(why, p.ops[0].why, p.text())

    def test_v2_stand_in_hybrid_hands_on_a_tv_tensors_image_after_to_image(self):
        from goldminer.hybrid import HybridDataset, has_hybrid
        if has_hybrid():
            self.skipTest(has_hybrid())
        seen = []

        class Look:  # not torchvision's: the plan runs it in Python, after C's prefix
            def __call__(self, x):
                seen.append((type(x), x.dtype, tuple(x.shape)))
                return x
        with v2_stand_in() as (v2, tvt):
            for ops, dtype in (([v2.ToImage()], self.torch.uint8),
                               ([v2.ToImage(), v2.ToDtype(self.torch.float32, scale=True)],
                                self.torch.float32),
                               ([v2.PILToTensor()], self.torch.uint8)):
                p = self.v2_plan(v2, [v2.RandomResizedCrop(32)] + ops + [Look()])
                self.assertEqual(p.path, "hybrid", p.text())
                ds = HybridDataset(self.ds.ImageFolder(dataset()).samples, p.c, Look())
                ds[0]
                want = tvt.Image if isinstance(ops[0], v2.ToImage) else self.torch.Tensor
                self.assertEqual(seen[-1], (want, dtype, (3, 32, 32)), p.text())


def ks(a, b):
    """The two-sample Kolmogorov-Smirnov statistic D of samples a and b: the largest
    gap between their empirical CDFs, taken at every value (ties - the fallback
    crop's point mass - count whole)."""
    import bisect
    a, b = sorted(a), sorted(b)
    return max(abs(bisect.bisect_right(a, v) / len(a) - bisect.bisect_right(b, v) / len(b))
               for v in set(a) | set(b))


class TestCPathStatistics(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL", "numpy")
    N = 10000
    # D above which two samples of N differ at the 0.1% level: 1.949 * sqrt(2 / N)
    D_CRIT = 1.949 * math.sqrt(2.0 / N)

    def setUp(self):
        super().setUp()
        from goldminer import hybrid
        why = hybrid.has_hybrid()
        if why:
            self.skipTest(why)
        self.h = hybrid

    def test_crop_scale_ratio_and_flip_follow_torchvisions_distributions(self):
        import torch
        from torchvision import transforms as T
        rnd = random.Random(2024)  # the C draw keys; torch's generator seeded below
        for (w, h), scale, ratio in (((500, 375), (0.08, 1.0), (3 / 4, 4 / 3)),
                                     ((240, 640), (0.25, 0.9), (0.5, 2.0))):
            c = {"mode": "train", "size": 224, "scale": scale, "ratio": ratio, "flip_p": 0.5}
            torch.manual_seed(7)
            img = torch.empty(3, h, w)
            tv = [T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
                  for _ in range(self.N)]
            tv_s = [bw * bh / (w * h) for _, _, bh, bw in tv]
            tv_r = [math.log(bw / bh) for _, _, bh, bw in tv]
            tv_x = [j / max(w - bw, 1) for _, j, _, bw in tv]
            gm_s, gm_r, gm_x, flips = [], [], [], 0
            for _ in range(self.N):
                (x0, y0, x1, y1), flip = self.h.window(c, w, h, rnd.getrandbits(64))
                gm_s.append((x1 - x0) * (y1 - y0) / (w * h))
                gm_r.append(math.log((x1 - x0) / (y1 - y0)))
                gm_x.append(x0 / max(w - (x1 - x0), 1))
                flips += flip
            for name, a, b in (("scale", gm_s, tv_s), ("log ratio", gm_r, tv_r),
                               ("left offset", gm_x, tv_x)):
                d = ks(a, b)
                self.assertLess(d, self.D_CRIT, "%s of %dx%d: KS D %.4f >= %.4f"
                                % (name, w, h, d, self.D_CRIT))
            # binomial(10000, 0.5): 4 standard deviations are 200
            self.assertLess(abs(flips - self.N // 2), 200, flips)

    def test_the_ks_statistic_tells_a_wrong_distribution(self):
        rnd = random.Random(1)
        a = [rnd.uniform(0.08, 1.0) for _ in range(self.N)]
        b = [rnd.uniform(0.10, 1.0) for _ in range(self.N)]  # scale 0.10 instead of 0.08
        self.assertGreater(ks(a, b), self.D_CRIT)
        self.assertLess(ks(a, [rnd.uniform(0.08, 1.0) for _ in range(self.N)]), self.D_CRIT)

    def test_jitter_factors_and_order_follow_torchvisions_distributions(self):
        import itertools
        import torch
        from torchvision import transforms as T
        rnd = random.Random(2025)
        c = {"mode": "train", "size": 224,
             "jitter": ((0.6, 1.4), (0.5, 2.0), (0.0, 1.3), (-0.2, 0.2))}
        torch.manual_seed(11)
        tv = [T.ColorJitter.get_params([0.6, 1.4], [0.5, 2.0], [0.0, 1.3], [-0.2, 0.2])
              for _ in range(self.N)]
        names = ("brightness", "contrast", "saturation", "hue")
        gm = [self.h.jitter_draw(c, rnd.getrandbits(64)) for _ in range(self.N)]
        for k, name in enumerate(names):
            d = ks([f[name] for _, f in gm], [float(t[1 + k]) for t in tv])
            self.assertLess(d, self.D_CRIT, "%s: KS D %.4f >= %.4f" % (name, d, self.D_CRIT))
        # the order: a permutation of the 4 ops, as torchvision's randperm(4)
        tv_orders = [tuple(names[int(i)] for i in t[0]) for t in tv]
        for order in itertools.permutations(names):
            n_gm = sum(1 for o, _ in gm if tuple(o) == order)
            n_tv = tv_orders.count(order)
            # binomial(10000, 1/24): sd 20; 5 sd, and 5 sd of the difference of two
            self.assertLess(abs(n_gm - self.N / 24), 100, (order, n_gm))
            self.assertLess(abs(n_gm - n_tv), 141, (order, n_gm, n_tv))
        self.assertEqual(self.h.jitter_draw(dict(c, jitter=((0.6, 1.4), None, None, None)),
                                            5)[0], ["brightness"])

    def test_jitter_pixels_are_torchvisions_tensor_ops_with_the_same_draws(self):
        import glob
        import torch
        from torchvision.transforms import functional as F
        files = sorted(glob.glob(os.path.join(PHOTOS, "*", "*.jpg")))[::97]
        if len(files) < 20:
            self.skipTest("no photos at %s (PHOTOS=DIR, or bash /work/shared/datasets/"
                          "make-photos.sh DIR)" % PHOTOS)
        base = {"mode": "train", "size": 96, "scale": (0.08, 1.0), "ratio": (0.75, 4 / 3),
                "flip_p": 0.5}
        jit = ((0.3, 1.7), (0.2, 1.8), (0.0, 2.0), (-0.5, 0.5))
        plain = self.h.Sampler(dict(base, out="uint8", layout="uint8"))
        ops = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
               "saturation": F.adjust_saturation, "hue": F.adjust_hue}
        worst, moved = 0.0, 0.0
        for out, mean, std in (("float32", (0, 0, 0), (1, 1, 1)), ("float32", MEAN, STD),
                               ("float16", MEAN, STD)):
            c = dict(base, jitter=jit, out=out, layout="float", mean=mean, std=std)
            s = self.h.Sampler(c)
            for k, f in enumerate(files):
                key = 1000 + k  # the same crop and flip with and without the jitter
                want = plain.sample(f, key).float() / 255
                order, factor = self.h.jitter_draw(c, key)
                for name in order:
                    want = ops[name](want, factor[name])
                got = s.sample(f, key).float()
                want = F.normalize(want, list(mean), list(std))
                worst = max(worst, float((got - want).abs().max() * torch.tensor(std).min()))
                moved = max(moved, float((want - F.normalize(plain.sample(f, key).float() / 255,
                                                            list(mean), list(std))).abs().max()))
            # float16 keeps 11 bits: half an ulp of values up to ~2.7 is 1/1024
            self.assertLess(worst, 1e-3 if out == "float16" else 1e-5, (out, worst))
        self.assertGreater(moved, 0.1)  # the jitter did change the pixels
        u8 = self.h.Sampler(dict(base, jitter=jit, out="uint8", layout="uint8"))
        f32 = self.h.Sampler(dict(base, jitter=jit, out="float32", layout="float"))
        for k, f in enumerate(files[:5]):  # uint8: the float values rounded, half up
            d = u8.sample(f, k).float() - (f32.sample(f, k) * 255 + 0.5).floor()
            self.assertEqual(float(d.abs().max()), 0.0, f)

    def test_eval_output_is_torchvisions_bytes_on_photos(self):
        import glob
        import torch
        from PIL import Image
        from torchvision import transforms as T
        files = sorted(glob.glob(os.path.join(PHOTOS, "*", "*.jpg")))[::5]
        if len(files) < 100:
            self.skipTest("no photos at %s (PHOTOS=DIR, or bash /work/shared/datasets/"
                          "make-photos.sh DIR)" % PHOTOS)
        c = {"mode": "eval", "size": 224, "resize": 256, "out": "float32", "layout": "float",
             "mean": MEAN, "std": STD}
        s = self.h.Sampler(c)
        tv = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
        std = torch.tensor(STD).view(3, 1, 1)
        total, signed = 0.0, 0.0
        for f in files:
            d = (s.sample(f, 0) - tv(Image.open(f).convert("RGB"))) * std  # in [0,1] units
            total += float(d.abs().mean())
            signed += float(d.mean())
        mad, bias = 255 * total / len(files), 255 * signed / len(files)
        # Measured 0.103 levels with goldminer's own resize (vertical pass first);
        # PIL's (core/resample.c) makes it the float ops' rounding, ~5e-6
        self.assertLess(mad, 0.1, "MAD %.4f/255 over %d photos" % (mad, len(files)))
        self.assertLess(abs(bias), 0.01, "bias %.4f/255" % bias)
        u8 = self.h.Sampler(dict(c, out="uint8", layout="uint8"))
        tvu = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
        for f in files:  # short sides under 512: decoded at full size, PIL's bytes
            im = Image.open(f).convert("RGB")
            if min(im.size) < 512:
                self.assertTrue(bool((u8.sample(f, 0) == tvu(im)).all()), f)
        # upscales, downscales (under 2x: no DCT reduction) and a crop as wide as the
        # resize: the window's edges and tap counts (dataset()'s 40..96 px JPEGs)
        small = sorted(glob.glob(os.path.join(dataset(), "*", "*.jpg")))[:12]
        for resize, size in ((97, 64), (60, 48), (49, 49)):
            u8 = self.h.Sampler({"mode": "eval", "size": size, "resize": resize,
                                 "out": "uint8", "layout": "uint8"})
            tvu = T.Compose([T.Resize(resize), T.CenterCrop(size), T.PILToTensor()])
            for f in small:
                self.assertTrue(bool((u8.sample(f, 0) == tvu(Image.open(f).convert("RGB")))
                                     .all()), (f, resize, size))
        ident = self.h.Sampler({"mode": "eval", "size": 375, "resize": 375, "out": "uint8",
                                "layout": "uint8"})
        same = [f for f in files if Image.open(f).size == (500, 375)][:20]
        crop = T.Compose([T.CenterCrop(375), T.PILToTensor()])
        for f in same:  # no resize: goldminer's pixels are libjpeg-turbo's as PIL decodes
            self.assertTrue(bool((ident.sample(f, 0) == crop(Image.open(f).convert("RGB")))
                                 .all()), f)
