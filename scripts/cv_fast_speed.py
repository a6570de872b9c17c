#!/usr/bin/env python3
"""cv::FAST (threshold 20, non-max suppression, one thread) on the frames of
`examples/fast_speed`: the bench-data photo cropped to 1280x720, 1920x1080 and 3840x2160
from its top-left corner, then each 1920x1080 quarter of the 3840x2160 frame; the minimum
and the median of N runs each, the corners before and after suppression. Run it beside
the example (one after the other) and compare minima.

    .venv-py/bin/python scripts/cv_fast_speed.py [runs] [PHOTO]
"""
import os
import sys
import time

import cv2


def timed(det, img, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        kps = det.detect(img)
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    return len(kps), ts[0], ts[len(ts) // 2]


def runs_and_photo(default_runs):
    """`[runs] [PHOTO]` from the command line: the run count and the photo as gray (by
    default bench-data's Kleiber photo), which must hold a 3840x2160 crop."""
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else default_runs
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    photo = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        root, 'bench-data', 'Kleiber_by_Lukas_Baubkus.jpg')
    src = cv2.imread(photo, cv2.IMREAD_GRAYSCALE)
    if src is None or src.shape[0] < 2160 or src.shape[1] < 3840:
        sys.exit(f'{photo}: needs a photo of at least 3840x2160 (scripts/fetch-bench-data.sh)')
    return runs, src


def main():
    runs, src = runs_and_photo(200)
    cv2.setNumThreads(1)
    det = cv2.FastFeatureDetector_create(20, True)
    for w, h in [(1280, 720), (1920, 1080), (3840, 2160)]:
        n, lo, med = timed(det, src[:h, :w].copy(), runs)
        print(f'{w}x{h} cv::FAST: {n} corners, median {med:.3f} ms, min {lo:.3f} ms')
    for x0, y0 in [(0, 0), (1920, 0), (0, 1080), (1920, 1080)]:
        q = src[y0:y0 + 1080, x0:x0 + 1920].copy()
        det.setNonmaxSuppression(False)
        every = len(det.detect(q))
        det.setNonmaxSuppression(True)
        n, lo, _ = timed(det, q, runs)
        print(f'3840x2160 quarter at ({x0}, {y0}) cv::FAST: {every} corners before '
              f'suppression, {n} after, min {lo:.3f} ms')


if __name__ == '__main__':
    main()
