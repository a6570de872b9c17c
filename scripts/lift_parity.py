#!/usr/bin/env python3
"""Our camodocal lifting against camodocal's own `liftProjective`, bit for bit.

For each camodocal camera file: pixels on a grid over the whole image (every 2 px, at
fractional positions a tracked point can take) and random ones, each a float32 as VINS
holds it; lifted by camodocal itself (scripts/vins/lift_harness.cpp, linked against the
camodocal that ../shared/vins-fusion/setup.sh builds) and by ours (examples/lift.rs, the
tracker's `track.lifting: camodocal`), compared as the float32 VINS keeps
(`cv::Point2f(x / z, y / z)`). Prints a table; exits 1 when a value differs (unless
--report-only).

  scripts/lift_parity.py --harness target/vins-harness/lift_harness \\
      --ours target/release/examples/lift CAMERA.yaml...
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np


def size(path):
    t = Path(path).read_text()
    w = int(re.search(r"image_width:\s*(\d+)", t).group(1))
    h = int(re.search(r"image_height:\s*(\d+)", t).group(1))
    model = re.search(r"model_type:\s*(\w+)", t).group(1)
    return w, h, model


def points(w, h, seed=7):
    g = np.stack(np.meshgrid(np.arange(0, w, 2.0), np.arange(0, h, 2.0)), -1).reshape(-1, 2)
    g = g + np.array([0.37, 0.81])
    rng = np.random.default_rng(seed)
    r = rng.uniform([0, 0], [w - 1, h - 1], size=(20000, 2))
    return np.concatenate([g, r]).astype(np.float32)


def run(cmd, pts):
    text = "".join(f"{float(u)!r} {float(v)!r}\n" for u, v in pts.astype(np.float64))
    res = subprocess.run(cmd, input=text, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({res.returncode}): {res.stderr[-2000:]}")
    return [tuple(int(x, 16) for x in line.split()) for line in res.stdout.splitlines()]


def as_f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("cameras", nargs="+")
    a = ap.parse_args()
    rows, bad = [], 0
    for cam in a.cameras:
        w, h, model = size(cam)
        pts = points(w, h)
        theirs = run([a.harness, cam], pts)
        ours = run([a.ours, cam], pts)
        if len(theirs) != len(pts) or len(ours) != len(pts):
            raise SystemExit(f"{cam}: {len(pts)} points, camodocal {len(theirs)}, ours {len(ours)} answers")
        t, o = as_f32(theirs), as_f32(ours)
        finite = np.isfinite(t) & np.isfinite(o)
        same = (np.array(theirs) == np.array(ours)).all(axis=1)
        diff = np.abs(t - o)[finite.all(axis=1)]
        worst = float(diff.max()) if diff.size else 0.0
        rows.append({"camera": cam, "model": model, "points": len(pts), "identical": int(same.sum()),
                     "worst_abs_difference": worst})
        bad += int((~same).sum())
    print("| camera file | model | pixels | f32-identical | largest difference |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {Path(r['camera']).name} | {r['model']} | {r['points']} | {r['identical']} | "
              f"{r['worst_abs_difference']:.3g} |")
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))
    sys.exit(0 if (bad == 0 or a.report_only) else 1)


if __name__ == "__main__":
    main()
