#!/usr/bin/env python3
"""Tracking accuracy against ground truth: sequences made from real photos (tests/data) warped
by known smooth homographies (a pan, a rotation, a zoom, a blur ramp, a brightness ramp),
tracked by gpu_features (`detect --config config/vins_frontend.yaml`, tracks.csv) and by
OpenCV's VINS-Fusion front-end in cv2 (scripts/gen_track_golden.py: VinsFrontEnd) on the same
frames with the same settings. For every track seen in two consecutive frames the error is
the distance between its position and where the true homography takes its previous position.

usage: eval_tracks.py [--bin target/release/gpu_features] [--backend cpu] [--frames 20]
                      [--markdown OUT.md]
Prints one table: per sequence and tracker, the median and p95 error (px), the share of tracks
lost per frame, the mean length (frames) of the tracks that ended, and the tracks per frame.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from gen_track_golden import VinsFrontEnd  # noqa: E402

W, H = 640, 480


def homographies(kind, n, src_shape):
    """H_k maps the photo to frame k (output 640x480), smooth in k."""
    sh, sw = src_shape
    c = np.array([[1, 0, -sw / 2], [0, 1, -sh / 2], [0, 0, 1]], float)
    out = []
    for k in range(n):
        t = k / max(n - 1, 1)
        if kind == 'pan':
            m = np.array([[1, 0, -120 * t], [0, 1, -40 * t], [0, 0, 1]], float)
        elif kind == 'rotation':
            a = np.deg2rad(12 * t)
            m = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        elif kind == 'zoom':
            s = 1 + 0.35 * t
            m = np.diag([s, s, 1.0])
        elif kind == 'perspective':
            m = np.array([[1, 0.05 * t, 0], [0, 1, 0], [3e-4 * t, 1e-4 * t, 1]], float)
        else:  # blur / brightness: a slow pan under the photometric change
            m = np.array([[1, 0, -40 * t], [0, 1, 0], [0, 0, 1]], float)
        to_frame = np.array([[1, 0, W / 2], [0, 1, H / 2], [0, 0, 1]], float)
        out.append(to_frame @ m @ c)
    return out


def make_sequence(photo, kind, n, outdir):
    img = cv2.imread(os.path.join(ROOT, 'tests', 'data', photo), cv2.IMREAD_GRAYSCALE)
    hs = homographies(kind, n, img.shape)
    paths = []
    for k, hk in enumerate(hs):
        f = cv2.warpPerspective(img, hk, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT101)
        t = k / max(n - 1, 1)
        if kind == 'blur' and t > 0:
            f = cv2.GaussianBlur(f, (0, 0), 0.3 + 1.7 * t)
        if kind == 'brightness':
            f = cv2.convertScaleAbs(f, alpha=1.0 - 0.4 * t, beta=30 * t)
        p = os.path.join(outdir, f'{kind}_{k:03d}.png')
        cv2.imwrite(p, f)
        paths.append(p)
    return paths, hs


def ours(bin_path, backend, paths, outdir):
    r = subprocess.run([bin_path, 'detect', '--backend', backend, '--config',
                        os.path.join(ROOT, 'config', 'vins_frontend.yaml'), '--no-overlay',
                        '--out', outdir] + paths, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'gpu_features detect failed: {r.stderr}')
    frames = []
    for p in paths:
        stem = os.path.splitext(os.path.basename(p))[0]
        with open(os.path.join(outdir, stem + '.tracks.csv')) as f:
            # the CSV holds each f32 in its shortest form: back to f32 exactly
            frames.append({int(row['id']): (float(np.float32(row['x'])), float(np.float32(row['y'])))
                           for row in csv.DictReader(f)})
    return frames


def opencv(paths):
    fe = VinsFrontEnd()
    frames = []
    for p in paths:
        tr = fe.track(cv2.imread(p, cv2.IMREAD_GRAYSCALE))
        frames.append({i: (float(x), float(y)) for i, (x, y), _ in tr})
    return frames


def measure(frames, hs):
    errs, lost, tried, lengths, alive = [], 0, 0, [], []
    first = {}
    for k, fr in enumerate(frames):
        alive.append(len(fr))
        for i in fr:
            first.setdefault(i, k)
        if k == 0:
            continue
        prev = frames[k - 1]
        g = hs[k] @ np.linalg.inv(hs[k - 1])
        for i, (x, y) in prev.items():
            tried += 1
            if i not in fr:
                lost += 1
                lengths.append(k - first[i])
                continue
            q = g @ np.array([x, y, 1.0])
            errs.append(np.hypot(fr[i][0] - q[0] / q[2], fr[i][1] - q[1] / q[2]))
    errs = np.array(errs) if errs else np.array([np.nan])
    return (float(np.median(errs)), float(np.percentile(errs, 95)), lost / max(tried, 1),
            float(np.mean(lengths)) if lengths else float('nan'), float(np.mean(alive)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', default=os.path.join(ROOT, 'target', 'release', 'gpu_features'))
    ap.add_argument('--backend', default='cpu')
    ap.add_argument('--frames', type=int, default=20)
    ap.add_argument('--markdown')
    a = ap.parse_args()
    rows = ['| sequence | tracker | error median (px) | error p95 (px) | lost per frame | mean length of ended tracks (frames) | tracks per frame |',
            '|---|---|---:|---:|---:|---:|---:|']
    same = []
    with tempfile.TemporaryDirectory() as tmp:
        for photo, kind in [('graf1.png', 'pan'), ('building.png', 'rotation'), ('astronaut.png', 'zoom'),
                            ('graf3.png', 'perspective'), ('brick.png', 'blur'), ('box.png', 'brightness')]:
            d = os.path.join(tmp, kind)
            os.makedirs(d)
            paths, hs = make_sequence(photo, kind, a.frames, d)
            of, cf = ours(a.bin, a.backend, paths, os.path.join(d, 'out')), opencv(paths)
            o, c = measure(of, hs), measure(cf, hs)
            same.append(f'{kind}: {"identical" if of == cf else "DIFFERENT"} tracks in all {len(of)} frames')
            for name, m in [(f'gpu_features ({a.backend})', o), (f'OpenCV {cv2.__version__} VINS front-end', c)]:
                rows.append(f'| {kind} ({photo}) | {name} | {m[0]:.3f} | {m[1]:.3f} | {100 * m[2]:.1f} % | {m[3]:.1f} | {m[4]:.0f} |')
    text = '\n'.join(rows) + '\n\nIDs and positions, ours against OpenCV\'s: ' + '; '.join(same) + '.'

    print(text)
    if a.markdown:
        with open(a.markdown, 'w') as f:
            f.write(text + '\n')


if __name__ == '__main__':
    main()
