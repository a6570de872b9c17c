#!/usr/bin/env python3
"""ORB-SLAM3 live on ROS 2, fed by gpu_features_node's `keypoints`: a bridge node (rclpy)
that subscribes to the camera image(s), the IMU and the node's keypoints clouds, pairs them
by stamp and streams them, in stamp order, to the real ORB-SLAM3 (run_sequence reading its
stdin, with the adapter gf_features.so in LD_PRELOAD taking each frame's keypoints from the
cloud of its stamp: scripts/orb-slam3/run_sequence.cpp and gf_features.cc). The clouds
reach ORB-SLAM3 as the node published them (the same GFK1 record the files of the offline
e2e hold); ORB-SLAM3 still gets the images (its Frame needs their size; a stereo frame its
pyramid) and runs everything after extraction itself.

  live.py --tools ORB_TOOLS --vocabulary VOC --settings SETTINGS.yaml --mode MODE --out DIR
          --keypoints TOPIC[:CAMERA[:N]] ... [--image-topic /cam0/image_raw]
          [--image1-topic /cam1/image_raw] [--imu-topic /imu0] [--lockstep] [--check]
          [--frames N] [--idle-exit S] [--wait S] [--qos reliable|best_effort]

--keypoints: a node's keypoints topic, the camera it extracts (0 left/mono, 1 right) and its
select.max_keypoints (default: the settings' ORBextractor.nFeatures). Monocular modes need a
second node at 5 x nFeatures (ORB-SLAM3's initialisation extractor), stereo one node per
camera on ORB-SLAM3-rectified images (docs/slam.md). A frame is handed once its image(s),
every cloud and (with the IMU) a sample at or after its stamp have come, or after --wait
seconds with what has come (the adapter then counts a frame without a cloud). Ends on
SIGINT/SIGTERM, after --frames frames, or --idle-exit seconds without an image; ORB-SLAM3
then saves its trajectory into DIR (states.csv, trajectory.txt, keyframes.txt as
run_sequence writes them), with DIR/adapter.json (the adapter's counts) and DIR/bridge.json
(what came and what was handed).
"""
import argparse
import json
import os
import queue
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, Imu, PointCloud2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clouds_to_gfkp import record  # noqa: E402

MODES = {"mono": (1, False), "mono-inertial": (1, True), "stereo": (2, False), "stereo-inertial": (2, True)}
CHANNELS = {"mono8": 1, "8UC1": 1, "bgr8": 3, "rgb8": 3, "8UC3": 3}


def stamp_ns(msg):
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def n_features(settings):
    m = re.search(r"^ORBextractor\.nFeatures:\s*(\d+)", Path(settings).read_text(), re.M)
    if not m:
        raise SystemExit(f"{settings}: no ORBextractor.nFeatures")
    return int(m.group(1))


def parse_keypoints(specs, default_n, ncam, mono):
    """[(topic, camera, n)], checked against what the mode's extractors need."""
    out = []
    for spec in specs:
        parts = spec.split(":")
        if not 1 <= len(parts) <= 3 or not parts[0]:
            raise SystemExit(f"--keypoints {spec}: TOPIC[:CAMERA[:N]] expected")
        cam = int(parts[1]) if len(parts) > 1 else 0
        n = int(parts[2]) if len(parts) > 2 else default_n
        if cam not in range(ncam):
            raise SystemExit(f"--keypoints {spec}: camera {cam}, the mode has {ncam}")
        out.append((parts[0], cam, n))
    have = {(c, n) for _, c, n in out}
    need = {(c, default_n) for c in range(ncam)} | ({(0, 5 * default_n)} if mono else set())
    if need - have:
        hint = (" (monocular ORB-SLAM3 initialises with a 5 x nFeatures extractor: run a second node "
                f"with select.max_keypoints={5 * default_n})") if mono else ""
        raise SystemExit("--keypoints: no topic for camera/budget " +
                         ", ".join(f"{c}/{n}" for c, n in sorted(need - have)) + hint)
    return out


class Stream:
    """Records to ORB-SLAM3's stdin from a thread of its own (a slow ORB-SLAM3 never blocks
    the callbacks)."""

    def __init__(self, pipe):
        self.pipe, self.q, self.error = pipe, queue.Queue(), None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            b = self.q.get()
            if b is None:
                break
            try:
                self.pipe.write(b)
            except (BrokenPipeError, OSError) as e:
                self.error = f"ORB-SLAM3's input closed: {e}"
                break
        try:
            self.pipe.close()
        except OSError:
            pass

    def put(self, b):
        self.q.put(b)

    def close(self):
        self.q.put(None)
        self.thread.join()


class Bridge(Node):
    def __init__(self, args, keypoints, stream):
        super().__init__("orb_slam3_live")
        self.args, self.stream = args, stream
        self.ncam, self.inertial = MODES[args.mode]
        self.required = {(c, n) for _, c, n in keypoints}
        self.pending = {}  # stamp -> {"img": [..], "clouds": {(cam, n): bytes}, "since": t}
        self.imu = []  # (t_ns, bytes), not yet handed
        self.imu_last = -1
        self.last_handed = -1
        self.last_image = None
        self.said = set()
        self.c = {k: 0 for k in ("images", "frames_handed", "frames_without_clouds", "frames_without_imu",
                                 "frames_incomplete_dropped", "frames_late_dropped", "clouds", "clouds_late",
                                 "imu_samples", "imu_late", "images_bad_encoding")}
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                         reliability=ReliabilityPolicy.RELIABLE if args.qos == "reliable"
                         else ReliabilityPolicy.BEST_EFFORT)
        topics = [args.image_topic, args.image1_topic][: self.ncam]
        for cam, topic in enumerate(topics):
            self.create_subscription(Image, topic, lambda m, c=cam: self.on_image(c, m), qos)
        for topic, cam, n in keypoints:
            self.create_subscription(PointCloud2, topic, lambda m, k=(cam, n): self.on_cloud(k, m), qos)
        if self.inertial:
            self.create_subscription(Imu, args.imu_topic, self.on_imu, QoSProfile(
                history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=qos.reliability))
        self.create_timer(0.01, self.flush)
        self.done = False

    def say_once(self, key, text):
        if key not in self.said:
            self.said.add(key)
            self.get_logger().warning(text + " (said once; counted in bridge.json)")

    def entry(self, t):
        return self.pending.setdefault(t, {"img": [None] * self.ncam, "clouds": {}, "since": time.monotonic()})

    def on_image(self, cam, m):
        t = stamp_ns(m)
        self.last_image = time.monotonic()
        self.c["images"] += 1
        ch = CHANNELS.get(m.encoding)
        if ch is None or m.step < m.width * ch or len(m.data) < m.step * m.height:
            self.c["images_bad_encoding"] += 1
            self.say_once("enc", f"image with encoding {m.encoding!r} ({m.width}x{m.height}, step {m.step}): "
                          "mono8, bgr8 or rgb8 expected; frame dropped")
            return
        if t <= self.last_handed:
            self.c["frames_late_dropped"] += 1
            return
        data = bytes(m.data)
        if m.step != m.width * ch:
            data = b"".join(data[r * m.step: r * m.step + m.width * ch] for r in range(m.height))
        self.entry(t)["img"][cam] = struct.pack("<III", m.height, m.width, ch) + data

    def on_cloud(self, key, m):
        t = stamp_ns(m)
        self.c["clouds"] += 1
        if t <= self.last_handed:
            self.c["clouds_late"] += 1
            return
        self.entry(t)["clouds"][key] = record(m)

    def on_imu(self, m):
        t = stamp_ns(m)
        self.c["imu_samples"] += 1
        if t <= self.last_handed:
            self.c["imu_late"] += 1
            return
        a, w = m.linear_acceleration, m.angular_velocity
        self.imu.append((t, struct.pack("<q6d", t, a.x, a.y, a.z, w.x, w.y, w.z)))
        self.imu_last = max(self.imu_last, t)

    def hand(self, t, e):
        self.imu.sort(key=lambda x: x[0])
        k = 0
        while k < len(self.imu) and self.imu[k][0] <= t:
            self.stream.put(b"IMU1" + self.imu[k][1])
            k += 1
        del self.imu[:k]
        for (cam, n), rec in sorted(e["clouds"].items()):
            self.stream.put(b"CLD1" + struct.pack("<iiI", cam, n, len(rec)) + rec)
        if not self.required <= set(e["clouds"]):
            self.c["frames_without_clouds"] += 1
        if self.inertial and self.imu_last < t:
            self.c["frames_without_imu"] += 1
        self.stream.put(b"FRM1" + struct.pack("<qI", t, self.ncam) + b"".join(e["img"]))
        self.last_handed = t
        self.c["frames_handed"] += 1

    def flush(self, final=False):
        now = time.monotonic()
        for t in sorted(self.pending):
            e = self.pending[t]
            images = all(e["img"])
            ready = images and self.required <= set(e["clouds"]) and (not self.inertial or self.imu_last >= t)
            if not ready and not final and now - e["since"] < self.args.wait:
                break  # later frames wait for this one: the stamp order is kept
            del self.pending[t]
            if images:
                self.hand(t, e)
            else:
                self.c["frames_incomplete_dropped"] += 1
                self.say_once("incomplete", f"frame {t}: clouds without its image(s) after {self.args.wait} s; "
                              "dropped")
            if self.args.frames and self.c["frames_handed"] >= self.args.frames:
                self.done = True
                return
        if self.stream.error:
            self.say_once("pipe", self.stream.error)
            self.done = True
        idle = self.args.idle_exit
        if idle and self.last_image is not None and now - self.last_image > idle and not self.pending:
            self.done = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tools", required=True, type=Path, help="ORB_TOOLS (scripts/setup-orb-slam3.sh)")
    ap.add_argument("--vocabulary", required=True)
    ap.add_argument("--settings", required=True)
    ap.add_argument("--mode", required=True, choices=sorted(MODES))
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--keypoints", action="append", default=[], metavar="TOPIC[:CAMERA[:N]]")
    ap.add_argument("--image-topic", default="/cam0/image_raw")
    ap.add_argument("--image1-topic", default="/cam1/image_raw")
    ap.add_argument("--imu-topic", default="/imu0")
    ap.add_argument("--lockstep", action="store_true", help="hand a frame once ORB-SLAM3's threads are idle")
    ap.add_argument("--check", action="store_true", help="the adapter compares with ORB-SLAM3's own extractor")
    ap.add_argument("--frames", type=int, default=0)
    ap.add_argument("--idle-exit", type=float, default=0.0)
    ap.add_argument("--wait", type=float, default=2.0)
    ap.add_argument("--qos", choices=["reliable", "best_effort"], default="reliable")
    args = ap.parse_args()
    ncam, _ = MODES[args.mode]
    keypoints = parse_keypoints(args.keypoints, n_features(args.settings), ncam, ncam == 1)
    for f in (args.tools / "run_sequence", args.tools / "gf_features.so"):
        if not f.exists():
            raise SystemExit(f"{f} not found (scripts/setup-orb-slam3.sh builds it)")
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=str(args.tools / "gf_features.so"),
               GF_FEATURES_STATS=str(args.out / "adapter.json"))
    if args.check:
        env["GF_FEATURES_CHECK"] = "1"
    log = open(args.out / "orb_slam3.log", "wb")
    proc = subprocess.Popen([str(args.tools / "run_sequence"), args.vocabulary, args.settings, args.mode, "-",
                             str(args.out), "0" if args.lockstep else "1"],
                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
    stream = Stream(proc.stdin)
    rclpy.init()
    bridge = Bridge(args, keypoints, stream)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    bridge.get_logger().info(f"ORB-SLAM3 {args.mode} fed by " + ", ".join(f"{t} (camera {c}, {n})"
                                                                           for t, c, n in keypoints))
    try:
        while not stop.is_set() and not bridge.done and proc.poll() is None:
            rclpy.spin_once(bridge, timeout_sec=0.05)
    finally:
        bridge.flush(final=True)
        stream.close()
        rc = proc.wait()
        counts = dict(bridge.c, orb_slam3_rc=rc)
        (args.out / "bridge.json").write_text(json.dumps(counts, indent=1) + "\n")
        print("[orb_slam3_live] " + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
        bridge.destroy_node()
        rclpy.try_shutdown()
    sys.exit(0 if rc == 0 else 1)


if __name__ == "__main__":
    main()
