#!/usr/bin/env python3
"""`gpu_features detect` on two builds (e.g. x86_64 and aarch64 under qemu), every preset in
config/ (the CLI's YAML configs; the ROS params files are left out), on the photos of
tests/data and on the real sequence tests/data/seq (so the tracking presets track), CPU
backend; then every output file of one build compared byte for byte with the other's.

  python3 scripts/cross_detect.py --native target/debug/gpu_features \
      --cross target/aarch64-unknown-linux-gnu/release/gpu_features \
      --runner "qemu-aarch64 -L /usr/aarch64-linux-gnu" --out target/aarch64-detect

Exits 1 (naming the first differing files) if any file differs or is missing on one side.
"""
import argparse
import filecmp
import glob
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def presets():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "config", "*.yaml"))):
        with open(path) as f:
            if "ros__parameters" in f.read():
                continue  # a ROS params file, not a CLI config
        out.append(path)
    return out


def inputs():
    photos = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.png")))
    seq = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "seq", "*.png")))
    return {"photos": photos, "seq": seq}


def run(cmd, out_dir, config, images):
    os.makedirs(out_dir, exist_ok=True)
    args = cmd + ["detect", "--backend", "cpu", "--no-overlay", "--config", config,
                  "--out", out_dir] + images
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cross_detect: {' '.join(args[:4])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")


def files_under(d):
    found = []
    for base, _, names in os.walk(d):
        for n in names:
            found.append(os.path.relpath(os.path.join(base, n), d))
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native", required=True)
    ap.add_argument("--cross", required=True)
    ap.add_argument("--runner", default="", help="command that runs the cross binary")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sides = {"native": [a.native], "cross": shlex.split(a.runner) + [a.cross]}
    secs = {}
    for side, cmd in sides.items():
        t = time.monotonic()
        for config in presets():
            name = os.path.splitext(os.path.basename(config))[0]
            for kind, images in inputs().items():
                run(cmd, os.path.join(a.out, side, name, kind), config, images)
        secs[side] = time.monotonic() - t
    left, right = os.path.join(a.out, "native"), os.path.join(a.out, "cross")
    lf, rf = files_under(left), files_under(right)
    if lf != rf:
        only = sorted(set(lf) ^ set(rf))
        sys.exit(f"cross_detect: file sets differ, e.g. {only[:5]}")
    differ = [f for f in lf if not filecmp.cmp(os.path.join(left, f), os.path.join(right, f), shallow=False)]
    n_bytes = sum(os.path.getsize(os.path.join(left, f)) for f in lf)
    print(f"cross_detect: {len(presets())} presets x {sum(len(v) for v in inputs().values())} images: "
          f"{len(lf)} files, {n_bytes} bytes; native {secs['native']:.1f} s, cross {secs['cross']:.1f} s")
    if differ:
        sys.exit(f"cross_detect: {len(differ)} of {len(lf)} files differ, e.g. {differ[:5]}")
    print("cross_detect: every file byte-identical")


if __name__ == "__main__":
    main()
