#!/usr/bin/env python3
"""Reads gpu_features' `keypoints` PointCloud2 into OpenCV/numpy form (documented in
docs/ros.md; tests/replay.rs runs it on the replay's out.mcap).

Library use (works on rclpy and rosbags messages alike; needs numpy, cv2 only for KeyPoints):

    from read_keypoints import cloud_to_arrays, cloud_to_opencv
    points, descriptors = cloud_to_arrays(msg)   # structured array; (N, 32) uint8 or None
    keypoints, descriptors = cloud_to_opencv(msg)  # [cv2.KeyPoint], descriptors as above
    cv2.BFMatcher(cv2.NORM_HAMMING).knnMatch(descriptors, other_descriptors, k=2)

Command line: `read_keypoints.py BAG [TOPIC]` prints, per keypoints message,
`topic index count first_descriptor_hex` (read with the `rosbags` package).
"""
import sys

import numpy as np

FLOAT32, UINT8 = 7, 2


def cloud_to_arrays(msg):
    """(points, descriptors): `points` has float32 fields x, y, response, size, angle, octave, z;
    `descriptors` is an (N, 32) uint8 array (OpenCV's descriptor rows), or None when the
    cloud has no `descriptor` field (describe.enabled false)."""
    fields = {f.name: f for f in msg.fields}
    names = [n for n, f in fields.items() if f.datatype == FLOAT32]
    spec = {"names": list(names), "formats": ["<f4"] * len(names),
            "offsets": [fields[n].offset for n in names], "itemsize": msg.point_step}
    d = fields.get("descriptor")
    if d is not None:
        assert d.datatype == UINT8 and d.count == 32, "descriptor: 32 x UINT8 expected"
        spec["names"].append("descriptor")
        spec["formats"].append(("u1", 32))
        spec["offsets"].append(d.offset)
    points = np.frombuffer(bytes(msg.data), np.dtype(spec), count=msg.width)
    descriptors = np.ascontiguousarray(points["descriptor"]) if d is not None else None
    return points, descriptors


def cloud_to_opencv(msg):
    """([cv2.KeyPoint], descriptors or None), as ORB.detectAndCompute returns them."""
    import cv2
    points, descriptors = cloud_to_arrays(msg)
    keypoints = [cv2.KeyPoint(float(p["x"]), float(p["y"]), float(p["size"]), float(p["angle"]),
                              float(p["response"]), int(p["octave"])) for p in points]
    return keypoints, descriptors


def main():
    from pathlib import Path
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore
    store = getattr(Stores, "ROS2_JAZZY", None) or Stores.ROS2_HUMBLE
    want = sys.argv[2] if len(sys.argv) > 2 else None
    seen = {}
    with AnyReader([Path(sys.argv[1])], default_typestore=get_typestore(store)) as r:
        for c, _, raw in r.messages():
            if c.msgtype != "sensor_msgs/msg/PointCloud2" or (want and c.topic != want):
                continue
            points, desc = cloud_to_arrays(r.deserialize(raw, c.msgtype))
            i = seen[c.topic] = seen.get(c.topic, -1) + 1
            first = desc[0].tobytes().hex() if desc is not None and len(desc) else "-"
            print(c.topic, i, len(points), first)


if __name__ == "__main__":
    main()
