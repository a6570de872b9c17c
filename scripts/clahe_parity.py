#!/usr/bin/env python3
"""Our CLAHE (cpu::clahe, examples/clahe.rs) against OpenCV's (Debian's 4.6, which VINS-Mono's
`equalize` runs: scripts/vins/track_harness.cpp --clahe), pixel for pixel, on the given
images cut to several sizes (multiples of the grid and not: OpenCV pads those). Writes
OUT/clahe_parity.json; exits 1 when a pixel differs.

  scripts/clahe_parity.py --harness target/vins-harness/track_harness \\
      --ours target/release/examples/clahe --out DIR tests/data/*.png
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--clip", default="3.0")
    ap.add_argument("--tiles", default="8")
    ap.add_argument("images", nargs="+", type=Path)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    cases = []
    for p in a.images:
        g = np.asarray(Image.open(p).convert("L"), dtype=np.uint8)
        h, w = g.shape
        # The whole image, a grid multiple, and sizes off the grid on one or both sides.
        for (cw, ch) in {(w, h), (w - w % 8, h - h % 8), (w - w % 8 - 3, h - h % 8), (w - w % 8, h - h % 8 - 5),
                         (min(w, 101), min(h, 77))}:
            if cw < 16 or ch < 16:
                continue
            name = f"{p.stem}_{cw}x{ch}"
            src = a.out / f"{name}.pgm"
            Image.fromarray(np.ascontiguousarray(g[:ch, :cw])).save(src)
            cases.append((name, src))
    cv_args, our_args = [], []
    for name, src in cases:
        cv_args += [str(src), str(a.out / f"{name}.cv.pgm")]
        our_args += [str(src), str(a.out / f"{name}.ours.pgm")]
    subprocess.run([a.harness, "--clahe", a.clip, a.tiles, *cv_args], check=True)
    subprocess.run([a.ours, a.clip, a.tiles, *our_args], check=True)
    rows, pixels, bad = [], 0, 0
    for name, _ in cases:
        cv = np.asarray(Image.open(a.out / f"{name}.cv.pgm"))
        ours = np.asarray(Image.open(a.out / f"{name}.ours.pgm"))
        diff = int((cv != ours).sum()) if cv.shape == ours.shape else cv.size
        rows.append({"image": name, "pixels": int(cv.size), "different": diff})
        pixels += int(cv.size)
        bad += diff
    (a.out / "clahe_parity.json").write_text(json.dumps({"images": len(cases), "pixels": pixels,
                                                        "different": bad, "rows": rows}, indent=1))
    print(f"clahe parity: {len(cases)} images, {pixels} pixels, {bad} different from OpenCV's CLAHE "
          f"(clip {a.clip}, {a.tiles}x{a.tiles})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
