#!/usr/bin/env python3
"""The real VINS-Fusion, run twice on one sequence, scored against the ground truth.

  (a) "own":          VINS-Fusion tracks the bag's images itself;
  (b) "gpu_features": VINS-Fusion is fed only by our tracker: `gpu_features replay
                      --vins-config` writes the `feature` and `restart` messages exactly as
                      the node publishes them; they go to ROS 1 with the IMU as
                      /feature_tracker/feature and /vins_restart, and VINS's image topics
                      point at a topic nobody publishes.

Each run starts its own roscore (a free port), vins_node with a copy of the config
(output_path into the run's folder, show_track off), plays the ROS 1 bag in real time with
`rosbag play`, stops everything and reads VINS's vio.csv. Scored with evo: ATE RMSE after
SE(3) alignment, RPE (1 s), time to initialisation, share of frames with a pose, divergence,
and the front-end's time per frame (ours: the replay's tracker time; VINS's own: its
FeatureTracker timed by scripts/vins/track_harness.cpp on the same frames, since VINS does
not log it). Writes OUT/summary.json, OUT/summary.md and the runs.

Called by scripts/vio-e2e.sh, which sets up the estimator, the venv and our binary.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vins_tools as vt  # noqa: E402

SYS_PY = "/usr/bin/python3"  # ROS 1's tools want the system interpreter
DIVERGED_M = 1.0  # an ATE RMSE above this (or no pose at all) counts as divergence


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ros1_env(port):
    env = dict(os.environ)
    env["ROS_MASTER_URI"] = f"http://127.0.0.1:{port}"
    env["ROS_HOSTNAME"] = "127.0.0.1"
    env["PATH"] = "/usr/bin:/bin:" + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env["ROS_LOG_DIR"] = env.get("ROS_LOG_DIR", "/tmp/vio-e2e-roslog")
    return env


def to_ros1(src_bag, dst, rosbags_convert, topics):
    """rosbag2 -> ROS 1 bag, headers with seq (the README's conversion)."""
    if dst.exists():
        dst.unlink()
    cmd = [rosbags_convert, "--src", str(src_bag), "--dst", str(dst), "--src-typestore", "ros2_jazzy",
           "--dst-typestore", "ros1_noetic", "--include-topic", *topics]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def run_vins(vins_node, config, bag1, run_dir, duration_s, imu_topic, log):
    """One estimator run on a ROS 1 bag; returns (poses: [(t, x, y, z, qw, qx, qy, qz)], wall)."""
    port = free_port()
    env = ros1_env(port)
    run_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    t0 = time.time()
    try:
        core = subprocess.Popen(["roscore", "-p", str(port)], env=env, stdout=log, stderr=log,
                                start_new_session=True)
        procs.append(core)
        for _ in range(100):
            r = subprocess.run(["rosparam", "list"], env=env, capture_output=True)
            if r.returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("roscore did not start")
        node = subprocess.Popen([str(vins_node), str(config)], env=env, stdout=log, stderr=log,
                                start_new_session=True)
        procs.append(node)
        # Until vins_node subscribes to the IMU (it reads its config and camera files first).
        for _ in range(150):
            r = subprocess.run(["rostopic", "info", imu_topic], env=env, capture_output=True, text=True)
            if "vins" in r.stdout.split("Subscribers:")[-1]:
                break
            time.sleep(0.2)
        time.sleep(0.5)
        subprocess.run(["rosbag", "play", "--quiet", str(bag1)], env=env, stdout=log, stderr=log, check=True,
                       timeout=duration_s * 3 + 60)
        time.sleep(2.0)  # the last windows solved
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    poses = []
    csv = run_dir / "vio.csv"
    if csv.exists():
        for line in csv.read_text().splitlines():
            f = [v for v in line.split(",") if v.strip()]
            if len(f) >= 8:
                poses.append((float(f[0]) * 1e-9, *map(float, f[1:8])))
    return poses, time.time() - t0


def score(poses, gt_file, first_frame_s, frames_fed, out_dir):
    """evo's APE (SE(3) alignment) and RPE (1 s) against the ground truth."""
    from evo.core import metrics, sync
    from evo.core.trajectory import PoseTrajectory3D
    from evo.tools import file_interface
    res = {"poses": len(poses), "frames_fed": frames_fed,
           "frames_with_pose": len(poses) / frames_fed if frames_fed else 0.0,
           "init_s": (poses[0][0] - first_frame_s) if poses else None}
    if len(poses) < 3:
        res.update(ate_rmse_m=None, rpe_m=None, diverged=True)
        return res
    p = np.array(poses)
    est_file = out_dir / "estimate.tum"
    with open(est_file, "w") as f:
        for r in p:  # TUM: t x y z qx qy qz qw
            f.write(f"{r[0]:.9f} {r[1]} {r[2]} {r[3]} {r[5]} {r[6]} {r[7]} {r[4]}\n")
    ref = file_interface.read_tum_trajectory_file(str(gt_file))
    est = file_interface.read_tum_trajectory_file(str(est_file))
    ref, est = sync.associate_trajectories(ref, est, max_diff=0.003)
    est.align(ref, correct_scale=False)
    ape = metrics.APE(metrics.PoseRelation.translation_part)
    ape.process_data((ref, est))
    # RPE over 1 s: as many poses as the estimate has per second.
    rate = 1.0 / float(np.median(np.diff(est.timestamps)))
    rpe = metrics.RPE(metrics.PoseRelation.translation_part, delta=max(1, round(rate)),
                      delta_unit=metrics.Unit.frames, all_pairs=False)
    try:
        rpe.process_data((ref, est))
        rpe_rmse = float(rpe.get_statistic(metrics.StatisticsType.rmse))
    except Exception:  # too short for a 1 s pair
        rpe_rmse = None
    ate = float(ape.get_statistic(metrics.StatisticsType.rmse))
    res.update(ate_rmse_m=ate, rpe_m=rpe_rmse, diverged=bool(ate > DIVERGED_M or not np.isfinite(ate)),
               path_length_m=float(ref.path_length))
    return res


def median_spread(vals):
    v = [x for x in vals if x is not None]
    if not v:
        return None, None
    return statistics.median(v), (max(v) - min(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bag", required=True, type=Path)
    ap.add_argument("--gt", required=True, type=Path)
    ap.add_argument("--vins-config", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--stereo", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vins-node", required=True, type=Path)
    ap.add_argument("--gpu-features", required=True, type=Path)
    ap.add_argument("--rosbags-convert", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--set", action="append", default=[], help="replay --set KEY=VALUE (e.g. an option to compare)")
    ap.add_argument("--only", choices=["own", "gpu_features"], help="run one side only")
    ap.add_argument("--feed-every", type=int,
                    help="the replay's track.feature_every: a feature message for every Nth frame "
                         "(default: what --vins-config gives the node and the replay, 2 with "
                         "multiple_thread as VINS's own image path, else 1)")
    ap.add_argument("--harness", help="VINS-Fusion's FeatureTracker harness (scripts/setup-vio.sh): "
                                      "times VINS's own tracker on the same frames (VINS does not log it)")
    a = ap.parse_args()
    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    cfg = vt.read_opencv_yaml(a.vins_config)
    ncam = int(cfg.get("num_of_cam", 1))
    if ncam != (2 if a.stereo else 1):
        raise SystemExit(f"{a.vins_config}: num_of_cam {ncam}: " + ("give --stereo" if ncam == 2 else
                                                                    "--stereo needs num_of_cam 2"))
    imu, img0 = cfg.get("imu_topic"), cfg.get("image0_topic")
    images = [img0, cfg.get("image1_topic")] if a.stereo else [img0]
    topics = vt.bag_topics(a.bag)
    for t in (imu, *images):
        if t not in topics:
            raise SystemExit(f"{a.bag}: no topic {t} (the config's); the bag has {sorted(topics)}")
    multiple_thread = int(cfg.get("multiple_thread", 0)) != 0
    every = a.feed_every or (2 if multiple_thread else 1)
    ts = vt.typestore2()
    stamps = []
    for _, _, mt, raw in vt.read_bag(a.bag, {img0}):
        m = ts.deserialize_cdr(raw, mt)
        stamps.append(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9)
    duration = stamps[-1] - stamps[0]
    # VINS's own image path with multiple_thread hands frames 2, 4, ... (1-based) on.
    fed = len(stamps) // 2 if multiple_thread else len(stamps)
    log = open(out / "runs.log", "w")

    # (a) own: IMU + images.
    own_bag = out / "own.bag"
    to_ros1(a.bag, own_bag, a.rosbags_convert, [imu, *images])

    # (b) ours: replay, then IMU + feature (+ restart), decimated as VINS's own path is.
    t_rep = time.time()
    rep = out / "replay"
    cmd = [str(a.gpu_features), "replay", str(a.bag), "--out", str(rep), "--vins-config", str(a.vins_config),
           "--backend", a.backend, "--no-progress"]
    for t in images:  # with two, the replay pairs them as the node does (track.stereo)
        cmd += ["--topic", t]
    if a.feed_every:
        cmd += ["--set", f"track.feature_every={a.feed_every}"]
    for s in a.set:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, stdout=log, stderr=log)
    replay_wall = time.time() - t_rep
    ftopic, rtopic = img0.rstrip("/") + "/feature", img0.rstrip("/") + "/restart"
    items, n_ours = [], 0
    for topic, t, mt, raw in vt.read_bag(a.bag, {imu}):
        items.append((imu, mt, t, raw))
    # Every feature message the replay wrote (it keeps the node's rate, track.feature_every).
    for topic, t, mt, raw in vt.read_bag(rep / "out.mcap", {ftopic, rtopic}):
        if topic == rtopic:
            items.append(("/vins_restart", mt, t, raw))
            continue
        n_ours += 1
        items.append(("/feature_tracker/feature", mt, t, raw))
    items.sort(key=lambda x: x[2])
    vt.write_rosbag2(out / "ours2", items, ts)
    ours_bag = out / "ours.bag"
    to_ros1(out / "ours2", ours_bag, a.rosbags_convert, [imu, "/feature_tracker/feature", "/vins_restart"])
    shutil.rmtree(out / "ours2", ignore_errors=True)
    ours_ms = None
    rj = rep / "report.json"
    if rj.exists():
        ours_ms = tracker_ms(rj)

    own_ms = None
    if a.harness:
        from vins_parity import harness_index, parse_harness  # noqa: PLC0415
        index, _ = harness_index(a.bag, images, out)
        copy = vt.config_copy(a.vins_config, out / "harness", {"output_path": str((out / "harness").resolve()) + "/"})
        res = subprocess.run([a.harness, str(copy), str(index)], capture_output=True, text=True, check=True)
        own_ms = float(np.median([f["ms"] for f in parse_harness(res.stdout)]))
        shutil.rmtree(out / "frames", ignore_errors=True)
        shutil.rmtree(out / "frames1", ignore_errors=True)

    sides = {"own": (own_bag, {}), "gpu_features": (ours_bag, {"image0_topic": "/gpu_features/unused/image0",
                                                                 "image1_topic": "/gpu_features/unused/image1"})}
    results = {}
    for name, (bag1, over) in sides.items():
        if a.only and name != a.only:
            continue
        runs = []
        for r in range(a.repeats):
            rd = (out / name / f"run{r}").resolve()
            shutil.rmtree(rd, ignore_errors=True)
            conf = vt.config_copy(a.vins_config, rd, {"output_path": str(rd) + "/", "show_track": 0, **over})
            log.write(f"\n==== {name} run {r} ====\n")
            log.flush()
            poses, wall = run_vins(a.vins_node, conf, bag1, rd, duration, imu, log)
            n_fed = fed if name == "own" else n_ours
            s = score(poses, a.gt, stamps[0], n_fed, rd)
            s["wall_s"] = wall
            runs.append(s)
            print(f"{name} run {r}: ATE {fmt(s['ate_rmse_m'])} m, init {fmt(s['init_s'])} s, "
                  f"{s['poses']} poses of {n_fed} frames", flush=True)
        agg = {}
        for key in ("ate_rmse_m", "rpe_m", "init_s", "frames_with_pose"):
            med, spread = median_spread([r[key] for r in runs])
            agg[key], agg[key.replace("_m", "").replace("_s", "") + "_spread"] = med, spread
        agg["diverged"] = sum(bool(r["diverged"]) for r in runs)
        agg["runs"] = runs
        agg["frontend_ms"] = ours_ms if name == "gpu_features" else own_ms
        results[name] = agg
    results["sequence"] = {"bag": str(a.bag), "frames": len(stamps), "frames_fed": fed, "duration_s": duration,
                           "cameras": len(images), "multiple_thread": multiple_thread, "feed_every": every, "repeats": a.repeats, "backend": a.backend,
                           "set": a.set, "replay_wall_s": replay_wall}
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    (out / "summary.md").write_text(table(results))
    print(table(results))


def tracker_ms(report_json):
    """Median tracker time per frame (ms) from the replay's report.json (any section that
    carries `tracker_ms`)."""
    def find(v):
        if isinstance(v, dict):
            if isinstance(v.get("tracker_ms"), dict) and "p50" in v["tracker_ms"]:
                return v["tracker_ms"]["p50"]
            for x in v.values():
                r = find(x)
                if r is not None:
                    return r
        return None
    try:
        return find(json.loads(Path(report_json).read_text()))
    except (ValueError, OSError):
        return None


def fmt(v, p=4):
    return "-" if v is None else f"{v:.{p}f}"


def table(res):
    lines = ["| features fed to VINS-Fusion | ATE RMSE m (spread) | RPE 1 s m | init s | frames with pose | diverged runs | front-end ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in ("own", "gpu_features"):
        r = res.get(name)
        if not r:
            continue
        lines.append(f"| {name} | {fmt(r['ate_rmse_m'])} ({fmt(r.get('ate_rmse_spread'))}) | {fmt(r['rpe_m'])} | "
                     f"{fmt(r['init_s'], 2)} | {fmt(r['frames_with_pose'], 3)} | {r['diverged']} of {len(r['runs'])} | "
                     f"{fmt(r.get('frontend_ms'), 3)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
