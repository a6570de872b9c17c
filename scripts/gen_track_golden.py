#!/usr/bin/env python3
"""Goldens of the tracker's OpenCV functions on the real sequence tests/data/seq/ (cockatoo
frames, licence in tests/data/LICENSES.md), written to tests/golden/track/:

  pyramid.json   cv2.buildOpticalFlowPyramid((21, 21), 3) of every frame: each level's size
                 and the CRC-32 of its pixels
  gftt.json      cv2.cornerMinEigenVal(frame, 3, 3) (CRC-32 of its f32 bytes) and
                 cv2.goodFeaturesToTrack(frame, 150, 0.01, 30) of every frame, without a mask
                 and with VINS's mask (cv2.circle of radius 30 around given points)
  lk.json        cv2.calcOpticalFlowPyrLK(prev, next, pts, None, (21, 21), 3) for every
                 consecutive pair: pts = the GFTT corners of prev plus seeded sub-pixel points
                 (some near and past the border); and the reverse check VINS-Fusion runs
                 (maxLevel 1, OPTFLOW_USE_INITIAL_FLOW from the previous positions); and
                 cv2.findFundamentalMat(FM_RANSAC, 1.0, 0.99)'s inlier mask of the tracked pairs
  vins.json      the tracker end to end: VINS-Fusion's trackImage (flow back, no F test) in
                 cv2 (vins_reference below), every frame's (id, x, y, age)
  stereo.json    VINS-Fusion's stereo mode (vins_stereo_reference below) on pairs cut from
                 each frame: left = columns [0, w - 8), right = columns [8, w) (a disparity of
                 8 px in real pixels): every frame's left and right (id, x, y, age)
  undistort.json cv2.undistortPoints / cv2.fisheye.undistortPoints of a grid of pixels for
                 the camera models the tracker supports

`--stereo-only` writes stereo.json alone. Floats are stored as their IEEE bit patterns (u32 for f32, u64 for f64) so the tests compare
bits (a JSON parser need not round decimal doubles correctly). Run with the venv of scripts/setup-python.sh:
  .venv-py/bin/python scripts/gen_track_golden.py
"""
import glob
import json
import os
import struct
import sys
import zlib

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "track")


def f32bits(v):
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def f64bits(v):
    return struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def frames():
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "seq", "*.png")))
    return [(os.path.basename(p), cv2.imread(p, cv2.IMREAD_GRAYSCALE)) for p in paths]


def vins_mask(shape, pts, radius=30):
    mask = np.full(shape, 255, np.uint8)
    for x, y in pts:
        cv2.circle(mask, (int(round(x)), int(round(y))), radius, 0, -1)
    return mask


class VinsFrontEnd:
    """VINS-Fusion's trackImage (mono, no prediction; its rejectWithF is commented out, and
    here too unless reject_with_f) in cv2: the tracker's end-to-end reference and the bench's
    OpenCV peer. The mask's sort is stable (as ours; VINS's std::sort leaves ties in an
    unspecified order)."""

    def __init__(self, max_cnt=150, min_dist=30, reject_with_f=False):
        self.max_cnt, self.min_dist, self.reject_with_f = max_cnt, min_dist, reject_with_f
        self.prev, self.prev_pts, self.ids, self.cnt, self.n_id = None, [], [], [], 0

    def track(self, img):
        f32 = np.float32
        h, w = img.shape
        cur, ids, cnt = [], self.ids, self.cnt
        if self.prev_pts:
            P = np.array(self.prev_pts, np.float32).reshape(-1, 1, 2)
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(self.prev, img, P, None, winSize=(21, 21), maxLevel=3)
            rev, rst, _ = cv2.calcOpticalFlowPyrLK(
                img, self.prev, nxt, P.copy(), winSize=(21, 21), maxLevel=1,
                criteria=(cv2.TERM_CRITERIA_COUNT + cv2.TERM_CRITERIA_EPS, 30, 0.01),
                flags=cv2.OPTFLOW_USE_INITIAL_FLOW)
            keep = []
            for i in range(len(self.prev_pts)):
                a, b = P[i, 0], rev[i, 0]
                dx, dy = f32(a[0] - b[0]), f32(a[1] - b[1])
                d = np.sqrt(float(f32(dx * dx + dy * dy)))
                ok = st[i, 0] and rst[i, 0] and d <= 0.5
                x, y = nxt[i, 0]
                rx, ry = int(np.rint(x)), int(np.rint(y))
                if ok and 1 <= rx < w - 1 and 1 <= ry < h - 1:
                    keep.append(i)
            pp = [self.prev_pts[i] for i in keep]
            cur = [tuple(nxt[i, 0]) for i in keep]
            ids = [ids[i] for i in keep]
            cnt = [cnt[i] + 1 for i in keep]
            if self.reject_with_f and len(cur) >= 15:
                _, m = cv2.findFundamentalMat(np.array(pp, np.float32), np.array(cur, np.float32),
                                              cv2.FM_RANSAC, 1.0, 0.99)
                m = m.ravel()
                cur = [p for p, k in zip(cur, m) if k]
                ids = [p for p, k in zip(ids, m) if k]
                cnt = [p for p, k in zip(cnt, m) if k]
        order = sorted(range(len(cur)), key=lambda i: -cnt[i])
        mask = np.full(img.shape, 255, np.uint8)
        kc, ki, kn = [], [], []
        for i in order:
            x, y = cur[i]
            rx, ry = int(np.rint(x)), int(np.rint(y))
            if mask[ry, rx] == 255:
                kc.append(cur[i]); ki.append(ids[i]); kn.append(cnt[i])
                cv2.circle(mask, (rx, ry), self.min_dist, 0, -1)
        cur, ids, cnt = kc, ki, kn
        want = self.max_cnt - len(cur)
        if want > 0:
            n = cv2.goodFeaturesToTrack(img, want, 0.01, self.min_dist, mask=mask)
            for p in ([] if n is None else n.reshape(-1, 2)):
                cur.append((f32(p[0]), f32(p[1]))); ids.append(self.n_id); cnt.append(1)
                self.n_id += 1
        self.prev, self.prev_pts, self.ids, self.cnt = img, list(cur), ids, cnt
        return list(zip(ids, cur, cnt))

    def track_right(self, right):
        """VINS-Fusion's stereo step after track(): the frame's points found in the right
        image (maxLevel 3, no initial flow), checked back the same way (within 0.5 px and
        inside the right image's border); returns the right (id, (x, y), count)."""
        f32 = np.float32
        if not self.prev_pts:
            return []
        h, w = right.shape
        P = np.array(self.prev_pts, np.float32).reshape(-1, 1, 2)
        rp, st, _ = cv2.calcOpticalFlowPyrLK(self.prev, right, P, None, winSize=(21, 21), maxLevel=3)
        rev, rst, _ = cv2.calcOpticalFlowPyrLK(right, self.prev, rp, None, winSize=(21, 21), maxLevel=3)
        out = []
        for i in range(len(self.prev_pts)):
            a, b = P[i, 0], rev[i, 0]
            dx, dy = f32(a[0] - b[0]), f32(a[1] - b[1])
            d = np.sqrt(float(f32(dx * dx + dy * dy)))
            x, y = rp[i, 0]
            rx, ry = int(np.rint(x)), int(np.rint(y))
            if st[i, 0] and rst[i, 0] and 1 <= rx < w - 1 and 1 <= ry < h - 1 and d <= 0.5:
                out.append((self.ids[i], (f32(x), f32(y)), self.cnt[i]))
        return out


def vins_reference(seq, max_cnt=150, min_dist=30, reject_with_f=False):
    fe = VinsFrontEnd(max_cnt, min_dist, reject_with_f)
    out = []
    for name, img in seq:
        tr = fe.track(img)
        out.append({"frame": name, "tracks": [[i, f32bits(x), f32bits(y), c] for i, (x, y), c in tr]})
    return out


STEREO_DISPARITY = 8


def stereo_pair(img):
    w = img.shape[1]
    d = STEREO_DISPARITY
    return np.ascontiguousarray(img[:, :w - d]), np.ascontiguousarray(img[:, d:])


def vins_stereo_reference(seq, max_cnt=150, min_dist=30):
    fe = VinsFrontEnd(max_cnt, min_dist)
    out = []
    for name, img in seq:
        left, right = stereo_pair(img)
        lt = fe.track(left)
        rt = fe.track_right(right)
        out.append({"frame": name,
                    "left": [[i, f32bits(x), f32bits(y), c] for i, (x, y), c in lt],
                    "right": [[i, f32bits(x), f32bits(y), c] for i, (x, y), c in rt]})
    return out


def write(name, obj):
    meta = {"opencv": cv2.__version__}
    with open(os.path.join(OUT, f"{name}.json"), "w") as f:
        json.dump({"meta": meta, "cases": obj}, f, separators=(",", ":"))


def main():
    os.makedirs(OUT, exist_ok=True)
    seq = frames()
    if not seq:
        sys.exit("no frames in tests/data/seq")
    write("stereo", vins_stereo_reference(seq))
    if "--stereo-only" in sys.argv[1:]:
        print("wrote", os.path.join(OUT, "stereo.json"))
        return
    rng = np.random.default_rng(20261126)

    pyr = []
    for name, img in seq:
        n, levels = cv2.buildOpticalFlowPyramid(img, (21, 21), 3, withDerivatives=False)
        pyr.append({
            "frame": name,
            "levels": [{"width": int(l.shape[1]), "height": int(l.shape[0]),
                        "crc32": zlib.crc32(np.ascontiguousarray(l).tobytes())}
                       for l in levels],
        })

    gftt = []
    corners = {}
    for name, img in seq:
        c = cv2.goodFeaturesToTrack(img, 150, 0.01, 30)
        c = [] if c is None else c.reshape(-1, 2).tolist()
        corners[name] = c
        # VINS's mask: circles around "tracked" points (here every third corner, moved a
        # little so the circles do not sit on the maxima).
        keep = [(x + 3.4, y - 2.6) for x, y in c[::3]]
        m = vins_mask(img.shape, keep)
        cm = cv2.goodFeaturesToTrack(img, 150 - len(keep), 0.01, 30, mask=m)
        cm = [] if cm is None else cm.reshape(-1, 2).tolist()
        eig = cv2.cornerMinEigenVal(img, 3, 3)
        gftt.append({"frame": name, "eig_crc32": zlib.crc32(np.ascontiguousarray(eig, np.float32).tobytes()),
                     "corners": c, "mask_points": keep, "masked_corners": cm,
                     "mask_crc32": zlib.crc32(m.tobytes())})

    lk = []
    for (n0, a), (n1, b) in zip(seq, seq[1:]):
        h, w = a.shape
        extra = np.column_stack([rng.uniform(-8, w + 8, 60), rng.uniform(-8, h + 8, 60)])
        pts = np.array(corners[n0] + extra.tolist(), np.float32).reshape(-1, 1, 2)
        nxt, st, err = cv2.calcOpticalFlowPyrLK(a, b, pts, None, winSize=(21, 21), maxLevel=3)
        rev = pts.copy()
        rev, rst, rerr = cv2.calcOpticalFlowPyrLK(
            b, a, nxt, rev, winSize=(21, 21), maxLevel=1,
            criteria=(cv2.TERM_CRITERIA_COUNT + cv2.TERM_CRITERIA_EPS, 30, 0.01),
            flags=cv2.OPTFLOW_USE_INITIAL_FLOW)
        ok = st.ravel() == 1
        p0, p1 = pts.reshape(-1, 2)[ok], nxt.reshape(-1, 2)[ok]
        F, fmask = cv2.findFundamentalMat(p0, p1, cv2.FM_RANSAC, 1.0, 0.99)
        fmask = [] if fmask is None else fmask.ravel().astype(int).tolist()
        lk.append({
            "fundamental_mask": fmask,
            "prev": n0, "next": n1,
            "points": [[f32bits(x), f32bits(y)] for x, y in pts.reshape(-1, 2)],
            # OpenCV leaves err unset for some lost points (whatever the buffer held): 0 there.
            "forward": [[f32bits(x), f32bits(y), int(s), f32bits(e) if s else 0]
                        for (x, y), s, e in zip(nxt.reshape(-1, 2), st.ravel(), err.ravel())],
            "reverse": [[f32bits(x), f32bits(y), int(s)]
                        for (x, y), s in zip(rev.reshape(-1, 2), rst.ravel())],
        })

    und = []
    grid = np.array([[x, y] for y in range(0, 481, 40) for x in range(0, 753, 47)], np.float64)
    K = np.array([[458.654, 0, 367.215], [0, 457.296, 248.375], [0, 0, 1]])
    for model, D in [("plumb_bob", [-0.28340811, 0.07395907, 0.00019359, 1.76187114e-05, 0.0]),
                     ("rational_polynomial", [-0.28, 0.074, 0.0002, 1.8e-05, 0.01, 0.02, -0.003, 0.004])]:
        r = cv2.undistortPoints(grid.reshape(-1, 1, 2), K, np.array(D)).reshape(-1, 2)
        und.append({"model": model, "K": [f64bits(v) for v in K.ravel()], "D": [f64bits(v) for v in D],
                    "pixels": grid.tolist(), "normalized": [[f64bits(x), f64bits(y)] for x, y in r]})
    Kf = np.array([[190.978, 0, 254.932], [0, 190.973, 256.897], [0, 0, 1]])
    Df = [0.00348238, 0.000715034, -0.00205323, 0.000202936]
    gf = np.array([[x, y] for y in range(10, 512, 50) for x in range(10, 512, 50)], np.float64)
    r = cv2.fisheye.undistortPoints(gf.reshape(-1, 1, 2), Kf, np.array(Df)).reshape(-1, 2)
    und.append({"model": "equidistant", "K": [f64bits(v) for v in Kf.ravel()], "D": [f64bits(v) for v in Df],
                "pixels": gf.tolist(), "normalized": [[f64bits(x), f64bits(y)] for x, y in r]})

    vins = vins_reference(seq)

    meta = {"opencv": cv2.__version__}
    for name, obj in [("pyramid", pyr), ("gftt", gftt), ("lk", lk), ("undistort", und), ("vins", vins)]:
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump({"meta": meta, "cases": obj}, f, separators=(",", ":"))
    print("wrote", OUT, {k: len(v) for k, v in [("pyramid", pyr), ("gftt", gftt), ("lk", lk)]})


if __name__ == "__main__":
    main()
