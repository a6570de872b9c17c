#!/usr/bin/env python3
"""ORB-SLAM3's own extractor against gpu_features, keypoint for keypoint and byte for byte.

Runs scripts/orb-slam3 `extractor_harness` (ORB-SLAM3 v1.0's ORBextractor.cc, linked) and
`gpu_features detect --config config/orb_slam3.yaml` on the same images, for the regular
extractor (nFeatures) and the initialisation one (5 x nFeatures), and compares every field
(x, y, size, angle, response, octave as f32 bits), the order and every descriptor byte.

gpu_features returns a level's keypoints in ORB-SLAM3's node order, levels in turn (what
`ComputeKeyPointsOctTree` leaves); `operator()` then permutes them by the lapping area its
caller passes (`Frame::ExtractORB`: {0, 1000} monocular, {0, 0} stereo): keypoints with x in
the area go to the back in reverse. The adapter (scripts/orb-slam3/gf_features.cc) applies
that same rule; so does `lapping_order` here, and both areas are checked.

  extractor_parity.py --harness H --gpu-features BIN [--backend cpu|cuda] [--features 1000]
                      [--set KEY=VALUE]... [--json OUT] IMAGE...
Exit status 1 on any difference; prints one line per image and extractor, and totals.
"""
import argparse
import csv
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def f32(s):
    return struct.unpack("<I", struct.pack("<f", float(s)))[0]


def lapping_order(rows, x0, x1):
    """ORBextractor::operator()'s output order from the level/node order (monoIndex from the
    front, stereoIndex from the back)."""
    out = [None] * len(rows)
    mono, stereo = 0, len(rows) - 1
    for r in rows:
        x = struct.unpack("<f", struct.pack("<I", r[0]))[0]
        if x0 <= x <= x1:
            out[stereo] = r
            stereo -= 1
        else:
            out[mono] = r
            mono += 1
    return out


def ours(binary, backend, features, sets, images, tmp):
    out = Path(tmp) / f"ours_{features}"
    cmd = [binary, "detect", "--config", str(ROOT / "config/orb_slam3.yaml"), "--backend", backend,
           "--set", f"select.max_keypoints={features}"]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--out", str(out)] + [str(i) for i in images]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    res = {}
    for img in images:
        rows = []
        with open(out / f"{Path(img).stem}.keypoints.csv") as f:
            for r in csv.DictReader(f):
                rows.append((f32(r["x"]), f32(r["y"]), f32(r["size"]), f32(r["angle"]),
                             f32(r["response"]), int(r["octave"]), r["descriptor"]))
        res[str(img)] = rows
    return res


def theirs(harness, features, x0, x1, images, repeats):
    cmd = [harness, str(features), "1.2", "8", "20", "7", str(x0), str(x1), str(repeats)] + \
        [str(i) for i in images]
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res = {str(i): [] for i in images}
    for r in csv.DictReader(p.stdout.splitlines()):
        res[r["image"]].append((f32(r["x"]), f32(r["y"]), f32(r["size"]), f32(r["angle"]),
                                f32(r["response"]), int(r["octave"]), r["descriptor"]))
    times = {}
    for line in p.stderr.splitlines():
        if line.startswith("time,"):
            _, img, ms, _mono = line.split(",")
            times[img] = float(ms)
    return res, times


def compare(a, b):
    """(same keypoints and order, keypoints differing, descriptors differing, bits differing)."""
    kp_diff = desc_diff = bits = 0
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b) or a[i][:6] != b[i][:6]:
            kp_diff += 1
            continue
        if a[i][6] != b[i][6]:
            desc_diff += 1
            bits += bin(int(a[i][6], 16) ^ int(b[i][6], 16)).count("1")
    return kp_diff, desc_diff, bits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", required=True)
    ap.add_argument("--gpu-features", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for gpu_features "
                    "(describe.fma=true against a harness built with FMA)")
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    failed = False
    summary = {"backend": a.backend, "images": len(a.images), "extractors": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (a.features, 5 * a.features):
            mine = ours(a.gpu_features, a.backend, n, a.set, a.images, tmp)
            for x0, x1 in ((0, 1000), (0, 0)):
                ref, times = theirs(a.harness, n, x0, x1, a.images, a.repeats)
                tot = {"features": n, "lapping": [x0, x1], "keypoints": 0, "keypoints_differing": 0,
                       "descriptors_differing": 0, "bits_differing": 0, "orb_slam3_ms": times}
                for img in a.images:
                    got = lapping_order(mine[str(img)], x0, x1)
                    want = ref[str(img)]
                    kd, dd, bits = compare(got, want)
                    tot["keypoints"] += len(want)
                    tot["keypoints_differing"] += kd
                    tot["descriptors_differing"] += dd
                    tot["bits_differing"] += bits
                    if kd or dd or len(got) != len(want):
                        failed = True
                    print(f"{Path(img).name} n={n} lapping={x0},{x1}: {len(want)} keypoints "
                          f"(ours {len(got)}), {kd} differ, {dd} descriptors differ ({bits} bits)")
                summary["extractors"].append(tot)
                print(f"== n={n} lapping={x0},{x1}: {tot['keypoints']} keypoints, "
                      f"{tot['keypoints_differing']} differ, {tot['descriptors_differing']} "
                      f"descriptors differ ({tot['bits_differing']} bits)")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
