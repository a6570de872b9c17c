#!/usr/bin/env python3
"""OpenCV timings for `gpu_features bench` (which embeds this file and runs it itself).

Times, on the given gray frames (all of one size), rotating through them run by run:
  fast     cv2.FastFeatureDetector(threshold=20, nonmaxSuppression=True, TYPE_9_16).detect
  canny    cv2.Canny(img, 50, 150, L2gradient=True)
  orb      cv2.ORB_create(nfeatures=2000).detect
  orb_desc cv2.ORB_create(nfeatures=2000).detectAndCompute
each with cv2.setNumThreads(1) and with all threads (OpenCV's default thread count).
Only the call is timed (time.perf_counter); the frames are loaded before.

Prints one JSON object: {"version", "threads_all", "cpu_count", "width", "height", "runs",
"counts": {"<op>": keypoints (edge pixels for canny) per frame, mean over the frames},
"results": {"<threads>": {"<op>": {"median_ms", "p90_ms"}}}}.

    python3 scripts/bench_opencv.py --runs 50 --warmup 3 a.png b.png c.png d.png

With --match QUERY TRAIN (raw files of 32-byte descriptors, as written by the bench) it
times the matcher instead: cv2.BFMatcher(cv2.NORM_HAMMING).knnMatch(query, train, k=2), one
thread and all threads, and counts the queries that pass Lowe's ratio test
(best < --ratio * second; a query with one neighbour passes), untimed. It prints
{"version", "threads_all", "cpu_count", "runs", "query", "train", "ratio",
"counts": {"knn2": queries with a neighbour, "ratio": kept},
"results": {"<threads>": {"knn2": {"median_ms", "p90_ms"}}}}.

    python3 scripts/bench_opencv.py --runs 50 --match q.bin t.bin
"""

import argparse
import json
import math
import os
import sys
import time

import cv2


def stats(ms):
    """Median (mean of the middle two for an even count) and p90 (nearest rank), as the
    Rust side computes them."""
    s = sorted(ms)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    p90 = s[max(0, math.ceil(0.9 * n) - 1)]
    return med, p90


def time_runs(fn, args, warmup, runs):
    """`warmup` untimed calls, then {"median_ms", "p90_ms"} of `runs` timed calls; call i
    gets args[i % len(args)]."""
    for i in range(warmup):
        fn(args[i % len(args)])
    ms = []
    for i in range(runs):
        arg = args[i % len(args)]
        t0 = time.perf_counter()
        fn(arg)
        ms.append((time.perf_counter() - t0) * 1e3)
    med, p90 = stats(ms)
    return {"median_ms": med, "p90_ms": p90}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="timed runs per op and thread count")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    ap.add_argument("--ops", default="fast,canny,orb,orb_desc")
    ap.add_argument("--match", nargs=2, metavar=("QUERY", "TRAIN"), help="time the matcher")
    ap.add_argument("--ratio", type=float, default=0.8, help="ratio test of the match count")
    ap.add_argument("files", nargs="*", help="gray frames of one size (PNG)")
    a = ap.parse_args()
    if a.match:
        bench_match(a)
        return
    if not a.files:
        ap.error("no frames given")

    imgs = []
    for f in a.files:
        im = cv2.imread(f, cv2.IMREAD_GRAYSCALE)
        if im is None:
            sys.exit(f"cannot read {f}")
        imgs.append(im)
    h, w = imgs[0].shape
    if any(im.shape != (h, w) for im in imgs):
        sys.exit("frames differ in size")

    threads_all = cv2.getNumThreads()
    fast = cv2.FastFeatureDetector_create(threshold=20, nonmaxSuppression=True)
    orb = cv2.ORB_create(nfeatures=2000)
    ops = {
        "fast": (lambda im: fast.detect(im, None), len),
        "canny": (
            lambda im: cv2.Canny(im, 50, 150, L2gradient=True),
            lambda e: int(cv2.countNonZero(e)),
        ),
        "orb": (lambda im: orb.detect(im, None), len),
        "orb_desc": (lambda im: orb.detectAndCompute(im, None), lambda r: len(r[0])),
    }
    wanted = [o for o in a.ops.split(",") if o]
    # Output size of each op: keypoints (edge pixels for canny), mean over the distinct
    # frames (untimed), to check that ours did the same work.
    counts = {
        name: sum(ops[name][1](ops[name][0](im)) for im in imgs) / len(imgs) for name in wanted
    }
    results = {}
    for threads in sorted({1, threads_all}):
        cv2.setNumThreads(threads)
        per = {}
        for name in wanted:
            per[name] = time_runs(ops[name][0], imgs, a.warmup, a.runs)
        results[str(threads)] = per
    cv2.setNumThreads(threads_all)
    print(
        json.dumps(
            {
                "version": cv2.__version__,
                "threads_all": threads_all,
                "cpu_count": os.cpu_count(),
                "width": w,
                "height": h,
                "runs": a.runs,
                "counts": counts,
                "results": results,
            }
        )
    )


def bench_match(a):
    """The --match mode: BFMatcher knnMatch k=2 on two descriptor files."""
    import numpy as np

    def load(path):
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size % 32:
            sys.exit(f"{path}: not a whole number of 32-byte descriptors")
        return raw.reshape(-1, 32)

    query, train = load(a.match[0]), load(a.match[1])
    matcher = cv2.BFMatcher(cv2.NORM_HAMMING)
    pairs = matcher.knnMatch(query, train, k=2)
    counts = {
        "knn2": sum(1 for p in pairs if len(p) >= 1),
        "ratio": sum(
            1
            for p in pairs
            if len(p) == 1 or (len(p) >= 2 and p[0].distance < a.ratio * p[1].distance)
        ),
    }
    threads_all = cv2.getNumThreads()
    results = {}
    for threads in sorted({1, threads_all}):
        cv2.setNumThreads(threads)
        knn = lambda _: matcher.knnMatch(query, train, k=2)
        results[str(threads)] = {"knn2": time_runs(knn, [None], a.warmup, a.runs)}
    cv2.setNumThreads(threads_all)
    print(
        json.dumps(
            {
                "version": cv2.__version__,
                "threads_all": threads_all,
                "cpu_count": os.cpu_count(),
                "runs": a.runs,
                "query": len(query),
                "train": len(train),
                "ratio": a.ratio,
                "counts": counts,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
