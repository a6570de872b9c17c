#!/usr/bin/env python3
"""GPU peers for `gpu_features bench` (which embeds this file and runs it itself when the
GPU is benchmarked): the same gray frames through other GPU libraries' Canny and Harris,
on the same GPU, so the report shows us beside GPU peers and not only beside CPU OpenCV.

  kornia_canny   kornia.filters.canny(x, low_threshold=50/255, high_threshold=150/255)
  kornia_harris  kornia.feature.harris_response(x, k=0.04)
  cucim_canny    cucim.skimage.feature.canny(x, sigma=1, low_threshold=50, high_threshold=150)
                 (on the uint8 frame: thresholds in its value range, as skimage documents)
  cucim_harris   cucim.skimage.feature.corner_harris(x, k=0.05, sigma=1)

Each with its library's own semantics (Gaussian, gradient, thresholds and no selection of
corners): timings of comparable work, not of the same output. What is timed, per call, on
the host clock: the upload of the pageable uint8 frame, the conversion to the library's
float input, the operation and a device synchronisation, i.e. what our `process_into` wall
time covers. A library that cannot be imported (or has no GPU) is reported under "missing"
with the reason, and its rows are left out.

Prints one JSON object: {"gpu", "runs", "versions": {"kornia", "cucim"},
"missing": {"<lib>": why}, "counts": {"<op>": edge pixels (canny) per frame, mean},
"results": {"<op>": {"median_ms", "p90_ms"}}}.

    python3 scripts/bench_peers.py --runs 50 --warmup 3 a.png b.png c.png d.png

Carried wheels: pip install --no-index --find-links WHEELS kornia kornia_rs cucim-cu12
(torch and cupy must already be there).
"""

import argparse
import json
import math
import sys
import time


def stats(ms):
    """Median (mean of the middle two for an even count) and p90 (nearest rank), as the
    Rust side computes them."""
    s = sorted(ms)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    p90 = s[max(0, math.ceil(0.9 * n) - 1)]
    return med, p90


def time_runs(fn, frames, warmup, runs, sync):
    for i in range(warmup):
        fn(frames[i % len(frames)])
    sync()
    ms = []
    for i in range(runs):
        f = frames[i % len(frames)]
        t0 = time.perf_counter()
        fn(f)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    med, p90 = stats(ms)
    return {"median_ms": med, "p90_ms": p90}


def load_gray(path):
    """uint8 HxW from a PNG/PGM, with whichever reader is there (cv2, else imageio)."""
    try:
        import cv2

        img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        if img is None:
            raise OSError(f"{path}: cannot read")
        return img
    except ImportError:
        import imageio.v3 as iio

        return iio.imread(path)


def kornia_ops():
    import torch
    import kornia

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    dev = torch.device("cuda")

    def to_dev(f):
        return torch.from_numpy(f).to(dev, non_blocking=False)[None, None].float() / 255.0

    def canny(f):
        return kornia.filters.canny(to_dev(f), low_threshold=50 / 255, high_threshold=150 / 255)[1]

    def harris(f):
        return kornia.feature.harris_response(to_dev(f), k=0.04)

    def count(f):
        return float(canny(f).sum().item())

    return kornia.__version__, {"kornia_canny": canny, "kornia_harris": harris}, \
        torch.cuda.synchronize, {"kornia_canny": count}


def cucim_ops():
    import cupy as cp
    import cucim
    from cucim.skimage import feature

    if cp.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("cupy sees no CUDA device")

    def canny(f):
        return feature.canny(cp.asarray(f), sigma=1.0, low_threshold=50, high_threshold=150)

    def harris(f):
        return feature.corner_harris(cp.asarray(f).astype(cp.float32), k=0.05, sigma=1)

    def count(f):
        return float(canny(f).sum().item())

    def sync():
        cp.cuda.Device().synchronize()

    return cucim.__version__, {"cucim_canny": canny, "cucim_harris": harris}, sync, \
        {"cucim_canny": count}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    out = {"gpu": None, "runs": a.runs, "versions": {}, "missing": {}, "counts": {},
           "results": {}}
    libs = []
    for name, make in (("kornia", kornia_ops), ("cucim", cucim_ops)):
        try:
            libs.append((name, make()))
        except Exception as e:  # ImportError, no device, a broken install: all "missing"
            out["missing"][name] = f"{type(e).__name__}: {e}"
    frames = [load_gray(p) for p in a.files] if libs else []
    for name, (version, ops, sync, counts) in libs:
        out["versions"][name] = version
        for op, fn in ops.items():
            out["results"][op] = time_runs(fn, frames, a.warmup, a.runs, sync)
        for op, fn in counts.items():
            out["counts"][op] = sum(fn(f) for f in frames) / len(frames)
    try:
        import torch

        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
