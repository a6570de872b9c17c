#!/usr/bin/env python3
"""OpenCV ORB side of the homography evaluation (repeatability and matching score in the
Mikolajczyk protocol), for `gpu_features replay --opencv-eval FILE`.

The protocol is the one in src/eval/, implemented again here with numpy:
  * a keypoint is the disc of diameter `size` around (x, y) (level-0 pixels);
  * only keypoints in the common part count (H p1 inside image 2, H^-1 p2 inside image 1,
    i.e. 0 <= x <= w-1 and 0 <= y <= h-1);
  * overlap error = 1 - |A n B| / |A u B|, A = disc of p1 mapped into image 2 by the local
    affine approximation (Jacobian) of H, B = disc of p2, both shapes rescaled about their
    centres by k = 30 / r1 (A gets a 30 px radius), integrated on a 48x48 sample grid over
    the pair's bounding box;
  * correspondences: overlap error < 0.4, one-to-one, greedily by lowest error (ties by
    index); repeatability = correspondences / min(n1, n2) over the common part;
  * matching score: each image-1 keypoint's nearest neighbour in image 2 by Hamming distance
    (first on ties); correct when that pair's overlap error < 0.4; / min(n1, n2).

With --gpu-features BIN the script also runs `BIN detect` (descriptors switched on, as the
Rust side does) on the same images and scores *our* keypoints twice:
  * with our own ORB descriptors (the CSV's `descriptor` column): the Rust side's numbers
    again, computed by this independent implementation of the protocol (a cross-check: the
    correspondences and correct matches must be equal);
  * with OpenCV's ORB descriptor (`ORB.compute` on our keypoints): a descriptor-neutral
    matching score.

Usage:
  eval_homography.py --pair graf1-graf3=tests/data/graf1.png,tests/data/graf3.png,tests/data/H1to3p.xml \
      [--pair ...] [--gpu-features target/release/gpu_features] [--config FILE] [--out FILE.json]
Needs opencv-python-headless and numpy (scripts/setup-python.sh).
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

MAX_ERR = 0.4
GRID = 48
NORM_R = 30.0


def parse_h(path):
    text = Path(path).read_text()
    m = re.search(r"<data>(.*?)</data>", text, re.S)
    if m:
        body = m.group(1)
    else:
        m = re.search(r"data:\s*\[(.*?)\]", text, re.S)
        body = m.group(1) if m else text
    vals = [float(t) for t in re.split(r"[\s,]+", body.strip()) if t]
    if len(vals) < 9:
        sys.exit(f"{path}: no 3x3 homography")
    return np.array(vals[:9], dtype=np.float64).reshape(3, 3)


def apply(h, pts):
    p = np.c_[pts, np.ones(len(pts))] @ h.T
    return p[:, :2] / p[:, 2:3]


def jacobian(h, x, y):
    w = h[2, 0] * x + h[2, 1] * y + h[2, 2]
    u = h[0, 0] * x + h[0, 1] * y + h[0, 2]
    v = h[1, 0] * x + h[1, 1] * y + h[1, 2]
    return np.array([[(h[0, 0] * w - u * h[2, 0]) / w**2, (h[0, 1] * w - u * h[2, 1]) / w**2],
                     [(h[1, 0] * w - v * h[2, 0]) / w**2, (h[1, 1] * w - v * h[2, 1]) / w**2]])


class Region:
    """Keypoint of image 1 mapped into image 2 (see the module doc)."""

    def __init__(self, h, x, y, size):
        r1 = max(size / 2.0, 0.5)
        self.k = NORM_R / r1
        self.c = apply(h, np.array([[x, y]]))[0]
        m = jacobian(h, x, y) * self.k * r1
        self.inv = np.linalg.inv(m)
        self.ext = np.array([np.hypot(m[0, 0], m[0, 1]), np.hypot(m[1, 0], m[1, 1])])


def overlap_error(a, bx, by, bsize):
    rb = a.k * max(bsize / 2.0, 0.5)
    if abs(a.c[0] - bx) > a.ext[0] + rb or abs(a.c[1] - by) > a.ext[1] + rb:
        return 1.0
    x0 = min(a.c[0] - a.ext[0], bx - rb)
    x1 = max(a.c[0] + a.ext[0], bx + rb)
    y0 = min(a.c[1] - a.ext[1], by - rb)
    y1 = max(a.c[1] + a.ext[1], by + rb)
    xs = x0 + (np.arange(GRID) + 0.5) * ((x1 - x0) / GRID)
    ys = y0 + (np.arange(GRID) + 0.5) * ((y1 - y0) / GRID)
    gx, gy = np.meshgrid(xs, ys)
    dx, dy = gx - a.c[0], gy - a.c[1]
    u = a.inv[0, 0] * dx + a.inv[0, 1] * dy
    v = a.inv[1, 0] * dx + a.inv[1, 1] * dy
    in_a = u * u + v * v <= 1.0
    in_b = (gx - bx) ** 2 + (gy - by) ** 2 <= rb * rb
    union = np.count_nonzero(in_a | in_b)
    return 1.0 if union == 0 else 1.0 - np.count_nonzero(in_a & in_b) / union


def evaluate(name, h, kp1, d1, size1, kp2, d2, size2):
    """kp*: arrays of (x, y, size); d*: uint8 descriptor rows; size*: (w, h)."""
    hinv = np.linalg.inv(h)

    def inside(p, wh):
        return (p[:, 0] >= 0) & (p[:, 1] >= 0) & (p[:, 0] <= wh[0] - 1) & (p[:, 1] <= wh[1] - 1)

    c1 = np.nonzero(inside(apply(h, kp1[:, :2]), size2))[0] if len(kp1) else np.array([], int)
    c2 = np.nonzero(inside(apply(hinv, kp2[:, :2]), size1))[0] if len(kp2) else np.array([], int)
    k2 = kp2[c2]
    regions = [Region(h, *kp1[i, :3]) for i in c1]
    max_r2 = k2[:, 2].max() / 2.0 if len(k2) else 0.0
    pairs = []
    for a, reg in enumerate(regions):
        reach = max(reg.ext) + max_r2 * reg.k
        near = np.nonzero((np.abs(k2[:, 0] - reg.c[0]) <= reach) & (np.abs(k2[:, 1] - reg.c[1]) <= reach))[0]
        for b in near:
            e = overlap_error(reg, k2[b, 0], k2[b, 1], k2[b, 2])
            if e < MAX_ERR:
                pairs.append((e, a, int(b)))
    pairs.sort()
    used1, used2, corr = set(), set(), 0
    for _, a, b in pairs:
        if a not in used1 and b not in used2:
            used1.add(a)
            used2.add(b)
            corr += 1
    correct = 0
    if len(c2) and len(c1):
        bits2 = np.unpackbits(d2[c2], axis=1)
        for a, i in enumerate(c1):
            dist = np.count_nonzero(np.unpackbits(d1[i])[None, :] != bits2, axis=1)
            b = int(np.argmin(dist))
            if overlap_error(regions[a], k2[b, 0], k2[b, 1], k2[b, 2]) < MAX_ERR:
                correct += 1
    denom = min(len(c1), len(c2))
    ratio = (lambda n: n / denom) if denom else (lambda n: 0.0)
    return {"name": name, "n1": len(kp1), "n2": len(kp2), "n1_common": int(len(c1)),
            "n2_common": int(len(c2)), "correspondences": corr, "repeatability": ratio(corr),
            "correct_matches": correct, "matching_score": ratio(correct)}


def read_config(path):
    """The two-level `section: / key: value` YAML of a gpu_features config (no PyYAML needed)."""
    cfg, section = {}, None
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        key, _, value = line.strip().partition(":")
        if not line.startswith((" ", "\t")):
            section = cfg.setdefault(key, {})
        elif section is not None:
            section[key] = value.strip().strip("'\"")
    return cfg


def make_warp(photo, out_dir):
    """Writes PHOTO's warp and its homography; returns the pair spec."""
    img = cv2.imread(str(photo), cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    c, s_ = np.cos(np.radians(20)) * 0.8, np.sin(np.radians(20)) * 0.8
    rot = np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1]])
    to_c = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]])
    back = np.array([[1, 0, w / 2], [0, 1, h / 2], [0, 0, 1]])
    persp = np.array([[1, 0, 0], [0, 1, 0], [1e-4, 5e-5, 1]])
    H = back @ persp @ rot @ to_c
    H /= H[2, 2]
    out_dir.mkdir(parents=True, exist_ok=True)
    warped = cv2.warpPerspective(img, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    f2 = out_dir / f"{photo.stem}_warp.png"
    hf = out_dir / f"H_{photo.stem}_warp.txt"
    cv2.imwrite(str(f2), warped)
    hf.write_text("\n".join(" ".join(f"{v:.17g}" for v in row) for row in H) + "\n")
    return f"{photo.stem}-warp={photo},{f2},{hf}"


def orb_for(cfg):
    p = cfg.get("pyramid", {})
    d = cfg.get("detector", {})
    s = cfg.get("select", {})
    o = cfg.get("orient", {})
    return cv2.ORB_create(
        nfeatures=int(s.get("max_keypoints", 2000)), scaleFactor=float(p.get("scale_factor", 1.2)),
        nlevels=int(p.get("levels", 8)), edgeThreshold=int(d.get("border", 31)), firstLevel=0, WTA_K=2,
        scoreType=cv2.ORB_HARRIS_SCORE if d.get("score", "harris") == "harris" else cv2.ORB_FAST_SCORE,
        patchSize=int(o.get("patch_size", 31)), fastThreshold=int(d.get("fast_threshold", 20)))


def gray(path):
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        sys.exit(f"cannot read {path}")
    if img.ndim == 2:
        return img if img.dtype == np.uint8 else (img / 257).round().astype(np.uint8)
    code = cv2.COLOR_BGRA2GRAY if img.shape[2] == 4 else cv2.COLOR_BGR2GRAY
    return cv2.cvtColor(img, code)


def kp_array(kps):
    return np.array([[k.pt[0], k.pt[1], k.size] for k in kps], dtype=np.float64).reshape(-1, 3)


def our_keypoints(binary, img, config, tmp):
    """Our keypoints (cv2.KeyPoint list) and descriptors (uint8 rows) from `BIN detect`."""
    cmd = [binary, "detect", "--backend", "cpu", "--set", "describe.enabled=true",
           "--out", tmp, "--no-overlay", str(img)]
    if config:
        cmd[2:2] = ["--config", str(config)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    lines = Path(tmp, Path(img).stem + ".keypoints.csv").read_text().splitlines()
    col = {name: i for i, name in enumerate(lines[0].split(","))}
    if "descriptor" not in col:
        sys.exit(f"{binary} detect wrote no descriptor column (header {lines[0]!r})")
    kps, desc = [], []
    for r in lines[1:]:
        v = r.split(",")
        x, y, resp, size, angle = (float(v[col[k]]) for k in ("x", "y", "response", "size", "angle"))
        kps.append(cv2.KeyPoint(x, y, size, angle, resp, int(v[col["octave"]])))
        desc.append(np.frombuffer(bytes.fromhex(v[col["descriptor"]]), dtype=np.uint8))
    return kps, np.array(desc, dtype=np.uint8).reshape(-1, 32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", default=[], help="[NAME=]IMG1,IMG2,H")
    ap.add_argument("--warp", action="append", default=[], metavar="PHOTO",
                    help="also a synthetic pair: PHOTO and PHOTO warped by a known homography "
                         "(rotation 20 deg, scale 0.8, mild perspective), written to --warp-dir")
    ap.add_argument("--warp-dir", type=Path, default=Path("out/warps"))
    ap.add_argument("--config", type=Path, help="gpu_features YAML config (ORB parameters follow it)")
    ap.add_argument("--gpu-features", help="gpu_features binary: also score our keypoints")
    ap.add_argument("--out", type=Path, help="JSON output (default: stdout)")
    args = ap.parse_args()
    cfg = read_config(args.config) if args.config else {}
    for photo in args.warp:
        args.pair.append(make_warp(Path(photo), args.warp_dir))
    if not args.pair:
        ap.error("give at least one --pair or --warp")
    orb = orb_for(cfg)
    result = {"opencv_version": cv2.__version__, "pairs": [], "ours_with_orb_descriptor": [],
              "ours_with_our_descriptor": []}
    for spec in args.pair:
        name, _, rest = spec.rpartition("=")
        f1, f2, hf = rest.split(",")
        name = name or f"{Path(f1).stem}-{Path(f2).stem}"
        h = parse_h(hf)
        # cvtColor, not IMREAD_GRAYSCALE (whose codec-side conversion rounds differently):
        # the same gray image gpu_features computes.
        g1, g2 = gray(f1), gray(f2)
        s1, s2 = (g1.shape[1], g1.shape[0]), (g2.shape[1], g2.shape[0])
        k1, d1 = orb.detectAndCompute(g1, None)
        k2, d2 = orb.detectAndCompute(g2, None)
        r = evaluate(name, h, kp_array(k1), d1, s1, kp_array(k2), d2, s2)
        result["pairs"].append(r)
        print(f"{name}: OpenCV ORB repeatability {r['repeatability']:.3f} matching score "
              f"{r['matching_score']:.3f} ({r['n1_common']}/{r['n2_common']} in common)", file=sys.stderr)
        if args.gpu_features:
            with tempfile.TemporaryDirectory() as tmp:
                o1, od1 = our_keypoints(args.gpu_features, f1, args.config, tmp)
                o2, od2 = our_keypoints(args.gpu_features, f2, args.config, tmp)
            r = evaluate(name, h, kp_array(o1), od1, s1, kp_array(o2), od2, s2)
            result["ours_with_our_descriptor"].append(r)
            print(f"{name}: gpu_features keypoints + our ORB descriptor: repeatability "
                  f"{r['repeatability']:.3f} matching score {r['matching_score']:.3f}", file=sys.stderr)
            # ORB.compute may drop keypoints too close to the border: score what it keeps.
            o1, e1 = orb.compute(g1, o1)
            o2, e2 = orb.compute(g2, o2)
            r = evaluate(name, h, kp_array(o1), e1, s1, kp_array(o2), e2, s2)
            result["ours_with_orb_descriptor"].append(r)
            print(f"{name}: gpu_features keypoints + ORB descriptor: repeatability "
                  f"{r['repeatability']:.3f} matching score {r['matching_score']:.3f}", file=sys.stderr)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
