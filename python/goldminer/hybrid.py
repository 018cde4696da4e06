"""hybrid - the C+Python hybrid sample: C reads the file, decodes only the crop
window, resizes, flips and (a ColorJitter the plan gave it) jitters the colours
(gm_hybrid_sample, include/goldminer/hybrid.h); the rest of the user's Compose
runs here, in the same worker, on what C wrote.

HybridDataset(samples, c, tail, target_transform) is a map-style dataset that
goldminer's Python workers (dataloader.py) serve like any other: item i is
(tail(pixels of samples[i][0]), target_transform(samples[i][1])). The pixels are
written once, by C, into the memory of the object the next op takes:

  c["layout"] == "pil"    a PIL RGB image mapped over the buffer C filled (PIL
                          keeps RGB as 4 bytes a pixel: C writes that layout)
  c["layout"] == "uint8"  a (3,H,W) uint8 tensor: a permuted view of the HWC
                          buffer (what PILToTensor gives, channels-last in memory)
  c["layout"] == "float"  a (3,H,W) float32/float16 tensor, normalised as the
                          folded ToTensor/ConvertImageDtype/Normalize ask
  c["tv_image"]           the tensor as a tv_tensors.Image (no copy): the prefix
                          had v2's ToImage, whose output the next op expects

The crop and flip draws are keyed by 64 bits drawn from Python's `random`,
which goldminer's workers seed from (seed, epoch, index) before each item: the
same sample, epoch and seed give the same crop whatever worker makes it, and the
draws of torch's generator that the Python ops use are left untouched.

Not here: the plan (plan.py decides what C does), JPEG only (the plan keeps
other formats in Python).
"""
import ctypes
import random

from . import _abi

_P = ctypes.c_void_p
_LAYOUT_AUG, _LAYOUT_RGBX = 0, 1


def _lib():
    L = _abi.lib()
    L.need(_abi.HYBRID, "core/hybrid.c")
    return L


def has_hybrid():
    """None when the library has the hybrid entry, else why not."""
    try:
        _lib()
    except Exception as e:  # noqa: BLE001 - LibraryError, OSError
        return str(e)
    return None


def window(c, w, h, key):
    """(box (x0, y0, x1, y1), flip) that the C part c gives a w x h image for draw
    key (gm_aug_window): to test the draws against torchvision's distributions."""
    fn = _abi.lib().gm_aug_window
    box, flip = (ctypes.c_double * 4)(), ctypes.c_bool()
    spec = aug_spec(dict(c, out=c.get("out", "uint8")))
    fn(ctypes.byref(spec), w, h, key, 0, 0, box, ctypes.byref(flip))
    return tuple(box), flip.value


def aug_spec(c):
    """struct gm_aug_spec for the plan's C part (a dict: mode, size, scale, ratio,
    flip_p, resize, out, mean, std, jitter: up to four (lo, hi) factor ranges or None:
    brightness, contrast, saturation, hue)."""
    L = _abi.lib()
    s = _abi.AugSpec()
    L.gm_aug_spec_default(ctypes.byref(s))
    s.mode = _abi.GM_AUG_TRAIN if c["mode"] == "train" else _abi.GM_AUG_EVAL
    s.size = c["size"]
    s.scale_min, s.scale_max = c.get("scale", (0.08, 1.0))
    s.ratio_min, s.ratio_max = c.get("ratio", (3 / 4, 4 / 3))
    s.flip_p = c.get("flip_p", 0.0)
    s.resize = c.get("resize", 256)
    s.out = {"uint8": _abi.GM_OUT_U8_HWC, "float32": _abi.GM_OUT_F32_CHW,
             "float16": _abi.GM_OUT_F16_CHW}[c["out"]]
    s.mean[:] = list(c.get("mean", (0.0, 0.0, 0.0)))
    s.std[:] = list(c.get("std", (1.0, 1.0, 1.0)))
    for k, rng in enumerate(c.get("jitter") or ()):
        if rng is not None:  # None: that op left out ([0, 0] in C)
            s.jitter[k][0], s.jitter[k][1] = float(rng[0]), float(rng[1])
    return s


def jitter_draw(c, key):
    """([op names in the order applied], {op: factor}) that the C part c draws for
    key (gm_jitter_draw): to test the draws against torchvision's ColorJitter."""
    fn = _abi.lib().gm_jitter_draw
    j = _abi.JitterDraw()
    spec = aug_spec(dict(c, out=c.get("out", "uint8")))
    fn(ctypes.byref(spec), key, 0, 0, ctypes.byref(j))
    names = ("brightness", "contrast", "saturation", "hue")
    return ([names[j.order[k]] for k in range(j.n)],
            {names[j.order[k]]: j.factor[j.order[k]] for k in range(j.n)})


class Sampler:
    """One process's gm_hybrid handle for one C part (created where it is used:
    a ctypes handle does not cross pickling)."""

    def __init__(self, c):
        self.c, self.L = c, _lib()
        self.h = _P()
        err = ctypes.create_string_buffer(512)
        layout = _LAYOUT_RGBX if c["layout"] == "pil" else _LAYOUT_AUG
        rc = self.L.gm_hybrid_create(ctypes.byref(self.h), ctypes.byref(aug_spec(c)), layout,
                                     err, 512)
        if rc:
            raise _abi.ArgumentError(err.value.decode(errors="replace"))
        self.nbytes = self.L.gm_hybrid_out_bytes(self.h)

    def __del__(self):
        h, self.h = getattr(self, "h", None), None
        if h:
            self.L.gm_hybrid_destroy(h)

    def _fill(self, path, key, addr):
        rc = self.L.gm_hybrid_sample(self.h, path.encode() if isinstance(path, str) else path,
                                     key, 0, 0, addr, self.nbytes)
        if rc:
            import errno
            import os
            msg = self.L.gm_hybrid_errmsg(self.h).decode(errors="replace")
            if -rc in (errno.ENOENT, errno.EACCES, errno.EISDIR):
                raise _abi.LoaderError(-rc, os.strerror(-rc) + " (" + msg + ")", path)
            raise _abi.LoaderError(-rc, msg)

    def sample(self, path, key):
        """The pixels of path for draw key, as the next op takes them."""
        size, layout = self.c["size"], self.c["layout"]
        if layout == "pil":
            from PIL import Image
            buf = bytearray(self.nbytes)
            self._fill(path, key, ctypes.addressof((ctypes.c_char * self.nbytes).from_buffer(buf)))
            im = Image.new("RGB", (1, 1))
            # PIL maps buf as the image's own memory (it keeps a reference to it)
            im = im._new(Image.core.map_buffer(buf, (size, size), "raw", 0, ("RGB", 0, 1)))
            im.readonly = 1  # an op that writes in place copies first, as for frombuffer
            return im
        import torch
        if layout == "uint8":
            t = torch.empty((size, size, 3), dtype=torch.uint8)
            self._fill(path, key, t.data_ptr())
            t = t.permute(2, 0, 1)
        else:
            dt = torch.float16 if self.c["out"] == "float16" else torch.float32
            t = torch.empty((3, size, size), dtype=dt)
            self._fill(path, key, t.data_ptr())
        if self.c.get("tv_image"):
            from torchvision import tv_tensors
            t = tv_tensors.Image(t)
        return t


_samplers: dict = {}


def sampler_for(c):
    key = tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v)
                       for k, v in c.items()))
    s = _samplers.get(key)
    if s is None:
        s = _samplers[key] = Sampler(c)
    return s


class HybridDataset:
    """samples[i] = (path, target) through C (c) then the Python ops (tail).
    Its items are not kept in the slot for a re-issue (goldminer_keep_items):
    one is made again, with the same bytes, in a few ms; pickling every item into
    the slot costs about a sixth of that on every batch."""

    goldminer_keep_items = False

    def __init__(self, samples, c, tail=None, target_transform=None):
        self.samples, self.c = samples, dict(c)
        self.tail, self.target_transform = tail, target_transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        key = random.getrandbits(64)  # seeded per (seed, epoch, i) by the worker
        x = sampler_for(self.c).sample(path, key)
        if self.tail is not None:
            x = self.tail(x)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return x, target
