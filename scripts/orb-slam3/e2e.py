#!/usr/bin/env python3
"""The real ORB-SLAM3 v1.0 on one sequence: on its own ORBextractor, and fed only by
gpu_features' keypoints; both scored against the ground truth with evo.

  (a) "own":          ORB-SLAM3 as built, its extractor on the bag's images;
  (b) "gpu_features": `gpu_features replay --config config/orb_slam3.yaml` (the settings
                      file's extractor: nFeatures, scaleFactor, nLevels, thresholds; its init
                      extractor's 5 x nFeatures in a second pass) writes the `keypoints`
                      clouds exactly as the node publishes them; they are handed to ORB-SLAM3
                      unchanged (clouds_to_gfkp.py) and its Frame::ExtractORB takes them
                      (gf_features.so, LD_PRELOAD) instead of extracting.

Each side runs --repeats times (ORB-SLAM3 is multi-threaded: its runs differ), paced at the
sequence's rate times --pace by run_sequence (scripts/orb-slam3/run_sequence.cpp), or with
--pace 0 in lockstep (each frame handed once local mapping and loop closing are idle: the
runs then depend on the input, not on the machine's speed), which logs the tracking state per
frame. Scored with evo: ATE RMSE after SE(3) alignment with an IMU, Sim(3) for
monocular (camera poses against the ground truth moved to the camera by IMU.T_b_c1 when the
settings have it); time to initialisation; lost frames and map resets from the states; the
share of frames with a pose; and the extraction time per frame (ORB-SLAM3's extractor timed
by extractor_harness on the same frames; ours from the replay's report). Writes
OUT/summary.json (the VINS end-to-end's keys, plus lost_frames, map_resets, extract_ms) and
OUT/summary.md.

Called by scripts/vio-e2e.sh --estimator orb-slam3, which sets up ORB-SLAM3, our programs
and the vocabulary (scripts/setup-orb-slam3.sh) and builds gpu_features.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import vins_tools as vt  # noqa: E402
from clouds_to_gfkp import convert  # noqa: E402
from vio_e2e import fmt, median_spread  # noqa: E402

DIVERGED_M = 1.0  # an ATE RMSE above this (or no trajectory) counts as divergence
# Tracking::eTrackingState
NO_IMAGES_YET, NOT_INITIALIZED, OK, RECENTLY_LOST, LOST, OK_KLT = 0, 1, 2, 3, 4, 5
MODES = {"mono": (1, False), "mono-inertial": (1, True), "stereo": (2, False), "stereo-inertial": (2, True)}


def read_settings(path):
    """ORB-SLAM3 settings: the scalar keys (dotted names: vins_tools.read_opencv_yaml) and
    the 4x4 `!!opencv-matrix` ones as arrays."""
    out = vt.read_opencv_yaml(path)
    text = Path(path).read_text()
    for m in re.finditer(r'^([A-Za-z_][\w.]*):\s*!!opencv-matrix', text, re.M):
        data = re.search(r'data:\s*\[([^\]]*)\]', text[m.end():])
        out[m.group(1)] = np.array([float(x) for x in data.group(1).replace("\n", " ").split(",")]).reshape(4, 4)
    return out


def check_settings(s, path, mode):
    if str(s.get("File.version")) != "1.0":
        raise SystemExit(f"{path}: File.version is not \"1.0\" (ORB-SLAM3 v1.0 settings needed)")
    cam = s.get("Camera.type")
    if cam not in ("PinHole", "KannalaBrandt8"):
        raise SystemExit(f"{path}: Camera.type {cam!r}: PinHole or KannalaBrandt8 expected")
    if "Camera.newWidth" in s or "Camera.newHeight" in s:
        raise SystemExit(f"{path}: Camera.newWidth/newHeight make ORB-SLAM3 resize the images before "
                         "extracting, so features from the bag's images would not fit; remove them "
                         "(both sides then run on the full images)")
    ncam, inertial = MODES[mode]
    if inertial and "IMU.T_b_c1" not in s:
        raise SystemExit(f"{path}: {mode} needs IMU.T_b_c1")
    for k in ("ORBextractor.nFeatures", "ORBextractor.scaleFactor", "ORBextractor.nLevels",
              "ORBextractor.iniThFAST", "ORBextractor.minThFAST"):
        if k not in s:
            raise SystemExit(f"{path}: no {k}")


def to_sequence(bag, topics, imu_topic, seq):
    """The bag's images as PNG files + frames.csv (t_ns, cam0[, cam1]) and imu.csv, the
    layout run_sequence reads. Stereo frames are paired by stamp."""
    from PIL import Image
    ts = vt.typestore2()
    shutil.rmtree(seq, ignore_errors=True)
    per_cam = [dict() for _ in topics]
    imu = []
    wanted = set(topics) | ({imu_topic} if imu_topic else set())
    for topic, _, mt, raw in vt.read_bag(bag, wanted):
        m = ts.deserialize_cdr(raw, mt)
        t = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
        if topic == imu_topic:
            w, a = m.angular_velocity, m.linear_acceleration
            imu.append((t, w.x, w.y, w.z, a.x, a.y, a.z))
            continue
        c = topics.index(topic)
        if m.encoding not in ("mono8", "8UC1"):
            raise SystemExit(f"{topic}: encoding {m.encoding}: mono8 images expected")
        d = seq / f"cam{c}"
        d.mkdir(parents=True, exist_ok=True)
        img = np.frombuffer(bytes(m.data), np.uint8).reshape(m.height, m.step)[:, : m.width]
        Image.fromarray(img).save(d / f"{t}.png")
        per_cam[c][t] = f"cam{c}/{t}.png"
    stamps = sorted(set.intersection(*(set(p) for p in per_cam)))
    if not stamps:
        raise SystemExit(f"{bag}: no images on {topics}")
    with open(seq / "frames.csv", "w") as f:
        for t in stamps:
            f.write(",".join([str(t)] + [p[t] for p in per_cam]) + "\n")
    imu.sort()
    with open(seq / "imu.csv", "w") as f:
        for r in imu:
            f.write(",".join([str(r[0])] + [repr(v) for v in r[1:]]) + "\n")
    return stamps, len(imu)


def rectified_bag(tools, settings, seq, topics, dst):
    """PinHole stereo: ORB-SLAM3 extracts from the pairs it rectified itself, so our replay
    gets those pixels: rectify_stereo (ORB-SLAM3's Settings maps and remap) into a folder,
    then a bag of them with the original stamps and topics."""
    from PIL import Image
    rect = dst.parent / "sequence_rectified"
    subprocess.run([str(tools / "rectify_stereo"), str(settings), str(seq), str(rect)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ts = vt.typestore2()
    T = ts.types
    Image_, Header, Time = T["sensor_msgs/msg/Image"], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    items = []
    for line in (rect / "frames.csv").read_text().splitlines():
        t, *paths = line.split(",")
        t = int(t)
        for c, p in enumerate(paths):
            px = np.asarray(Image.open(rect / p))
            msg = Image_(header=Header(stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id=f"cam{c}"),
                         height=px.shape[0], width=px.shape[1], encoding="mono8", is_bigendian=0,
                         step=px.shape[1], data=px.reshape(-1))
            items.append((topics[c], Image_.__msgtype__, t, ts.serialize_cdr(msg, Image_.__msgtype__)))
    vt.write_rosbag2(dst, items, ts)
    return dst


def run_orb_slam3(tools, vocabulary, settings, mode, seq, run_dir, features_dir, log, pace, check=False):
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if features_dir is not None:
        env["LD_PRELOAD"] = str(tools / "gf_features.so")
        env["GF_FEATURES_DIR"] = str(features_dir)
        env["GF_FEATURES_STATS"] = str(run_dir / "adapter.json")
        if check:
            env["GF_FEATURES_CHECK"] = "1"
    t0 = time.time()
    p = subprocess.run([str(tools / "run_sequence"), str(vocabulary), str(settings), mode, str(seq), str(run_dir),
                        str(pace)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (run_dir / "orb_slam3.log").write_text(p.stdout)
    log.write(p.stdout[-4000:])
    if p.returncode != 0:
        return None, time.time() - t0, p.returncode
    return run_dir, time.time() - t0, 0


def states_of(run_dir):
    rows = []
    for line in (run_dir / "states.csv").read_text().splitlines()[1:]:
        t, s, ms = line.split(",")
        rows.append((int(t), int(s), float(ms)))
    return rows


def score(run_dir, gt_file, stamps, inertial, t_bc, tmp):
    """ATE (evo; SE(3) with an IMU, Sim(3) without), init, lost frames, map resets."""
    from evo.core import metrics, sync
    from evo.tools import file_interface
    states = states_of(run_dir)
    first_ok = next((t for t, s, _ in states if s in (OK, OK_KLT)), None)
    res = {"frames": len(states), "init_s": (first_ok - stamps[0]) * 1e-9 if first_ok else None}
    lost = resets = 0
    started = False
    for _, s, _ in states:
        if s in (OK, OK_KLT):
            started = True
        elif started and s in (RECENTLY_LOST, LOST):
            lost += 1
        elif started and s in (NO_IMAGES_YET, NOT_INITIALIZED):
            resets += 1
            started = False
    res["lost_frames"] = lost
    res["map_resets"] = resets
    res["track_ms"] = statistics.median(ms for _, _, ms in states) if states else None
    traj = run_dir / "trajectory.txt"
    rows = []
    if traj.exists():
        for line in traj.read_text().splitlines():
            f = line.split()
            if len(f) == 8:
                rows.append([float(v) for v in f])
    res["poses"] = len(rows)
    res["frames_with_pose"] = len(rows) / len(stamps) if stamps else 0.0
    if len(rows) < 3:
        res.update(ate_rmse_m=None, diverged=True)
        return res
    est_file, ref_file = tmp / "estimate.tum", tmp / "reference.tum"
    with open(est_file, "w") as f:
        for r in rows:
            f.write(f"{r[0] * 1e-9:.9f} {r[1]} {r[2]} {r[3]} {r[4]} {r[5]} {r[6]} {r[7]}\n")
    ref = file_interface.read_tum_trajectory_file(str(gt_file))
    if not inertial and t_bc is not None:
        ref.transform(t_bc, right_mul=True)  # body poses -> camera poses
    est = file_interface.read_tum_trajectory_file(str(est_file))
    ref, est = sync.associate_trajectories(ref, est, max_diff=0.003)
    est.align(ref, correct_scale=not inertial)
    ape = metrics.APE(metrics.PoseRelation.translation_part)
    ape.process_data((ref, est))
    ate = float(ape.get_statistic(metrics.StatisticsType.rmse))
    res.update(ate_rmse_m=ate, diverged=bool(ate > DIVERGED_M or not np.isfinite(ate)))
    return res


def extract_ms_own(tools, settings, seq, frames, n):
    """ORB-SLAM3's extractor per frame (extractor_harness: its ORBextractor.cc as ORB-SLAM3
    compiles it), median over the first n frames' medians of 3 calls."""
    imgs = [str(seq / f) for f in frames[:n]]
    cmd = [str(tools / "extractor_harness"), str(settings["ORBextractor.nFeatures"]),
           str(settings["ORBextractor.scaleFactor"]), str(settings["ORBextractor.nLevels"]),
           str(settings["ORBextractor.iniThFAST"]), str(settings["ORBextractor.minThFAST"]), "0", "1000", "3"] + imgs
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    ms = [float(line.split(",")[2]) for line in p.stderr.splitlines() if line.startswith("time,")]
    return statistics.median(ms) if ms else None


def frame_ms(report_json):
    """The replay's median time per frame (ms), from its report.json."""
    try:
        r = json.loads(Path(report_json).read_text())
    except (OSError, ValueError):
        return None

    def find(v):
        if isinstance(v, dict):
            lat = v.get("latency_ms")
            if isinstance(lat, dict) and isinstance(lat.get("frame"), dict):
                return lat["frame"].get("p50")
            for x in v.values():
                got = find(x)
                if got is not None:
                    return got
        return None
    return find(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bag", required=True, type=Path)
    ap.add_argument("--gt", required=True, type=Path, help="body (IMU) trajectory, TUM format")
    ap.add_argument("--orb-settings", required=True, type=Path)
    ap.add_argument("--mode", required=True, choices=sorted(MODES))
    ap.add_argument("--vocabulary", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--image-topic", default="/cam0/image_raw")
    ap.add_argument("--image1-topic", default="/cam1/image_raw")
    ap.add_argument("--imu-topic", default="/imu0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="cpu", help="gpu_features' backend for the replay")
    ap.add_argument("--fma", type=int, default=0, help="1: describe.fma (ORB-SLAM3 built with FMA)")
    ap.add_argument("--only", choices=["own", "gpu_features"])
    ap.add_argument("--check", action="store_true",
                    help="the adapter also runs ORB-SLAM3's extractor on every image it is handed and "
                         "counts frames where ours differ (adapter.json: checked, check_differs)")
    ap.add_argument("--pace", type=float, default=1.0,
                    help="hand frames this many times slower than real time (default 1: real time); "
                         "0: lockstep, each frame once ORB-SLAM3's mapping threads are idle")
    ap.add_argument("--tools", required=True, type=Path)
    ap.add_argument("--gpu-features", required=True, type=Path)
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    s = read_settings(a.orb_settings)
    check_settings(s, a.orb_settings, a.mode)
    ncam, inertial = MODES[a.mode]
    topics = [a.image_topic, a.image1_topic][:ncam]
    have = vt.bag_topics(a.bag)
    for t in topics + ([a.imu_topic] if inertial else []):
        if t not in have:
            raise SystemExit(f"{a.bag}: no topic {t}; the bag has {sorted(have)}")
    seq = out / "sequence"
    stamps, n_imu = to_sequence(a.bag, topics, a.imu_topic if inertial else None, seq)
    frames0 = [f"cam0/{t}.png" for t in stamps]
    log = open(out / "runs.log", "w")

    # gpu_features: the settings' extractor and its init extractor (5x), every camera.
    n = int(s["ORBextractor.nFeatures"])
    feats = out / "features"
    feats.mkdir(exist_ok=True)
    sets = [f"pyramid.scale_factor={s['ORBextractor.scaleFactor']}", f"pyramid.levels={s['ORBextractor.nLevels']}",
            f"detector.fast_threshold={s['ORBextractor.iniThFAST']}",
            f"detector.min_fast_threshold={s['ORBextractor.minThFAST']}", f"describe.fma={'true' if a.fma else 'false'}"]
    replay_ms = []
    t_rep = time.time()
    replay_bag = a.bag
    if ncam == 2 and s.get("Camera.type") == "PinHole":
        replay_bag = rectified_bag(a.tools, a.orb_settings, seq, topics, out / "rectified_bag")
    for budget in ([n, 5 * n] if ncam == 1 else [n]):
        rep = out / f"replay_{budget}"
        cmd = [str(a.gpu_features), "replay", str(replay_bag), "--out", str(rep), "--config",
               str(ROOT / "config/orb_slam3.yaml"), "--backend", a.backend, "--no-progress",
               "--set", f"select.max_keypoints={budget}"]
        for x in sets:
            cmd += ["--set", x]
        for t in topics:
            cmd += ["--topic", t]
        subprocess.run(cmd, check=True, stdout=log, stderr=log)
        replay_ms.append(frame_ms(rep / "report.json"))
        for c, t in enumerate(topics):
            convert(rep / "out.mcap", t.rstrip("/") + "/keypoints", feats / f"cam{c}_{budget}.gfkp")
    replay_wall = time.time() - t_rep

    own_ms = extract_ms_own(a.tools, s, seq, frames0, 40)
    t_bc = s.get("IMU.T_b_c1")
    results = {}
    for name, fdir in (("own", None), ("gpu_features", feats)):
        if a.only and name != a.only:
            continue
        runs = []
        for r in range(a.repeats):
            rd = out / name / f"run{r}"
            shutil.rmtree(rd, ignore_errors=True)
            log.write(f"\n==== {name} run {r} ====\n")
            done, wall, rc = run_orb_slam3(a.tools, a.vocabulary, a.orb_settings, a.mode, seq, rd, fdir, log,
                                           a.pace, a.check)
            if done is None:
                res = {"ate_rmse_m": None, "diverged": True, "crashed": rc, "init_s": None, "lost_frames": None,
                       "map_resets": None, "frames_with_pose": 0.0}
            else:
                res = score(rd, a.gt, stamps, inertial, t_bc, rd)
                res["crashed"] = 0
                if (rd / "adapter.json").exists():
                    res["adapter"] = json.loads((rd / "adapter.json").read_text())
            res["wall_s"] = wall
            runs.append(res)
            print(f"{name} run {r}: ATE {fmt(res['ate_rmse_m'])} m, init {fmt(res['init_s'], 2)} s, "
                  f"lost {res['lost_frames']}, resets {res['map_resets']}, "
                  f"pose for {fmt(res['frames_with_pose'], 3)} of frames", flush=True)
        agg = {}
        for key in ("ate_rmse_m", "init_s", "frames_with_pose", "lost_frames", "map_resets"):
            med, spread = median_spread([r.get(key) for r in runs])
            agg[key] = med
            agg[key.replace("_m", "").replace("_s", "") + "_spread"] = spread
        agg["diverged"] = sum(bool(r["diverged"]) for r in runs)
        agg["runs"] = runs
        agg["extract_ms"] = own_ms if name == "own" else replay_ms[0]
        agg["frontend_ms"] = agg["extract_ms"]
        results[name] = agg
    results["sequence"] = {"bag": str(a.bag), "frames": len(stamps), "imu_samples": n_imu, "mode": a.mode,
                           "settings": str(a.orb_settings), "vocabulary": str(a.vocabulary), "repeats": a.repeats,
                           "backend": a.backend, "fma": a.fma, "pace": a.pace, "check": a.check,
                           "replayed": str(replay_bag), "set": sets, "replay_wall_s": replay_wall,
                           "replay_frame_ms": replay_ms, "own_extract_ms_from": "extractor_harness, 40 frames x 3"}
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    (out / "summary.md").write_text(table(results))
    print(table(results))


def table(res):
    lines = ["| features fed to ORB-SLAM3 | ATE RMSE m (spread) | init s | frames with pose | lost frames | "
             "map resets | diverged runs | extraction ms/frame |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ("own", "gpu_features"):
        r = res.get(name)
        if not r:
            continue
        lines.append(f"| {name} | {fmt(r['ate_rmse_m'])} ({fmt(r.get('ate_rmse_spread'))}) | {fmt(r['init_s'], 2)} | "
                     f"{fmt(r['frames_with_pose'], 3)} | {fmt(r['lost_frames'], 0)} | {fmt(r['map_resets'], 0)} | "
                     f"{r['diverged']} of {len(r['runs'])} | {fmt(r.get('extract_ms'), 2)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
