"""goldminer.tools.profile_classes - per-vCPU rates of the input pipelines that are not
goldminer's C image path, for the simulator's profile (`goldminer profile --class`).

    /usr/bin/python3 -m goldminer.tools.profile_classes PIPELINE [--data PATH] [--samples N]
                     [--seed S] [--utterance-s SEC] [--rows N]

PIPELINE (the class it measures, and what a sample is):
  text         nlp: read a text corpus, BERT-style basic tokenisation (NFD, lower
               case, accents stripped, words and punctuation apart), vocabulary
               lookup, each file's ids packed into sequences of 128 with [CLS]/[SEP]
               (the last padded) and an attention mask, as BERT's pre-training packs
               its input; a sample is one 128-token sequence.
               Default corpus: /usr/share/common-licenses (Debian's base-files, on
               every Debian system).
  speech       speech: audio clips (default /usr/share/sounds/freedesktop/stereo,
               Debian's sound-theme-freedesktop: spoken channel names and effects,
               Ogg Vorbis) are first made into what LibriSpeech ships, untimed:
               16 kHz mono FLAC utterances of --utterance-s seconds (LibriSpeech's
               mean), the clips decoded by libsndfile (python3-soundfile; WAV alone
               through the standard library without it), resampled by SciPy's
               polyphase filter (python3-scipy; else linear interpolation) and cut
               one after the other. Timed: decode each utterance, pre-emphasis,
               25 ms Hann frames every 10 ms, |FFT|^2 (NumPy), 80 log-mel bands,
               per-band normalisation, SpecAugment (2 frequency and 2 time masks);
               a sample is one utterance.
  criteo       recsys: parse Criteo-format TSV rows (label, 13 integer and 26
               categorical features, missing ones empty), log(1 + x) of the
               integers, each categorical hex id hashed into a 10M-row embedding
               table (DLRM's --max-ind-range), batched; a sample is one row. Rows:
               --data FILE (e.g. a day of Criteo's terabyte log), else --rows rows
               written by a seeded generator in that layout (Criteo's data is not
               shipped by Debian: the values are synthetic, the parsing real).
  randaugment  vit: torchvision, an ImageFolder's JPEGs (--data, required; --samples
               of them, evenly over its classes): PIL decode, RandomResizedCrop 224,
               flip, RandAugment(2, 9), ToTensor, normalise, RandomErasing 0.25
               (DeiT's training recipe), through torch's DataLoader with 1 worker
               process and batches of 64; a sample is one image.
  torchvision  resnet50 and cv-light as PyTorch users run them: the same without
               RandAugment and RandomErasing.

It pins itself to one CPU and keeps every library to one thread, runs one
untimed pass of a few samples (imports, caches), then whole passes over the data
until at least --samples samples, and takes the process's CPU time over them
(time.process_time: every thread; plus the CPU time of a DataLoader's worker
process, reaped at the end of each pass). Prints one JSON line: pipeline, samples,
cpu_s, wall_s, rate (samples per CPU second), unit, data, what (how, for a
profile's source column), and the pipeline's own figures.

Exit status 3 when a module the pipeline needs is missing (the message names the
Debian package), 2 on bad arguments or data, 0 otherwise.

What it does not do: measure GPU rates, or several cores (the simulator scales
the per-vCPU rate), or pick the data (the defaults are Debian's, named above).
"""
import argparse
import json
import os
import sys
import time

PIPELINES = ("text", "speech", "criteo", "randaugment", "torchvision")
SEQ_LEN = 128
MEL_BANDS = 80
SAMPLE_RATE = 16000
# LibriSpeech train-clean-100: 100.6 h in 28,539 utterances (Panayotov et al.,
# ICASSP 2015, table 1 gives the hours; the corpus's own listing the count)
UTTERANCE_S = 12.69
HASH_ROWS = 10000000


class Missing(Exception):
    """A module the pipeline needs is not installed (message: what to install)."""


class BadData(Exception):
    """The data cannot be used (message names the path)."""


def need(module, package):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise Missing("%s needs the Python module %r for %s (apt-get install %s)"
                      % ("profile_classes", module, sys.executable, package))


def one_cpu():
    """Pin this process to the first CPU it may run on; return its number."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})
    return cpus[0]


def files_under(root, exts=None):
    """Regular files under root (or root itself), each real file once, sorted."""
    if os.path.isfile(root):
        return [root]
    if not os.path.isdir(root):
        raise BadData("%s: no such file or directory" % root)
    seen, out = set(), []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            p = os.path.join(d, n)
            real = os.path.realpath(p)
            if real in seen or not os.path.isfile(real):
                continue
            if exts and not n.lower().endswith(exts):
                continue
            seen.add(real)
            out.append(p)
    out.sort()
    if not out:
        raise BadData("%s: no %sfiles" % (root, "/".join(exts) + " " if exts else ""))
    return out


# ---- nlp: tokenise and pad ----

class Text:
    unit = "sequences of %d tokens" % SEQ_LEN

    def __init__(self, a):
        import re
        import unicodedata
        self.np = need("numpy", "python3-numpy")
        self.ud = unicodedata
        self.data = a.data or "/usr/share/common-licenses"
        self.files = files_under(self.data)
        # BERT's BasicTokenizer splits words from each punctuation character
        self.split = re.compile(r"\w+|[^\w\s]", re.UNICODE).findall
        # the vocabulary, as a pre-trained model ships it: the corpus's 30,522 most
        # frequent tokens (BERT-base's vocabulary size) after the special ones
        counts = {}
        for p in self.files:
            for t in self.tokens(self.read(p)):
                counts[t] = counts.get(t, 0) + 1
        words = sorted(counts, key=lambda w: (-counts[w], w))[:30522 - 4]
        self.vocab = {w: i + 4 for i, w in enumerate(words)}
        self.pad, self.unk, self.cls, self.sep = 0, 1, 2, 3
        self.lengths = []

    def read(self, p):
        with open(p, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tokens(self, text):
        text = self.ud.normalize("NFD", text.lower())
        text = "".join(c for c in text if self.ud.category(c) != "Mn")
        return self.split(text)

    def items(self):
        """One pass: a batch (ids, mask) of up to 64 sequences at a time."""
        batch, body = [], SEQ_LEN - 2
        for p in self.files:
            toks = self.tokens(self.read(p))
            self.lengths.append(len(toks))
            for at in range(0, len(toks), body):  # BERT packs text to the full length
                ids = [self.cls] + [self.vocab.get(t, self.unk) for t in toks[at:at + body]]
                ids.append(self.sep)
                batch.append(ids + [self.pad] * (SEQ_LEN - len(ids)))
                if len(batch) == 64:
                    yield self.collate(batch)
                    batch = []
        if batch:
            yield self.collate(batch)

    def collate(self, batch):
        ids = self.np.array(batch, dtype=self.np.int64)
        return len(batch), (ids, ids != self.pad)

    def figures(self):
        n, t = len(self.files), sum(self.lengths[:len(self.files)])
        return {"files": n, "tokens": t,
                "fill": t / ((SEQ_LEN - 2) * sum(-(-x // (SEQ_LEN - 2)) for x in self.lengths[:n]))}

    def what(self):
        f = self.figures()
        return ("%s (%d files, %d tokens): tokenised BERT-style (basic tokeniser: NFD, lower "
                "case, words and punctuation apart; vocabulary lookup), packed into "
                "sequences of %d ids with [CLS]/[SEP], the last of a file padded, plus the "
                "mask, batches of 64 (%.0f%% of the ids are text)"
                % (self.data, f["files"], f["tokens"], SEQ_LEN, 100 * f["fill"]))


# ---- speech: decode and log-mel ----

class Speech:
    unit = "utterances"

    def __init__(self, a):
        self.np = need("numpy", "python3-numpy")
        try:
            self.sf = __import__("soundfile")
        except (ImportError, OSError):
            self.sf = None
        try:
            self.signal = __import__("scipy.signal", fromlist=["_"])
        except ImportError:
            self.signal = None
        self.data = a.data or "/usr/share/sounds/freedesktop/stereo"
        exts = (".oga", ".ogg", ".flac", ".wav") if self.sf else (".wav",)
        if not os.path.exists(self.data) and not a.data:
            raise Missing("no audio at %s (apt-get install sound-theme-freedesktop, or "
                          "give --data DIR)" % self.data)
        try:
            self.sources = files_under(self.data, exts)
        except BadData:
            if not self.sf:
                raise Missing("%s holds no .wav and the Python module 'soundfile' is "
                              "missing to decode the rest (apt-get install "
                              "python3-soundfile)" % self.data)
            raise
        self.utt = a.utterance_s
        self.rng = self.np.random.default_rng(a.seed)
        self.nfft, self.win, self.hop = 512, 400, 160
        self.window = self.np.hanning(self.win).astype(self.np.float32)
        self.mel = self.filterbank()
        self.prepare()

    def prepare(self):
        """Untimed: the clips as LibriSpeech ships speech, 16 kHz mono (FLAC with
        libsndfile, else WAV), cut into utterances of self.utt seconds from the
        clips played one after the other (round the list again where they run
        out), so per-file costs weigh as on LibriSpeech."""
        import tempfile
        np = self.np
        pcm = [self.resample(*self.decode(p)) for p in self.sources]
        stream = np.concatenate(pcm)
        self.audio_s = len(stream) / float(SAMPLE_RATE)
        n = int(round(self.utt * SAMPLE_RATE))
        count = max(8, -(-len(stream) // n))
        reps = -(-count * n // len(stream))
        stream = np.tile(stream, reps)
        self.tmp = tempfile.mkdtemp(prefix="goldminer-speech-")
        self.files = []
        for i in range(count):
            x = stream[i * n:(i + 1) * n]
            if self.sf:
                p = os.path.join(self.tmp, "utt-%02d.flac" % i)
                self.sf.write(p, x, SAMPLE_RATE, subtype="PCM_16")
            else:
                import wave
                p = os.path.join(self.tmp, "utt-%02d.wav" % i)
                with wave.open(p, "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(SAMPLE_RATE)
                    w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
            self.files.append(p)

    def close(self):
        for p in self.files:
            os.unlink(p)
        os.rmdir(self.tmp)

    def filterbank(self):
        """80 triangular bands on the HTK mel scale over 0..8 kHz."""
        np = self.np
        mel = lambda f: 2595 * np.log10(1 + f / 700.0)
        hz = lambda m: 700 * (10 ** (m / 2595.0) - 1)
        edges = hz(np.linspace(mel(0), mel(SAMPLE_RATE / 2), MEL_BANDS + 2))
        bins = np.fft.rfftfreq(self.nfft, 1.0 / SAMPLE_RATE)
        fb = np.zeros((MEL_BANDS, bins.size), dtype=np.float32)
        for b in range(MEL_BANDS):
            lo, mid, hi = edges[b], edges[b + 1], edges[b + 2]
            fb[b] = np.maximum(0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))
        return fb

    def decode(self, p):
        np = self.np
        if self.sf:
            x, sr = self.sf.read(p, dtype="float32", always_2d=True)
        else:
            import wave
            with wave.open(p, "rb") as w:
                if w.getsampwidth() != 2:
                    raise BadData("%s: only 16-bit WAV without python3-soundfile" % p)
                sr, ch = w.getframerate(), w.getnchannels()
                x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
                x = (x.astype(np.float32) / 32768.0).reshape(-1, ch)
        return x.mean(axis=1), sr

    def resample(self, x, sr):
        np = self.np
        if sr == SAMPLE_RATE:
            return x
        if self.signal is not None:
            from math import gcd
            g = gcd(SAMPLE_RATE, sr)
            return self.signal.resample_poly(x, SAMPLE_RATE // g, sr // g).astype(np.float32)
        n = int(len(x) * SAMPLE_RATE / sr)
        return np.interp(np.arange(n) * (sr / SAMPLE_RATE), np.arange(len(x)), x).astype(np.float32)

    def features(self, x):
        np = self.np
        x = np.append(x[0], x[1:] - 0.97 * x[:-1])
        if len(x) < self.win:
            x = np.pad(x, (0, self.win - len(x)))
        n = 1 + (len(x) - self.win) // self.hop
        idx = np.arange(self.win)[None, :] + self.hop * np.arange(n)[:, None]
        frames = x[idx] * self.window
        power = np.abs(np.fft.rfft(frames, self.nfft)) ** 2
        logmel = np.log(power @ self.mel.T + 1e-6)
        logmel = (logmel - logmel.mean(axis=0)) / (logmel.std(axis=0) + 1e-5)
        for _ in range(2):  # SpecAugment: frequency masks (F = 27), time masks
            f = int(self.rng.integers(0, 28))
            f0 = int(self.rng.integers(0, MEL_BANDS - f + 1))
            logmel[:, f0:f0 + f] = 0
            t = int(self.rng.integers(0, max(1, min(100, n // 20)) + 1))
            t0 = int(self.rng.integers(0, max(1, n - t + 1)))
            logmel[t0:t0 + t, :] = 0
        return logmel.astype(np.float32)

    def items(self):
        """One pass: decode and featurise every utterance."""
        for p in self.files:
            x, sr = self.decode(p)
            yield 1, self.features(self.resample(x, sr))

    def figures(self):
        return {"files": len(self.sources), "audio_s": round(self.audio_s, 2),
                "utterances": len(self.files), "utterance_s": self.utt,
                "codec": "FLAC (libsndfile)" if self.sf else "WAV (stdlib wave)"}

    def what(self):
        f = self.figures()
        return ("%s (%d clips, %.0f s) as %d utterances of %.2f s (LibriSpeech's mean), 16 kHz "
                "mono %s: decode, pre-emphasis, 25/10 ms Hann frames, |FFT|^2, 80 log-mel "
                "bands, normalise, SpecAugment"
                % (self.data, f["files"], f["audio_s"], f["utterances"], self.utt, f["codec"]))


# ---- recsys: parse and hash Criteo rows ----

def write_criteo(path, rows, seed):
    """rows lines in Criteo's layout; values from a seeded generator (see above)."""
    import random
    r = random.Random(seed)
    # per-feature cardinalities spanning Criteo's (from tens to millions of ids)
    card = [r.choice((10, 100, 1000, 10000, 100000, 1000000, 10000000)) for _ in range(26)]
    salt = [r.getrandbits(32) for _ in range(26)]
    with open(path, "w") as f:
        for _ in range(rows):
            parts = ["1" if r.random() < 0.26 else "0"]
            for k in range(13):
                parts.append("" if r.random() < 0.2 else str(int(r.lognormvariate(1 + k % 4, 1.5))))
            for k in range(26):
                if r.random() < 0.1:
                    parts.append("")
                else:
                    v = int(card[k] ** r.random())  # heavy-tailed id
                    parts.append("%08x" % ((v * 2654435761 + salt[k]) & 0xffffffff))
            f.write("\t".join(parts) + "\n")


class Criteo:
    unit = "rows"

    def __init__(self, a):
        self.np = need("numpy", "python3-numpy")
        self.tmp = None
        if a.data:
            if not os.path.isfile(a.data):
                raise BadData("%s: not a file (a Criteo-format TSV)" % a.data)
            self.data = a.data
        else:
            import tempfile
            fd, self.tmp = tempfile.mkstemp(prefix="goldminer-criteo-", suffix=".tsv")
            os.close(fd)
            write_criteo(self.tmp, a.rows, a.seed)
            self.data = self.tmp
        self.rows = a.rows

    def close(self):
        if self.tmp:
            os.unlink(self.tmp)

    def items(self):
        dense, sparse, labels = [], [], []
        with open(self.data, "r") as f:
            for ln, line in enumerate(f, 1):
                v = line.rstrip("\n").split("\t")
                if len(v) != 40:
                    raise BadData("%s:%d: %d fields, a Criteo row has 40" % (self.data, ln, len(v)))
                labels.append(int(v[0]))
                dense.append([int(x) if x else 0 for x in v[1:14]])
                sparse.append([int(x, 16) % HASH_ROWS if x else 0 for x in v[14:]])
                if len(labels) == 64:
                    yield len(labels), self.collate(labels, dense, sparse)
                    dense, sparse, labels = [], [], []
        if labels:
            yield len(labels), self.collate(labels, dense, sparse)

    def collate(self, labels, dense, sparse):
        np = self.np
        d = np.log1p(np.maximum(np.array(dense, dtype=np.float32), 0))
        return np.array(labels, dtype=np.float32), d, np.array(sparse, dtype=np.int64)

    def figures(self):
        return {"generated_rows": 0 if not self.tmp else self.rows}

    def what(self):
        src = self.data if not self.tmp else (
            "%d rows in Criteo's layout from profile_classes' seeded generator (synthetic "
            "values, real parsing)" % self.rows)
        return ("%s: split, integers log(1 + x), 26 hex ids hashed mod 10M, batches of 64" % src)


# ---- image classes through torchvision ----

class Vision:
    unit = "images"

    def __init__(self, a, heavy):
        need("numpy", "python3-numpy")
        torch = need("torch", "python3-torch")
        T = need("torchvision.transforms", "python3-torchvision")
        self.Image = need("PIL.Image", "python3-pil")
        torch.set_num_threads(1)
        torch.manual_seed(a.seed)
        self.torch = torch
        if not a.data:
            raise BadData("the %s pipeline needs --data DIR (an ImageFolder of JPEGs)"
                          % ("randaugment" if heavy else "torchvision"))
        self.data = a.data
        files = files_under(a.data, (".jpg", ".jpeg"))
        keep = max(1, int(min(a.samples, len(files))))  # evenly over the classes
        self.files = [files[i * len(files) // keep] for i in range(keep)]
        steps = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
        if heavy:
            steps.append(T.RandAugment(num_ops=2, magnitude=9))
        steps += [T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
        if heavy:
            steps.append(T.RandomErasing(p=0.25))
        self.tf = T.Compose(steps)
        self.heavy = heavy

    def load(self, i):
        with open(self.files[i], "rb") as f:
            img = self.Image.open(f).convert("RGB")
        return self.tf(img)

    def items(self):
        """One pass through torch's DataLoader, 1 worker process, batches of 64
        (collated tensors back over its queue, as PyTorch users run it): the
        worker's CPU time is counted by measure() once it has been reaped."""
        torch = self.torch

        class Folder(torch.utils.data.Dataset):
            def __len__(ds):
                return len(self.files)

            def __getitem__(ds, i):
                return self.load(i)

        dl = torch.utils.data.DataLoader(Folder(), batch_size=64, num_workers=1)
        for b in dl:
            yield b.shape[0], b
        del dl

    def figures(self):
        return {"files": len(self.files)}

    def what(self):
        return ("%s (%d JPEGs): PIL decode, RandomResizedCrop 224, flip, %sToTensor, "
                "normalise%s (torchvision), torch DataLoader with 1 worker process, "
                "batches of 64, both processes' CPU" % (self.data, len(self.files),
                                               "RandAugment(2, 9), " if self.heavy else "",
                                               ", RandomErasing 0.25" if self.heavy else ""))


def make(a):
    if a.pipeline == "text":
        return Text(a)
    if a.pipeline == "speech":
        return Speech(a)
    if a.pipeline == "criteo":
        return Criteo(a)
    return Vision(a, a.pipeline == "randaugment")


def measure(p, samples, warm):
    """Untimed warm-up of about warm samples, then whole passes to >= samples."""
    done = 0.0
    for n, _ in p.items():
        done += n
        if done >= warm:
            break
    done, passes = 0.0, 0
    import resource
    kids = lambda: sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f)
                       for f in ("ru_utime", "ru_stime"))
    c0, w0, k0 = time.process_time(), time.monotonic(), kids()
    while done < samples:
        got = 0.0
        for n, _ in p.items():
            got += n
        if got <= 0:
            raise BadData("%s: a pass over the data gave no samples" % p.data)
        done += got
        passes += 1
    # a DataLoader's worker processes, reaped at the end of each pass
    return done, passes, time.process_time() - c0 + kids() - k0, time.monotonic() - w0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m goldminer.tools.profile_classes")
    ap.add_argument("pipeline", choices=PIPELINES)
    ap.add_argument("--data", help="corpus, audio, TSV or image directory (defaults above)")
    ap.add_argument("--samples", type=float, default=2000,
                    help="at least this many samples, in whole passes (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--utterance-s", type=float, default=UTTERANCE_S,
                    help="seconds of audio per speech sample (default %.2f)" % UTTERANCE_S)
    ap.add_argument("--rows", type=int, default=20000,
                    help="criteo: rows to generate when no --data (default 20000)")
    ap.add_argument("--tsv", action="store_true",
                    help="one line rate, samples, cpu_s, wall_s, unit, what (for goldminer profile)")
    a = ap.parse_args(argv)
    if not (a.samples > 0 and a.utterance_s > 0 and a.rows > 0):
        print("profile_classes: --samples, --utterance-s and --rows must be above 0",
              file=sys.stderr)
        return 2
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(v, "1")  # before NumPy loads its BLAS
    cpu = one_cpu()
    p = None
    try:
        p = make(a)
        n, passes, cpu_s, wall_s = measure(p, a.samples, min(64, a.samples))
    except Missing as e:
        print("profile_classes: %s" % e, file=sys.stderr)
        return 3
    except (BadData, OSError, RuntimeError) as e:
        print("profile_classes: %s: %s" % (a.pipeline, e), file=sys.stderr)
        return 2
    finally:
        if p is not None and hasattr(p, "close"):
            p.close()
    if cpu_s <= 0:
        print("profile_classes: no CPU time was measured (give more --samples)", file=sys.stderr)
        return 2
    out = {"pipeline": a.pipeline, "samples": round(n, 3), "passes": passes,
           "cpu_s": round(cpu_s, 4), "wall_s": round(wall_s, 4), "rate": n / cpu_s,
           "unit": p.unit, "cpu": cpu, "python": sys.executable, "data": p.data,
           "what": p.what()}
    out.update(p.figures())
    if a.tsv:
        clean = lambda v: " ".join(str(v).split())  # no tab or newline inside a field
        print("\t".join(clean(out[k]) for k in ("rate", "samples", "cpu_s", "wall_s", "unit", "what")))
    else:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
