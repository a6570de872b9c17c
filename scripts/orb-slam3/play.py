#!/usr/bin/env python3
"""Plays a bag's images and IMU over ROS 2 (rclpy; rosbag2 is not among the PyPI wheels)
from a flat dump of the bag that the rosbags side writes (scripts/orb-slam3/live-test.sh):
records of u16 topic length, topic, u16 type length, type, i64 log time (ns), u32 CDR
length, CDR bytes. Messages keep their stamps; they go out at their log times' pace divided
by --rate (0.5: half speed). Waits first until --subscribers N have matched the first image
topic and one each other image topic, then --settle seconds for the subscribers' own outputs
to connect.

  play.py DUMP [--rate R] [--subscribers N] [--settle S] [--timeout S]
"""
import argparse
import struct
import sys
import time

TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/Imu", "sensor_msgs/msg/CameraInfo")


def write_dump(path, messages):
    """The dump of `messages`, (topic, log time ns, type, CDR bytes) as the bag readers give
    them (live-test.sh writes it with the bag tools' Python, which has no rclpy)."""
    with open(path, "wb") as f:
        for topic, t, ty, cdr in messages:
            tb, yb = topic.encode(), ty.encode()
            f.write(struct.pack("<H", len(tb)) + tb + struct.pack("<H", len(yb)) + yb
                    + struct.pack("<qI", t, len(cdr)) + bytes(cdr))


def read_dump(path):
    out = []
    with open(path, "rb") as f:
        b = f.read()
    at = 0
    while at < len(b):
        (n,) = struct.unpack_from("<H", b, at)
        topic = b[at + 2: at + 2 + n].decode()
        at += 2 + n
        (n,) = struct.unpack_from("<H", b, at)
        ty = b[at + 2: at + 2 + n].decode()
        at += 2 + n
        t, n = struct.unpack_from("<qI", b, at)
        at += 12
        out.append((topic, ty, t, b[at: at + n]))
        at += n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--subscribers", type=int, default=1)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import CameraInfo, Image, Imu
    types = dict(zip(TYPES, (Image, Imu, CameraInfo)))
    msgs = read_dump(args.dump)
    unknown = sorted({ty for _, ty, _, _ in msgs} - set(types))
    if unknown:
        sys.exit(f"{args.dump}: message types {unknown} not played")
    rclpy.init()
    node = rclpy.create_node("gf_play")
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    pubs = {}
    for topic, ty, _, _ in msgs:
        if topic not in pubs:
            pubs[topic] = node.create_publisher(types[ty], topic, qos)
    images = list(dict.fromkeys(topic for topic, ty, _, _ in msgs if ty == "sensor_msgs/msg/Image"))
    # --subscribers on the first image topic, and at least one on every other.
    want = {t: (args.subscribers if k == 0 else 1) for k, t in enumerate(images)}
    deadline = time.monotonic() + args.timeout
    while any(pubs[t].get_subscription_count() < n for t, n in want.items()):
        if time.monotonic() > deadline:
            sys.exit("play: subscribers after %s s: %s (wanted %s)" % (
                args.timeout, {t: pubs[t].get_subscription_count() for t in want}, want))
        rclpy.spin_once(node, timeout_sec=0.1)
    time.sleep(args.settle)
    t0, start = msgs[0][2], time.monotonic()
    counts = {}
    for topic, ty, t, cdr in msgs:
        wait = start + (t - t0) * 1e-9 / args.rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        pubs[topic].publish(deserialize_message(cdr, types[ty]))
        counts[topic] = counts.get(topic, 0) + 1
    time.sleep(1.0)
    print("[play] " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
