#!/usr/bin/env python3
"""OpenCV's VINS-Fusion front-end timed per frame: the peer of the tracker's bench rows
(`gpu_features bench --tracks` runs it on the frames it tracks; examples/track_speed.rs on
the real sequence of tests/data/seq).

usage: bench_vins_opencv.py [--threads N] [--max-cnt 150] [--min-dist 30] [--rounds 5]
                            [--seq-len L] [--stereo] [--json] [FRAME ...]
FRAMEs (grayscale images) are cut into sequences of L consecutive files (a new front-end
for each); without FRAMEs, the real sequence of tests/data/seq. The first frame of each
sequence is not timed (nothing to track yet). With --stereo the FRAMEs alternate left and
right (L counts pairs) and each pair is VINS-Fusion's stereo step: the left frame tracked,
then its points found in the right one (VinsFrontEnd.track_right). Prints the median ms per
frame (pair), or with --json: {"version", "threads", "median_ms", "p90_ms", "n",
"tracks_mean", "right_mean"} (right_mean 0 without --stereo).
"""
import argparse
import glob
import json
import os
import sys
import time

import cv2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_track_golden import VinsFrontEnd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=0, help='0: OpenCV default (all cores)')
    ap.add_argument('--max-cnt', type=int, default=150)
    ap.add_argument('--min-dist', type=int, default=30)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--seq-len', type=int, default=0, help='frames per sequence (0: all)')
    ap.add_argument('--stereo', action='store_true', help='FRAMEs alternate left, right')
    ap.add_argument('--json', action='store_true')
    ap.add_argument('frames', nargs='*')
    a = ap.parse_args()
    if a.threads > 0:
        cv2.setNumThreads(a.threads)
    files = a.frames
    if not files:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        files = sorted(glob.glob(os.path.join(root, 'tests', 'data', 'seq', '*.png')))
    imgs = []
    for p in files:
        img = cv2.imread(p, cv2.IMREAD_GRAYSCALE)
        if img is None:
            sys.exit(f'cannot read {p}')
        imgs.append(img)
    if not imgs:
        sys.exit('no frames')
    if a.stereo:
        if len(imgs) % 2:
            sys.exit('--stereo: an odd number of frames (they alternate left, right)')
        frames = list(zip(imgs[0::2], imgs[1::2]))
    else:
        frames = [(img, None) for img in imgs]
    L = a.seq_len if a.seq_len > 0 else len(frames)
    seqs = [frames[i:i + L] for i in range(0, len(frames), L)]
    per, tracks, right_tracks = [], [], []
    for _ in range(a.rounds):
        for seq in seqs:
            fe = VinsFrontEnd(a.max_cnt, a.min_dist)
            for k, (img, right) in enumerate(seq):
                t0 = time.perf_counter()
                n = len(fe.track(img))
                nr = len(fe.track_right(right)) if right is not None else 0
                if k > 0:
                    per.append(1e3 * (time.perf_counter() - t0))
                    tracks.append(n)
                    right_tracks.append(nr)
    if not per:
        sys.exit('no timed frames: sequences of one frame')
    per.sort()
    med = per[len(per) // 2]
    p90 = per[min(len(per) - 1, max(0, -(-9 * len(per) // 10) - 1))]
    if a.json:
        print(json.dumps({'version': cv2.__version__, 'threads': cv2.getNumThreads(),
                          'median_ms': med, 'p90_ms': p90, 'n': len(per),
                          'tracks_mean': sum(tracks) / len(tracks),
                          'right_mean': sum(right_tracks) / len(right_tracks)}))
    else:
        h, w = imgs[0].shape
        what = 'stereo pair' if a.stereo else 'frame'
        print(f'OpenCV {cv2.__version__} VINS front-end, {w}x{h}, max_cnt {a.max_cnt}, '
              f'threads {cv2.getNumThreads()}: median {med:.2f} ms per {what}')


if __name__ == '__main__':
    main()
