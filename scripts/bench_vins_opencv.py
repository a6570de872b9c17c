#!/usr/bin/env python3
"""OpenCV's VINS-Fusion front-end on the real sequence, timed per frame: the peer of the
tracker's bench rows (examples/track_speed.rs runs ours on the same frames and settings).

usage: bench_vins_opencv.py [--threads N] [--max-cnt 150] [--min-dist 30] [--rounds 5]
Prints the median ms per frame (the first frame of each round left out) and the tracks kept.
"""
import argparse
import glob
import os
import sys
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_track_golden import VinsFrontEnd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=0, help='0: OpenCV default (all cores)')
    ap.add_argument('--max-cnt', type=int, default=150)
    ap.add_argument('--min-dist', type=int, default=30)
    ap.add_argument('--rounds', type=int, default=5)
    a = ap.parse_args()
    if a.threads > 0:
        cv2.setNumThreads(a.threads)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    seq = [(os.path.basename(p), cv2.imread(p, cv2.IMREAD_GRAYSCALE))
           for p in sorted(glob.glob(os.path.join(root, 'tests', 'data', 'seq', '*.png')))]
    per = []
    for _ in range(a.rounds):
        fe = VinsFrontEnd(a.max_cnt, a.min_dist)
        for k, (_, img) in enumerate(seq):
            t0 = time.perf_counter()
            fe.track(img)
            if k > 0:
                per.append(time.perf_counter() - t0)
    per.sort()
    print(f'OpenCV {cv2.__version__} VINS front-end, {seq[0][1].shape[1]}x{seq[0][1].shape[0]}, '
          f'max_cnt {a.max_cnt}, threads {cv2.getNumThreads()}: median {1e3 * per[len(per) // 2]:.2f} ms per frame')


if __name__ == '__main__':
    main()
