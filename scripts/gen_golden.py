#!/usr/bin/env python3
"""Regenerates tests/golden/ from tests/data/ with OpenCV (opencv-python-headless).

Run: bash scripts/setup-python.sh && .venv-py/bin/python scripts/gen_golden.py

Per fixture <stem> it writes tests/golden/<stem>/:
  gray.png                    cvtColor(BGR2GRAY) (or the gray file itself)
  fast_t{T}_{nms|nonms}.csv   cv::FAST(gray, T, nms): x,y,response (OpenCV's order)
  orb_l1.csv                  ORB, 1 level, no budget, HARRIS: x,y,response,angle,size
  orb_default.csv             ORB_create() defaults (500 points): x,y,response,angle,size,octave
  orb_2000.csv                ORB_create(nfeatures=2000), the opencv_orb preset
  orb_2000_desc.csv           ORB_create(2000).detectAndCompute: the keypoints as above, in OpenCV's
                              order, plus the 32-byte descriptor as 64 lowercase hex characters
  orb_border_desc.csv         ORB_create(edgeThreshold=0).compute on chosen keypoints (octaves 0
                              and 2) up to the image edges, random angles: x,y,angle,octave,descriptor
  pyr_linear_{i}.png          level i: resize(level i-1, ORB size, INTER_LINEAR)
  pyr_exact_{i}.png           the same with INTER_LINEAR_EXACT (what ORB itself uses)
  canny_{lo}_{hi}_{l1|l2}.png cv::Canny(gray, lo, hi, 3, L2)
  canny_blur5_{lo}_{hi}_l2.png  GaussianBlur(5x5, sigma 0) then Canny
  harris_b{B}_k{K}.f32        cornerHarris(gray, B, K, 0.04): little-endian float32, row-major
and tests/golden/VERSION with the OpenCV version used.
"""
import os

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
GOLD = os.path.join(ROOT, "tests", "golden")
FAST_CASES = [(20, True), (20, False), (10, True), (40, True)]
CANNY_CASES = [(50, 150, True), (50, 150, False), (20, 60, True), (100, 250, False)]
HARRIS_CASES = [(2, 3), (3, 5)]
# Dense float maps are big: only a few fixtures get them.
HARRIS_FIXTURES = {"box", "coffee_odd", "camera"}
PYR_EXACT_FIXTURES = {"camera", "coffee_odd", "graf1"}
LEVELS, SCALE = 8, 1.2


def orb_sizes(w, h):
    sizes = []
    for level in range(LEVELS):
        # As ORB: its float scaleFactor (1.2f) widened to double, scale = 1 / (float)pow(.., level),
        # size = cvRound(cols * scale).
        scale = np.float32(1.0) / np.float32(float(np.float32(SCALE)) ** level)
        sizes.append((int(np.rint(np.float32(w) * scale)), int(np.rint(np.float32(h) * scale))))
    return sizes


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(repr(float(v)) if isinstance(v, float) else str(v) for v in r) + "\n")


def write_border_descriptors(stem, gray, sizes, path):
    """Keypoints whose test pattern leaves the level: ORB's padded pyramid (23 pixels of
    REFLECT_101 for edgeThreshold 0) holds every sample, so OpenCV's result is defined."""
    rng = np.random.default_rng(sum(stem.encode()))
    kps = []
    for octave in (0, 2):
        w, h = sizes[octave]
        scale = np.float32(float(np.float32(SCALE)) ** octave)
        for _ in range(40):
            # Half near an edge or a corner, half anywhere.
            x = int(rng.choice([rng.integers(0, 20), rng.integers(w - 20, w), rng.integers(0, w)]))
            y = int(rng.choice([rng.integers(0, 20), rng.integers(h - 20, h), rng.integers(0, h)]))
            angle = float(np.float32(rng.uniform(0, 360)))
            px, py = float(np.float32(x) * scale), float(np.float32(y) * scale)
            kps.append(cv2.KeyPoint(px, py, float(np.float32(31) * scale), angle, 0.0, octave))
    got, desc = cv2.ORB_create(edgeThreshold=0).compute(gray, kps)
    assert len(got) == len(kps), f"{stem}: OpenCV dropped keypoints"
    write_csv(path, "x,y,angle,octave,descriptor",
              [(float(k.pt[0]), float(k.pt[1]), float(k.angle), k.octave, d.tobytes().hex())
               for k, d in zip(got, desc)])


def main():
    os.makedirs(GOLD, exist_ok=True)
    cv2.setNumThreads(1)
    with open(os.path.join(GOLD, "VERSION"), "w") as f:
        f.write(f"opencv {cv2.__version__}\n")
    for name in sorted(os.listdir(DATA)):
        if not name.endswith(".png"):
            continue
        stem = name[:-4]
        out = os.path.join(GOLD, stem)
        os.makedirs(out, exist_ok=True)
        img = cv2.imread(os.path.join(DATA, name), cv2.IMREAD_UNCHANGED)
        if img.ndim == 3:
            code = cv2.COLOR_BGRA2GRAY if img.shape[2] == 4 else cv2.COLOR_BGR2GRAY
            gray = cv2.cvtColor(img, code)
        else:
            gray = img
        cv2.imwrite(os.path.join(out, "gray.png"), gray)

        for t, nms in FAST_CASES:
            kps = cv2.FastFeatureDetector_create(t, nms, cv2.FAST_FEATURE_DETECTOR_TYPE_9_16).detect(gray)
            write_csv(os.path.join(out, f"fast_t{t}_{'nms' if nms else 'nonms'}.csv"), "x,y,response",
                      [(int(k.pt[0]), int(k.pt[1]), float(k.response)) for k in kps])

        orb1 = cv2.ORB_create(nfeatures=1_000_000, scaleFactor=SCALE, nlevels=1, edgeThreshold=31,
                              scoreType=cv2.ORB_HARRIS_SCORE, patchSize=31, fastThreshold=20)
        kps = orb1.detect(gray, None)
        write_csv(os.path.join(out, "orb_l1.csv"), "x,y,response,angle,size",
                  [(int(k.pt[0]), int(k.pt[1]), float(k.response), float(k.angle), float(k.size)) for k in kps])
        for nfeatures, tag in [(500, "orb_default"), (2000, "orb_2000")]:
            kps = cv2.ORB_create(nfeatures=nfeatures).detect(gray, None)
            write_csv(os.path.join(out, f"{tag}.csv"), "x,y,response,angle,size,octave",
                      [(float(k.pt[0]), float(k.pt[1]), float(k.response), float(k.angle), float(k.size),
                        k.octave) for k in kps])

        kps, desc = cv2.ORB_create(nfeatures=2000).detectAndCompute(gray, None)
        write_csv(os.path.join(out, "orb_2000_desc.csv"), "x,y,response,angle,size,octave,descriptor",
                  [(float(k.pt[0]), float(k.pt[1]), float(k.response), float(k.angle), float(k.size),
                    k.octave, d.tobytes().hex()) for k, d in zip(kps, desc)])

        sizes = orb_sizes(gray.shape[1], gray.shape[0])
        write_border_descriptors(stem, gray, sizes, os.path.join(out, "orb_border_desc.csv"))
        interps = [(cv2.INTER_LINEAR, "linear")]
        if stem in PYR_EXACT_FIXTURES:
            interps.append((cv2.INTER_LINEAR_EXACT, "exact"))
        for interp, tag in interps:
            prev = gray
            for level in range(1, LEVELS):
                prev = cv2.resize(prev, sizes[level], interpolation=interp)
                cv2.imwrite(os.path.join(out, f"pyr_{tag}_{level}.png"), prev)

        for lo, hi, l2 in CANNY_CASES:
            edges = cv2.Canny(gray, lo, hi, apertureSize=3, L2gradient=l2)
            cv2.imwrite(os.path.join(out, f"canny_{lo}_{hi}_{'l2' if l2 else 'l1'}.png"), edges)
        blurred = cv2.GaussianBlur(gray, (5, 5), 0)
        cv2.imwrite(os.path.join(out, "canny_blur5_50_150_l2.png"),
                    cv2.Canny(blurred, 50, 150, apertureSize=3, L2gradient=True))

        for block, ksize in HARRIS_CASES if stem in HARRIS_FIXTURES else []:
            resp = cv2.cornerHarris(gray, block, ksize, 0.04).astype("<f4")
            resp.tofile(os.path.join(out, f"harris_b{block}_k{ksize}.f32"))
        print(stem, gray.shape, sizes[-1])


if __name__ == "__main__":
    main()
