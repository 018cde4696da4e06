"""plan - where each piece of a DataLoader's sample runs: the C data plane, a
C+Python hybrid, or Python workers; and the loader that serves it.

    import goldminer.torch
    p = goldminer.torch.plan(loader)     # a torch DataLoader, or goldminer run's
    p.path                               # "C", "hybrid" or "python"
    print(p.text())                      # per op: where it runs and why
    p.as_dict()                          # the same as data

The split is the stateless/stateful one of docs/DESIGN.md, read off the user's
objects. Only torchvision's ImageFolder (and DatasetFolder with the default
loader: PIL, image backend "PIL") has a sample the C plane can make: a JPEG read
from samples[i], then the dataset's transform; a torch Subset of one is read
through (its index map). The transform (a Compose, v1 or v2, or one op; a plain
object whose class's __call__ is exactly `return self.NAME(x)` by its bytecode,
NAME a plain attribute holding one of those, is read as what it holds:
torchvision's reference presets, _held) is read from the front:

  RandomResizedCrop [, RandomHorizontalFlip]    the train crop (square, bilinear)
  | Resize N, CenterCrop M (M <= N)             the eval crop (square, bilinear)
  then ToTensor | PILToTensor or ToImage [, ConvertImageDtype float
       or ToDtype(float, scale=True)]
  and ColorJitter anywhere among those, before Normalize
  then Normalize (after a float conversion)     folded into the C output

v2's ops are read by the same names and attributes (torchvision >= 0.16: ToImage
makes a tv_tensors.Image, which the hybrid hands on as one; ToDtype converts
to float as C does only with scale=True, its dtype a dtype or a table by the
tensor's type).

The longest prefix of those ops with parameters the C plane supports runs in C;
the first op that is unknown, has an unsupported parameter, or comes in an order
the C plane does not make (a flip before the crop, Normalize on uint8) ends it,
and it and every op after it run in Python ("order" for those after it). Then:

  C       the whole transform is the prefix, its output is a tensor, and the
          loader asks nothing the C Loader cannot give (a sampler of torch's own,
          the default collate_fn, no target_transform, the C index equals
          dataset.samples): goldminer's C Loader makes the batches, (images,
          labels) as torch's. The default samplers are its own permutation (one
          Loader for every epoch); any other of torch's samplers, a generator or
          a Subset is drawn in the trainer each epoch as torch's iterator draws
          it and made by a C Loader opened with that order (_CSamplerBatches).
  hybrid  a prefix, then Python ops (or a loader option only Python workers
          honour): goldminer's Python workers, each sample C-made up to the prefix
          (hybrid.py) and handed to the rest as a PIL image or a tensor.
  python  no prefix (a dataset of another kind, a first op C does not make,
          files that are not JPEG): dataset[i] in goldminer's Python workers.

The C path's bytes are goldminer's, not torchvision's: the crop and flip are
drawn by goldminer's counter-based generator (with torchvision's distributions),
and the train resize is goldminer's antialiased bilinear; the eval resize is
PIL's (core/resample.c): torchvision's bytes for a JPEG whose shorter side is
under twice Resize's size (decoded at full size; a larger one is decoded DCT-
reduced first), tests/python/test_plan.py. ColorJitter's factors and
order follow torchvision's distributions too; C computes the ops in float on
the resized pixels (torchvision's tensor ColorJitter), where PIL's rounds to
uint8 after each op.

Not here: running the ops (hybrid.py, the C library), timing (run.py).
"""
import os

_JPEG = (".jpg", ".jpeg")


class Op:
    """One op of the transform: its text, where it runs ("C" or "python") and why."""

    def __init__(self, text, where, why):
        self.text, self.where, self.why = text, where, why

    def as_dict(self):
        return {"op": self.text, "where": self.where, "why": self.why}


class Plan:
    """The plan of one loader (see the module's comment)."""

    def __init__(self, path, ops, why, c=None, spec=None, notes=()):
        self.path, self.ops, self.why = path, ops, why
        self.c, self.spec, self.notes = c, spec, list(notes)

    def line(self):
        """One line: the path and the ops on each side."""
        inc = [o.text.split("(")[0] for o in self.ops if o.where == "C"]
        inp = [o.text.split("(")[0] for o in self.ops if o.where != "C"]
        if self.path == "C":
            return "C path [%s]" % self.spec
        if self.path == "hybrid":
            return "hybrid [C: %s | python: %s]" % (", ".join(inc), ", ".join(inp) or "collate")
        return "python workers [dataset[i]%s]" % (": " + ", ".join(inp) if inp else "")

    def text(self):
        out = ["path: %s (%s)" % (self.path, self.why)]
        for k, o in enumerate(self.ops):
            out.append("  %d. %-42s %-6s %s" % (k + 1, o.text, o.where, o.why))
        if self.spec:
            out.append("  C pipeline: %s" % self.spec)
        for n in self.notes:
            out.append("  note: %s" % n)
        return "\n".join(out)

    def as_dict(self):
        return {"path": self.path, "why": self.why, "ops": [o.as_dict() for o in self.ops],
                "c": dict(self.c) if self.c else None, "spec": self.spec,
                "notes": list(self.notes)}

    def __str__(self):
        return self.text()

    def __repr__(self):
        return "<goldminer plan %s>" % self.line()


# --- reading the transform ----------------------------------------------------------
def _name(op):
    return type(op).__name__


def _is_tv(op):
    return type(op).__module__.startswith("torchvision.transforms")


def _bilinear(op):
    mode = getattr(op, "interpolation", None)
    return mode is None or str(getattr(mode, "value", mode)).lower().endswith("bilinear")


def _square(size):
    """The side of a square size (int, (n,) or (n, n)), else None."""
    if isinstance(size, int):
        return size
    if isinstance(size, (list, tuple)) and len(size) in (1, 2) and \
            all(isinstance(v, int) for v in size) and len(set(size)) == 1:
        return size[0]
    return None


def _fmt(op):
    """The op as a short text: its name and the parameters that matter here."""
    n = _name(op)
    keys = {"RandomResizedCrop": ("size", "scale", "ratio"), "RandomHorizontalFlip": ("p",),
            "Resize": ("size",), "CenterCrop": ("size",), "Normalize": ("mean", "std"),
            "ConvertImageDtype": ("dtype",), "ToDtype": ("dtype", "scale"),
            "ColorJitter": ("brightness", "contrast", "saturation", "hue")}.get(n, ())
    args = []
    for k in keys:
        v = getattr(op, k, None)
        if isinstance(v, (list, tuple)):
            v = "(%s)" % ", ".join("%.4g" % x if isinstance(x, float) else str(x) for x in v)
        args.append("%s=%s" % (k, v))
    return "%s(%s)" % (n, ", ".join(args))


# what a __call__ that only applies a transform it holds compiles to, less the
# instructions that do nothing (RESUME, CACHE, ...; by CPython version)
_CALL_QUIET = {"RESUME", "NOP", "CACHE", "PRECALL", "PUSH_NULL", "EXTENDED_ARG"}
_CALL_OPS = {"CALL", "CALL_FUNCTION", "CALL_METHOD"}


def _held(t):
    """(transform, None) when t is a plain object whose class's __call__(self, x) is
    exactly `return self.NAME(x)`, read off its bytecode (dis), with NAME an
    attribute of t itself (its __dict__, no class attribute or property of that
    name, no __getattribute__ of its own) holding a torchvision transform or
    another such object (torchvision's reference presets: self.transforms, a
    Compose); else (None, why not, one line)."""
    import dis
    import types
    cls = type(t)
    call = getattr(cls, "__call__", None)
    if not isinstance(call, types.FunctionType):
        return None, "%s is not torchvision's and has no __call__ in Python" % cls.__name__
    code = call.__code__
    if code.co_argcount != 2 or code.co_kwonlyargcount or code.co_freevars or \
            code.co_flags & (0x04 | 0x08) or call.__defaults__:
        return None, ("%s.__call__ takes other arguments than (self, x): not read as the"
                      " transform it holds" % cls.__name__)
    ins = [i for i in dis.get_instructions(call) if i.opname not in _CALL_QUIET]
    shape = [i.opname for i in ins]
    if len(ins) != 5 or shape[0] != "LOAD_FAST" or ins[0].arg != 0 or \
            shape[1] not in ("LOAD_ATTR", "LOAD_METHOD") or shape[2] != "LOAD_FAST" or \
            ins[2].arg != 1 or shape[3] not in _CALL_OPS or ins[3].arg != 1 or \
            shape[4] != "RETURN_VALUE":
        return None, ("%s.__call__ does more than return self.ATTR(x) (its bytecode: %s):"
                      " not read as the transform it holds"
                      % (cls.__name__, " ".join(shape[:12]) + (" ..." if len(shape) > 12 else "")))
    name = ins[1].argval
    if not isinstance(name, str) or name not in getattr(t, "__dict__", {}) or \
            hasattr(cls, name) or cls.__getattribute__ is not object.__getattribute__:
        return None, ("%s.__call__ applies self.%s, which is not a plain attribute of the"
                      " object" % (cls.__name__, name))
    inner = t.__dict__[name]
    if not _is_tv(inner) and _held(inner)[0] is None:
        return None, ("%s.__call__ applies self.%s, a %s: not a torchvision transform"
                      % (cls.__name__, name, type(inner).__name__))
    return inner, None


def _unwrapped(transform):
    """(the transform a dataset's transform applies, with plain objects that hold one
    unwrapped (_held), the lines saying what was and was not unwrapped)."""
    notes = []
    for _ in range(8):  # nested holders: a preset holding a preset
        if transform is None or _is_tv(transform):
            break
        inner, why = _held(transform)
        if inner is None:
            notes.append("not unwrapped: " + why)
            break
        notes.append("%s applies its %s: read as that" % (
            type(transform).__name__, _name(inner)))
        transform = inner
    return transform, notes


def _ops_of(transform, notes=None):
    """The ops of a transform, front first; notes (a list) gets what _unwrapped says."""
    transform, said = _unwrapped(transform)
    if notes is not None:
        notes.extend(said)
    if transform is None:
        return []
    if _name(transform) == "Compose" and hasattr(transform, "transforms"):
        return list(transform.transforms)
    return [transform]


def _dtype_for(table, tv_image):
    """The dtype v2's ToDtype gives the prefix's tensor by its table: the entry of
    the tensor's exact type (tv_tensors.Image after ToImage, a plain tensor after
    PILToTensor), else "others", else None (torchvision raises there)."""
    import torch
    for k, v in table.items():
        if isinstance(k, type) and (k is torch.Tensor if not tv_image else
                                    k.__name__ == "Image" and
                                    k.__module__.startswith("torchvision.")):
            return v
    return table.get("others")


def _float_dtype(op, tv_image=False):
    """'float32'/'float16' for a conversion to float that scales by 1/255, else None."""
    import torch
    dt = getattr(op, "dtype", None)
    if isinstance(dt, dict):  # v2 ToDtype({tv_tensors.Image: float32, "others": None})
        dt = _dtype_for(dt, tv_image)
    if _name(op) == "ToDtype" and not getattr(op, "scale", False):
        return None
    return {torch.float32: "float32", torch.float16: "float16"}.get(dt)


def _geometry(ops):
    """(C fields, ops it took, why it stopped) for the crop at the front of ops."""
    if not ops:
        return None, 0, "no transform: the sample would be a PIL image of the whole file"
    op = ops[0]
    n = _name(op)
    if not _is_tv(op):
        return None, 0, "unknown op %s (not one of the C data plane's)" % n
    if n == "RandomResizedCrop":
        side = _square(op.size)
        if side is None:
            return None, 0, "unsupported parameter: size=%s (C crops squares)" % (op.size,)
        if not _bilinear(op):
            return None, 0, ("unsupported parameter: interpolation=%s (C resamples bilinear"
                             " with antialias)" % op.interpolation)
        if not (0 < op.scale[0] <= op.scale[1] <= 1) or not (0 < op.ratio[0] <= op.ratio[1]):
            return None, 0, "unsupported parameter: scale=%s ratio=%s" % (op.scale, op.ratio)
        c = {"mode": "train", "size": side, "scale": tuple(map(float, op.scale)),
             "ratio": tuple(map(float, op.ratio)), "flip_p": 0.0}
        took = 1
        if len(ops) > 1 and _name(ops[1]) == "RandomHorizontalFlip" and _is_tv(ops[1]):
            c["flip_p"] = float(ops[1].p)
            took = 2
        return c, took, None
    if n == "Resize":
        side = _square(op.size) if not isinstance(op.size, int) and len(op.size) == 1 \
            else op.size if isinstance(op.size, int) else None
        if side is None or getattr(op, "max_size", None) is not None:
            return None, 0, ("unsupported parameter: size=%s (C resizes the shorter side to"
                             " an int, no max_size)" % (op.size,))
        if not _bilinear(op):
            return None, 0, ("unsupported parameter: interpolation=%s (C resamples bilinear"
                             " with antialias)" % op.interpolation)
        if len(ops) < 2 or _name(ops[1]) != "CenterCrop" or not _is_tv(ops[1]):
            return None, 0, "order: C makes Resize only with a CenterCrop after it"
        crop = _square(ops[1].size)
        if crop is None or crop > side:
            return None, 0, ("unsupported parameter: CenterCrop size=%s (C cuts a square no"
                             " larger than the resized shorter side)" % (ops[1].size,))
        return {"mode": "eval", "size": crop, "resize": side}, 2, None
    if n in ("RandomHorizontalFlip", "CenterCrop", "ColorJitter", "ToTensor", "PILToTensor",
             "ToImage", "ConvertImageDtype", "ToDtype", "Normalize"):
        return None, 0, "order: C makes %s only after %s" % (
            n, {"RandomHorizontalFlip": "RandomResizedCrop", "CenterCrop": "Resize"}.get(
                n, "the crop (RandomResizedCrop, or Resize and CenterCrop)"))
    return None, 0, "unknown op %s (not one of the C data plane's)" % n


def _jitter_ranges(op):
    """The four (lo, hi) factor ranges (or None) of a ColorJitter C makes, or why
    C does not make it (a str)."""
    out = []
    for name in ("brightness", "contrast", "saturation", "hue"):
        v = getattr(op, name, None)
        if v is None:
            out.append(None)
            continue
        lo, hi = float(v[0]), float(v[1])
        ok = -0.5 <= lo <= hi <= 0.5 if name == "hue" else 0 <= lo <= hi <= 1000 and hi > 0
        if not ok:
            return "unsupported parameter: %s=(%g, %g) (C takes %s)" % (
                name, lo, hi, "-0.5 <= lo <= hi <= 0.5" if name == "hue"
                else "0 <= lo <= hi <= 1000, hi > 0")
        out.append((lo, hi))
    return tuple(out)


def _conversion(ops, c):
    """Fold the tensor conversion and Normalize after the crop into c; ops taken and
    why the prefix stopped (None when it ran out of ops)."""
    k = 0
    c["out"], c["layout"] = "uint8", "pil"
    while k < len(ops):
        op, n = ops[k], _name(ops[k])
        if not _is_tv(op):
            return k, "unknown op %s (not one of the C data plane's)" % n
        if c["layout"] == "pil" and n == "ToTensor":
            c.update(out="float32", layout="float")
        elif c["layout"] == "pil" and n in ("PILToTensor", "ToImage"):
            c.update(out="uint8", layout="uint8")
            if n == "ToImage":  # v2: a tv_tensors.Image (the hybrid hands one on)
                c["tv_image"] = True
        elif c["layout"] == "uint8" and n in ("ConvertImageDtype", "ToDtype") and \
                _float_dtype(op, c.get("tv_image", False)):
            c.update(out=_float_dtype(op, c.get("tv_image", False)), layout="float")
        elif c["layout"] == "uint8" and n in ("ConvertImageDtype", "ToDtype"):
            return k, ("unsupported parameter: %s (C converts to float32 or float16 scaled"
                       " by 1/255: ToDtype(dtype, scale=True))" % _fmt(op))
        elif n == "ColorJitter" and "mean" not in c and "jitter" not in c:
            j = _jitter_ranges(op)
            if isinstance(j, str):
                return k, j
            c["jitter"] = j
        elif c["layout"] == "float" and n == "Normalize" and "mean" not in c:
            if len(op.mean) != 3 or len(op.std) != 3 or any(s == 0 for s in op.std):
                return k, "unsupported parameter: Normalize needs 3 means and 3 nonzero stds"
            c.update(mean=tuple(map(float, op.mean)), std=tuple(map(float, op.std)))
        elif n in ("ToTensor", "PILToTensor", "ToImage", "ConvertImageDtype", "ToDtype",
                   "Normalize", "RandomResizedCrop", "RandomHorizontalFlip", "Resize", "CenterCrop",
                   "ColorJitter"):
            return k, "order: %s after %s is not a C op sequence (C makes one crop, one" \
                " conversion, one ColorJitter, one Normalize)" % (n, _name(ops[k - 1]) if k else "the crop")
        else:
            return k, "unknown op %s (not one of the C data plane's)" % n
        k += 1
    return k, None


def _c_spec(c, batch_size):
    if c["mode"] == "train":
        geo = "random_resized_crop %d scale=%.9g,%.9g ratio=%.9g,%.9g | flip %.9g" % (
            c["size"], c["scale"][0], c["scale"][1], c["ratio"][0], c["ratio"][1], c["flip_p"])
    else:
        geo = "resize %d | center_crop %d" % (c["resize"], c["size"])
    tail = {"uint8": "to_hwc_u8", "float32": "to_chw_f32", "float16": "to_chw_f16"}[c["out"]]
    jit = ""
    if any(c.get("jitter") or ()):
        jit = " | color_jitter " + " ".join(
            "%s=%s" % (name, "%.9g,%.9g" % r if r else off)
            for name, r, off in zip(("brightness", "contrast", "saturation", "hue"),
                                    c["jitter"], ("1,1", "1,1", "1,1", "0,0")))
    norm = ""
    if "mean" in c:
        norm = " | normalize %s/%s" % (",".join("%.9g" % v for v in c["mean"]),
                                       ",".join("%.9g" % v for v in c["std"]))
    return "read | decode | %s%s%s | %s | batch %d" % (geo, jit, norm, tail, batch_size)


# --- the dataset --------------------------------------------------------------------
def _dataset_problem(ds):
    """None when ds is an ImageFolder/DatasetFolder the C plane can read, else why."""
    try:
        from torchvision import datasets, get_image_backend
        from torchvision.datasets import folder
    except ImportError:
        return "torchvision is not importable"
    if not isinstance(ds, datasets.DatasetFolder):
        return "the dataset is %s, not torchvision's ImageFolder/DatasetFolder" \
            % type(ds).__name__
    if type(ds).__getitem__ is not datasets.DatasetFolder.__getitem__:
        return "%s overrides __getitem__" % type(ds).__name__
    if getattr(ds, "loader", None) not in (folder.default_loader, folder.pil_loader) or \
            get_image_backend() != "PIL":
        return "the dataset's loader is not torchvision's default (PIL) loader"
    if not ds.samples:
        return "the dataset has no samples"
    for path, _ in ds.samples:
        if not path.lower().endswith(_JPEG):
            return "%s is not a JPEG (the C data plane decodes JPEG only)" % path
    return None


def _subset_base(ds):
    """(the dataset under a chain of torch Subsets, the index map from ds's indices
    to its own, or None when ds is no Subset). A subclass of Subset may override
    __getitem__: only torch's own class is read through."""
    from torch.utils.data import Subset
    idx = None
    while type(ds) is Subset:
        m = [int(i) for i in ds.indices]
        idx = m if idx is None else [m[i] for i in idx]
        ds = ds.dataset
    return ds, idx


def _sampler_order(a, index_map):
    """How the C Loader orders this loader's samples: (False, None) its own order
    (shuffle or not; torch's plain RandomSampler or SequentialSampler over the
    dataset itself, no generator), (True, None) the sampler's indices each epoch
    (a sampler of torch's own: DistributedSampler, RandomSampler with a generator,
    replacement or num_samples, SubsetRandomSampler, ...; or a Subset), or
    (None, why) when only Python workers take it."""
    from torch.utils.data import RandomSampler, SequentialSampler, Sampler
    s = a.get("sampler")
    if s is not None and not (isinstance(s, Sampler) and
                              type(s).__module__.startswith("torch.utils.data")):
        return None, "sampler %s (not one of torch's: Python workers iterate it)" \
            % type(s).__name__
    plain = index_map is None and a.get("generator") is None and (
        s is None or getattr(s, "data_source", None) is a["dataset"] and (
            type(s) is SequentialSampler or
            type(s) is RandomSampler and s.generator is None and not s.replacement and
            s._num_samples is None))
    return not plain, None


def _c_loader_problem(a, ds):
    """None when the C Loader can make this loader's batches over ImageFolder ds,
    else which option only Python workers honour."""
    from torch.utils.data._utils.collate import default_collate
    if a.get("batch_sampler") is not None:
        return "a batch_sampler"
    if a.get("collate_fn") not in (None, default_collate):
        return "a collate_fn"
    if ds.target_transform is not None:
        return "a target_transform"
    if a.get("batch_size") is None:
        return "batch_size=None"
    classes = sorted(ds.class_to_idx, key=lambda s: os.fsencode(s))
    if ds.class_to_idx != {c: i for i, c in enumerate(classes)}:
        return "class_to_idx is not the sorted class folders"
    if not os.path.isdir(getattr(ds, "root", "") or ""):
        return "root %r is not a directory" % (ds.root,)
    return None


def make(a):
    """The plan for DataLoader arguments a (a dict of torch's parameter names)."""
    ds, index_map = _subset_base(a["dataset"])
    why = _dataset_problem(ds)
    notes = []
    ops = _ops_of(getattr(ds, "transform", None), notes)
    if index_map is not None:
        notes.append("a Subset of %s: %d of its %s samples, by its indices"
                     % (type(ds).__name__, len(index_map),
                        len(ds) if hasattr(ds, "__len__") else "?"))
    if why is not None:
        return Plan("python", [Op(_fmt(o), "python", "dataset[i]") for o in ops], why,
                    notes=notes)
    from .hybrid import has_hybrid
    c, took, stop = _geometry(ops)
    if c is None:
        return Plan("python", [Op(_fmt(o), "python", stop if k == 0 else "order: after %s"
                                  % _name(ops[0])) for k, o in enumerate(ops)],
                    "the transform does not start with an op the C data plane makes",
                    notes=notes)
    conv, stop = _conversion(ops[took:], c)
    took += conv
    plan_ops = [Op(_fmt(o), "C", "a C data plane op, supported parameters")
                for o in ops[:took]]
    for k, o in enumerate(ops[took:]):
        plan_ops.append(Op(_fmt(o), "python", stop if k == 0 else "order: after %s"
                           % _name(ops[took])))
    missing = has_hybrid()
    if took < len(ops) or c["layout"] == "pil":
        if missing:
            return Plan("python", [Op(o.text, "python", "dataset[i]") for o in plan_ops],
                        "the library has no hybrid entry: " + missing, notes=notes)
        why = ("the C prefix hands %s to %s in Python" % (
            "a PIL image" if c["layout"] == "pil" else "a tensor",
            _name(ops[took]) if took < len(ops) else "collate_fn"))
        return Plan("hybrid", plan_ops, why, c=c, notes=notes)
    ordered, option = _sampler_order(a, index_map)
    option = option or _c_loader_problem(a, ds)
    if option:
        return Plan("hybrid", plan_ops, "every op in C, but %s needs Python workers (C per"
                    " sample, collated in Python)" % option, c=c, notes=notes)
    if not a.get("num_workers"):
        notes.append("num_workers=0: one C worker process (C samples are not made in the"
                     " trainer)")
    if a.get("worker_init_fn") is not None:
        notes.append("worker_init_fn is not called: the C workers run no Python")
    if ordered:
        c = dict(c, order=True)
        notes.append("the order is the %s's indices%s, drawn each epoch as torch's iterator"
                     " draws them (its base seed seeds the C augmentations): one C Loader"
                     " per epoch" % (type(a.get("sampler")).__name__ if a.get("sampler")
                                     is not None else "RandomSampler" if a.get("shuffle")
                                     else "SequentialSampler",
                                     " through the Subset" if index_map is not None else ""))
    return Plan("C", plan_ops, "every op in C with supported parameters",
                c=c, spec=_c_spec(c, a["batch_size"]), notes=notes)


# --- serving ------------------------------------------------------------------------
def _gpu_decode():
    """The C path's gpu_decode under goldminer run: $GOLDMINER_GPU_DECODE, "1" (on:
    the workers write coefficient slots, the trainer finishes them), "auto"
    (goldminer.torch.Loader decides from measurement), else off. ArgumentError
    (a ValueError) for another word."""
    v = os.environ.get("GOLDMINER_GPU_DECODE", "0")
    if v not in ("", "0", "1", "auto"):
        from ._abi import ArgumentError
        raise ArgumentError("GOLDMINER_GPU_DECODE must be 0, 1 or auto, not %r" % v)
    return "auto" if v == "auto" else v == "1"


class _CLoaderBatches:
    """The C Loader as a DataLoader: one `for` is one epoch of [images, labels]
    (lists, as default_collate gives for (image, label) samples) that the script
    owns without a copy: views of ring slots kept until the last tensor over one
    dies (torch.Loader's copy=True, gm_loader_keep); a batch held so long that the
    workers would have fewer than 2 slots left to fill is detached into a copy by
    the library (self.copied counts them for goldminer run's summary)."""

    def __init__(self, a, plan, seed, node=None):
        from torch.utils.data import RandomSampler, SequentialSampler
        from .torch import Loader
        ds = a["dataset"]
        shuffle = bool(a.get("shuffle")) or isinstance(a.get("sampler"), RandomSampler)
        self.dataset, self.batch_size = ds, a["batch_size"]
        self.sampler = a.get("sampler")
        if self.sampler is None:
            self.sampler = RandomSampler(ds) if shuffle else SequentialSampler(ds)
        self.batch_sampler = None
        self.pin = bool(a.get("pin_memory"))
        self.loader = Loader(ds.root, pipeline=plan.spec, workers=max(1, a["num_workers"]),
                             seed=seed, shuffle=shuffle, drop_last=bool(a.get("drop_last")),
                             on_error="fail", copy=True, output=plan.c["out"], node=node,
                             gpu_decode=_gpu_decode())
        st = self.loader.stats()
        if st["dataset_size"] != len(ds.samples) or st["num_classes"] != len(ds.classes):
            n, k = st["dataset_size"], st["num_classes"]
            self.loader.close()
            raise LookupError("goldminer's index of %s has %d files in %d classes, the"
                              " dataset %d in %d" % (ds.root, n, k, len(ds.samples),
                                                     len(ds.classes)))

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        import torch
        pin = self.pin and torch.cuda.is_available()
        epoch, k = self.loader.loader.position()
        if k:
            # the last loop left its epoch part-way (a script's `break` after N
            # steps): torch's next iterator is a new epoch, not the rest of that
            # one. The workers restart at the next epoch's first batch (the same
            # bytes as reaching it in order); batches the script holds stay.
            sd = self.loader.state_dict()
            sd["epoch"], sd["batch"] = epoch + 1, 0
            self.loader.load_state_dict(sd)
        for x, y in self.loader:
            if pin:
                x, y = x.pin_memory(), y.pin_memory()
            yield [x, y]

    def workers(self):
        st = self.loader.stats()  # the pool's size: alive, or its target while they start
        # batches the script held so long that the library copied them (goldminer
        # run's summary says so: they cost what torch's copies cost)
        self.copied = st.get("kept_copied", 0)
        return max(st["workers"], st["target_workers"]), 0

    def close(self):
        self.loader.close()


class _CSamplerBatches:
    """The C Loader in the order of a sampler (plan: c["order"]): each `for` draws
    the epoch as torch's iterator draws it (the base seed from the loader's
    generator, else torch's default one; then the sampler's indices), maps them
    through the Subsets to the ImageFolder's ids, and opens a C Loader for that
    epoch (order=, seeded with the base seed); [images, labels] lists as
    default_collate gives, that the script owns as _CLoaderBatches' (views of ring
    slots the library keeps, copy=True)."""

    def __init__(self, a, plan, index_map, node=None):
        from torch.utils.data import RandomSampler, SequentialSampler
        from .torch import Loader
        ds = _subset_base(a["dataset"])[0]
        self.dataset, self.batch_size = a["dataset"], a["batch_size"]
        self.generator, self.index_map = a.get("generator"), index_map
        self.sampler = a.get("sampler")
        if self.sampler is None:
            self.sampler = (RandomSampler(self.dataset, generator=self.generator)
                            if a.get("shuffle") else SequentialSampler(self.dataset))
        self.batch_sampler = None
        self.drop_last, self.pin = bool(a.get("drop_last")), bool(a.get("pin_memory"))
        self.loader, self._Loader = None, Loader
        self.copied, self._past, self._last = 0, 0, (0, 0)
        self.kw = dict(pipeline=plan.spec, workers=max(1, a["num_workers"]),
                       on_error="fail", copy=True, output=plan.c["out"], shuffle=False,
                       epochs=1, drop_last=self.drop_last, node=node,
                       gpu_decode=_gpu_decode())
        self.root = ds.root
        # the C index is the dataset's (one sample read, one worker)
        probe = Loader(self.root, seed=0, order=[0], **dict(self.kw, workers=1, gpu_decode=False))
        st = probe.stats()
        probe.close()
        if st["dataset_size"] != len(ds.samples) or st["num_classes"] != len(ds.classes):
            raise LookupError("goldminer's index of %s has %d files in %d classes, the"
                              " dataset %d in %d" % (ds.root, st["dataset_size"],
                                                     st["num_classes"], len(ds.samples),
                                                     len(ds.classes)))

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        """The epoch drawn now, as iter() of torch's loader with workers draws it."""
        import torch
        base = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
        order = [int(i) for i in self.sampler]
        if self.index_map is not None:
            order = [self.index_map[i] for i in order]
        if self.drop_last:
            del order[len(order) // self.batch_size * self.batch_size:]
        self._close_epoch()
        return self._epoch(base & ((1 << 64) - 1), order)

    def _epoch(self, seed, order):
        import torch
        if not order:
            return
        self.loader = self._Loader(self.root, batch_size=self.batch_size, seed=seed,
                                   order=order, **self.kw)
        pin = self.pin and torch.cuda.is_available()
        for x, y in self.loader:
            if pin:
                x, y = x.pin_memory(), y.pin_memory()
            yield [x, y]

    def _close_epoch(self):
        if self.loader is not None:
            self.workers()  # its last counts
            self._past = self.copied
            self.loader.close()  # batches still held stay readable (their ring with them)
            self.loader = None

    def workers(self):
        """(local, 0) workers of this epoch's loader (the last epoch's between two);
        .copied: batches held so long that the library copied them, all epochs."""
        if self.loader is None:
            return self._last
        st = self.loader.stats()
        self.copied = self._past + st.get("kept_copied", 0)
        self._last = (max(st["workers"], st["target_workers"]), 0)
        return self._last

    def close(self):
        self._close_epoch()


class _Agent:
    """The workers a loader served through a node agent has on the agent's peers:
    the agent's status (at most once a second), the job of this process's pid.
    Two such loaders in one process are two jobs of one pid: their peers' workers
    are then not told apart, and neither is counted (0)."""

    def __init__(self, node):
        self.node, self.t, self.remote = node, 0.0, 0

    def poll(self):
        import time
        if time.monotonic() - self.t < 1.0:
            return self.remote
        self.t = time.monotonic()
        try:
            import ctypes
            import json
            from ._abi import lib
            out = ctypes.create_string_buffer(1 << 16)
            if lib().gm_node_status(os.fsencode(self.node), out, len(out)) == 0:
                mine = [j for j in json.loads(out.value).get("job", [])
                        if j.get("pid") == os.getpid()]
                self.remote = mine[0].get("remote_workers", 0) if len(mine) == 1 else 0
        except (OSError, ValueError, AttributeError, ImportError):
            pass  # the agent gone: the loader says so itself
        return self.remote

    @classmethod
    def counted(cls, workers, node):
        """workers() with the remote count from the agent at node (None: as is)."""
        if node is None:
            return workers
        agent = cls(node)
        return lambda: (workers()[0], agent.poll())


class Served:
    """A plan and the loader serving it: .loader iterates like the DataLoader;
    node: the agent whose workers make its batches (None: this process's)."""

    def __init__(self, plan, loader, workers, node=None):
        self.plan, self.loader, self._workers, self.node = plan, loader, workers, node

    def workers(self):
        """(local, remote) worker processes now."""
        return self._workers()

    def close(self):
        close = getattr(self.loader, "close", None)
        if close:
            close()


def _python_loader(a, dataset, seed, plan, node=None):
    from .dataloader import DataLoader
    kw = {k: a[k] for k in ("batch_size", "shuffle", "sampler", "batch_sampler", "num_workers",
                            "collate_fn", "pin_memory", "drop_last", "timeout",
                            "worker_init_fn", "generator", "persistent_workers") if k in a}
    if a.get("num_workers"):
        kw["prefetch_factor"] = a.get("prefetch_factor") or 2
        if not kw.get("persistent_workers") and a.get("batch_sampler") is None:
            # goldminer's workers are exec'd interpreters (seconds to import torch),
            # not forks, and keep nothing between samples: one pool for all epochs
            kw["persistent_workers"] = True
            plan.notes.append("persistent_workers: one pool of workers for every epoch"
                              " (they keep no state; worker_init_fn runs once per worker)")
    # copy=True: batches the script owns, as torch's (it may keep one past the next)
    if node is not None:
        kw["node"] = node
    dl = DataLoader(dataset, seed=seed, on_error="fail", copy=True, **kw)

    def workers():
        st = dl.stats()  # the pool's size: alive, or its target while they start
        return max(st["workers"], st["target_workers"]), 0
    return dl, workers


def serve(a, node=None):
    """Plan the DataLoader arguments a and build the loader that serves them;
    node: a node agent's socket that runs the workers (None: this process's).
    Raises what goldminer's loaders raise for arguments they refuse."""
    import torch
    plan = make(a)
    seed = torch.initial_seed() & ((1 << 64) - 1)  # torch.manual_seed(s) in the script
    ds, index_map = _subset_base(a["dataset"])
    if plan.path == "C" and plan.c.get("order") and node is not None:
        plan = Plan("hybrid", plan.ops, "every op in C, but the sampler's order is made by"
                    " C workers here only, not by a node agent's", c=plan.c, notes=plan.notes)
    if plan.path == "C":
        try:
            if plan.c.get("order"):
                cl = _CSamplerBatches(a, plan, index_map, node)
            else:
                cl = _CLoaderBatches(a, plan, seed, node)
            return Served(plan, cl, _Agent.counted(cl.workers, node), node)
        except LookupError as e:  # the C index is not the dataset's: each file by path
            plan = Plan("hybrid", plan.ops, "every op in C, but %s" % e, c=plan.c,
                        notes=plan.notes)
    if plan.path == "hybrid":
        from .hybrid import HybridDataset
        ops = _ops_of(ds.transform)
        n_c = sum(1 for o in plan.ops if o.where == "C")
        tail = None
        if n_c < len(ops):
            from torchvision import transforms
            rest = ops[n_c:]
            tail = rest[0] if len(rest) == 1 else transforms.Compose(rest)
        samples = list(ds.samples) if index_map is None else \
            [ds.samples[i] for i in index_map]  # the Subset's samples, as it indexes them
        dataset = HybridDataset(samples, plan.c, tail, ds.target_transform)
    else:
        dataset = a["dataset"]
    if node is not None and not a.get("num_workers"):
        plan.notes.append("num_workers=0: the batches are made in this process, not by the"
                          " node agent")
        node = None
    # seed=None: each epoch's seed and order drawn from torch's generators, as
    # torch's iterator draws them (the C path's loader needs one seed up front)
    dl, workers = _python_loader(a, dataset, None, plan, node)
    return Served(plan, dl, _Agent.counted(workers, node), node)


def plan(dataloader):
    """The plan of a DataLoader (torch's, or one `goldminer run` serves)."""
    p = getattr(dataloader, "goldminer_plan", None)
    if p is not None:
        return p
    a = {k: getattr(dataloader, k, None) for k in (
        "dataset", "batch_size", "num_workers", "collate_fn", "drop_last", "pin_memory")}
    a["num_workers"] = a["num_workers"] or 0
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler
    bs = getattr(dataloader, "batch_sampler", None)
    if bs is not None and type(bs) is not BatchSampler:
        a["batch_sampler"] = bs
    s = getattr(dataloader, "sampler", None)
    a["shuffle"] = isinstance(s, RandomSampler)
    a["generator"] = getattr(dataloader, "generator", None)
    if s is not None and type(s) is not SequentialSampler:
        a["sampler"] = s  # its generator, replacement, num_samples decide the C order
    return make(a)
