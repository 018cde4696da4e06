"""goldminer - Python binding of the goldminer data loader (ctypes, standard library only).

    import goldminer
    with goldminer.Loader("/data/train", batch_size=64, workers="auto", seed=1) as dl:
        for epoch in range(10):
            for images, labels in dl:      # images: (64, 224, 224, 3) uint8 view
                ...

`images` is a zero-copy view of a shared-memory ring slot, valid until the next
batch is requested (keep images.copy() to hold it longer). For PyTorch use
goldminer.torch.Loader, which yields (images, labels) tensors like DataLoader and
can deliver them on the GPU (device="cuda").

The C library is libgoldminer.so, found through env GOLDMINER_LIB, else
build/libgoldminer.so of the source tree this package sits in, else the system
library path. NumPy is optional; without it batches are typed memoryviews.
"""
from ._abi import (ArgumentError, ArgumentTypeError, LibraryError, LoaderError, WorkerError,
                   candidate_paths)
from .checksum import checksum64, fnv1a64, hexdigest
from .loader import Batch, GoldminerError, Loader

__all__ = ["Loader", "Batch", "GoldminerError", "LoaderError", "WorkerError", "ArgumentError",
           "ArgumentTypeError", "LibraryError", "checksum64", "fnv1a64", "hexdigest",
           "library_path", "candidate_paths"]


def library_path():
    """Path of the loaded libgoldminer.so (loads it; raises LibraryError)."""
    from ._abi import lib
    return lib().path
