#!/usr/bin/env python3
"""Our tracker against the real VINS-Fusion FeatureTracker, frame for frame.

Runs VINS-Fusion's own FeatureTracker (scripts/vins/track_harness.cpp, linked against the
library ../shared/vins-fusion/setup.sh builds, on Debian's OpenCV) on the frames of an image
topic of a rosbag2, and `gpu_features replay --vins-config` on the same bag, then compares
every frame's features: the same ids, the same pixels, the same normalised points and
velocities, bit for bit (each is the f32 VINS holds). Writes OUT/parity.json and prints a
summary; exits 1 when a frame differs (unless --report-only).

  scripts/vins_parity.py --bag DIR --vins-config FILE --out DIR \\
      --gpu-features target/release/gpu_features --harness target/vins-harness/track_harness
  (--images tests/data/seq/*.png instead of --bag: a real sequence)

With a stereo config (num_of_cam 2) both image topics go to both trackers (the harness
calls trackImage with the pair) and both cameras' features are compared.

With --mono (and --harness the VINS-Mono harness, scripts/setup-vins-mono.sh) the check is
against VINS-Mono's feature_tracker instead: a VINS-Mono config is made from the one-camera
VINS-Fusion config (its camera, max_cnt, min_dist; --freq, --equalize, F_threshold 1) and
given to both, and the `feature` messages VINS-Mono's node would send are compared, message
for message (the replay then runs track.frontend: vins_mono from that config).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vins_tools as vt  # noqa: E402


def extract_frames(bag, topic, out_dir, max_frames=None):
    """PGMs of the topic's mono8 frames and the harness's index (stamp path)."""
    from PIL import Image
    ts = vt.typestore2()
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (_, _, msgtype, raw) in enumerate(vt.read_bag(bag, {topic})):
        if max_frames is not None and i >= max_frames:
            break
        m = ts.deserialize_cdr(raw, msgtype)
        if m.encoding != "mono8":
            raise SystemExit(f"{topic}: {m.encoding} frames; the parity check takes mono8")
        px = np.frombuffer(bytes(m.data), dtype=np.uint8).reshape(m.height, m.step)[:, :m.width]
        p = out_dir / f"{i:05d}.pgm"
        Image.fromarray(px).save(p)
        lines.append(f"{m.header.stamp.sec + m.header.stamp.nanosec * 1e-9:.9f} {p}")
    (out_dir / "index.txt").write_text("\n".join(lines) + "\n")
    return out_dir / "index.txt", len(lines)


def images_bag(paths, topic, fps, out):
    """A rosbag2 of the images as mono8 frames on `topic`, stamped at `fps`."""
    from PIL import Image
    ts = vt.typestore2()
    T = ts.types
    items = []
    t0 = 1_700_000_000 * 10**9
    for i, p in enumerate(sorted(paths)):
        px = np.asarray(Image.open(p).convert("L"), dtype=np.uint8)
        ns = t0 + int(round(i * 1e9 / fps))
        hdr = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
                                       frame_id="cam0")
        msg = T["sensor_msgs/msg/Image"](header=hdr, height=px.shape[0], width=px.shape[1], encoding="mono8",
                                         is_bigendian=0, step=px.shape[1], data=px.reshape(-1))
        items.append((topic, "sensor_msgs/msg/Image", ns, ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
    vt.write_rosbag2(out, items, ts)
    return out


def harness_index(bag, topics, out_dir, max_frames=None):
    """The harness's index of the frames of `topics` (one, or a stereo pair: each line the
    first camera's frame and its partner of the same stamp) under out_dir/frames*."""
    index, n = extract_frames(bag, topics[0], out_dir / "frames", max_frames)
    if len(topics) == 1:
        return index, n
    index1, n1 = extract_frames(bag, topics[1], out_dir / "frames1", max_frames)
    left, right = index.read_text().splitlines(), index1.read_text().splitlines()
    if n1 != n or any(abs(float(x.split()[0]) - float(y.split()[0])) > 0.003 for x, y in zip(left, right)):
        raise SystemExit(f"{bag}: the two cameras' frames do not pair one to one by stamp")
    index = out_dir / "frames" / "index_stereo.txt"
    index.write_text("".join(f"{x} {y.split()[1]}\n" for x, y in zip(left, right)))
    return index, n


def parse_harness(text, camera=0):
    frames, cur = [], None
    for line in text.splitlines():
        f = line.split()
        if f[0] == "F":
            cur = {"stamp": float(f[2]), "ms": float(f[3]), "points": {}}
            frames.append(cur)
        elif f[0] == "P" and int(f[2]) == camera:
            cur["points"][int(f[1])] = tuple(np.float32(v) for v in f[3:10])
    return frames


def compare(vins, ours):
    """Per frame: ids equal, and for the common ids every value's f32 bits."""
    rows = []
    for i, v in enumerate(vins):
        o = ours.get(i)
        if o is None:
            rows.append({"frame": i, "ours": None, "vins": len(v["points"])})
            continue
        ids_v, ids_o = set(v["points"]), set(o)
        common = ids_v & ids_o
        diff = {"pixel": 0, "normalised": 0, "velocity": 0}
        worst = 0.0
        for k in common:
            a, b = v["points"][k], o[k]
            if a[3:5] != b[3:5]:
                diff["pixel"] += 1
            if a[0:3] != b[0:3]:
                diff["normalised"] += 1
                worst = max(worst, float(max(abs(a[0] - b[0]), abs(a[1] - b[1]))))
            if a[5:7] != b[5:7]:
                diff["velocity"] += 1
        rows.append({"frame": i, "vins": len(ids_v), "ours": len(ids_o), "common": len(common),
                     "only_vins": len(ids_v - ids_o), "only_ours": len(ids_o - ids_v),
                     **diff, "worst_normalised": worst})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bag", type=Path, help="rosbag2 with the config's image0_topic (mono8)")
    ap.add_argument("--images", nargs="+", type=Path,
                    help="instead of --bag: 8-bit images (a real sequence, e.g. tests/data/seq/*.png), "
                         "put into a bag at --fps on the config's image0_topic")
    ap.add_argument("--fps", type=float, default=20.0)
    ap.add_argument("--vins-config", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--gpu-features", required=True, type=Path)
    ap.add_argument("--harness", required=True, type=Path)
    ap.add_argument("--topic", help="image topic (default: the config's image0_topic)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--max-frames", type=int)
    ap.add_argument("--set", action="append", default=[], help="extra replay --set KEY=VALUE")
    ap.add_argument("--report-only", action="store_true", help="exit 0 even when frames differ")
    ap.add_argument("--mono", action="store_true", help="against VINS-Mono's feature_tracker (see above)")
    ap.add_argument("--freq", type=int, default=10, help="--mono: VINS-Mono's freq")
    ap.add_argument("--equalize", type=int, default=1, help="--mono: VINS-Mono's equalize (0 or 1)")
    ap.add_argument("--f-threshold", type=float, default=1.0, help="--mono: VINS-Mono's F_threshold")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.mono:
        a.vins_config = vt.mono_config(a.vins_config, a.out / "mono" / "mono_config.yaml", a.freq, a.equalize,
                                       a.f_threshold)
    cfg = vt.read_opencv_yaml(a.vins_config)
    topic = a.topic or cfg.get("image0_topic") or cfg["image_topic"]
    if a.images:
        a.bag = images_bag(a.images, topic, a.fps, a.out / "images_bag")
    elif a.bag is None:
        raise SystemExit("give --bag or --images")
    stereo = int(cfg.get("num_of_cam", 1)) == 2
    topics = [topic, cfg["image1_topic"]] if stereo else [topic]
    index, n = harness_index(a.bag, topics, a.out, a.max_frames)
    copy = (a.vins_config if a.mono else
            vt.config_copy(a.vins_config, a.out / "vins", {"output_path": str((a.out / "vins").resolve()) + "/"}))
    res = subprocess.run([str(a.harness), str(copy), str(index)], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"harness failed ({res.returncode}): {res.stderr[-2000:]}")
    (a.out / "vins_tracker.txt").write_text(res.stdout)
    cmd = [str(a.gpu_features), "replay", str(a.bag), "--out", str(a.out / "replay"), "--vins-config",
           str(a.vins_config), "--backend", a.backend, "--no-progress",
           # Every frame's features (the harness prints every trackImage result), whatever
           # rate the config's multiple_thread gives the feature messages.
           "--set", "track.feature_every=1"]
    for t in topics:
        cmd += ["--topic", t]
    for s in a.set:
        cmd += ["--set", s]
    if a.max_frames:
        cmd += ["--max-frames", str(a.max_frames * len(topics))]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    feature = [raw for _, _, _, raw in vt.read_bag(a.out / "replay" / "out.mcap", {topic.rstrip("/") + "/feature"})]
    rows, bad, points, vins_by_cam = {}, [], 0, {}
    for cam in range(len(topics)):
        vins_by_cam[cam] = parse_harness(res.stdout, cam)
        parsed = [vt.feature_points(raw, camera=cam) for raw in feature]
        ours = {i: pts for i, (_, pts) in enumerate(parsed)}
        if cam == 0:
            stamps = [st for st, _ in parsed]
        rows[cam] = compare(vins_by_cam[cam], ours)
        bad += [dict(r, camera=cam) for r in rows[cam] if r.get("ours") is None or r["only_vins"] or r["only_ours"]
                or r["pixel"] or r["normalised"] or r["velocity"]]
        points += int(sum(r.get("vins", 0) for r in rows[cam]))
    vins = vins_by_cam[0]
    if len(feature) != len(vins):
        bad.append({"frame": min(len(feature), len(vins)), "messages_ours": len(feature), "messages_vins": len(vins)})
    for i, (v, st) in enumerate(zip(vins, stamps)):
        if abs(v["stamp"] - st) > 1e-6:
            bad.append({"frame": i, "stamp_vins": v["stamp"], "stamp_ours": st})
            break
    bad_frames = sorted({r["frame"] for r in bad})
    first = bad_frames[0] if bad_frames else None
    summary = {"frames": n, "frames_equal": n - len(bad_frames), "first_difference": first, "points": points,
               "cameras": len(topics),
               "vins_tracker_ms_median": float(np.median([f["ms"] for f in vins])) if vins else None,
               "backend": a.backend, "topic": topic, "set": a.set, "rows": rows[0],
               **({"rows_camera1": rows[1]} if stereo else {})}
    (a.out / "parity.json").write_text(json.dumps(summary, indent=1))
    who = "VINS-Mono's feature_tracker (messages)" if a.mono else "VINS-Fusion's FeatureTracker"
    m = len(vins)
    summary.update(messages=m, messages_ours=len(feature), mono=a.mono)
    (a.out / "parity.json").write_text(json.dumps(summary, indent=1))
    print(f"parity: {m - len(bad_frames)} of {m} {'messages' if a.mono else 'frames'} identical to {who} "
          f"({points} features, {len(topics)} camera(s), {n} frames); first difference: {first}")
    if bad:
        print("  first difference:", json.dumps(bad[0]))
    sys.exit(0 if (not bad or a.report_only) else 1)


if __name__ == "__main__":
    main()
