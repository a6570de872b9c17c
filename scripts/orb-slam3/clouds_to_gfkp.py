#!/usr/bin/env python3
"""gpu_features' `keypoints` clouds (sensor_msgs/PointCloud2, as the node publishes them and
the replay writes them into its bag) into the file the ORB-SLAM3 adapter reads
(scripts/orb-slam3/gf_features.cc): one record per cloud, "GFK1", the stamp (ns), the
cloud's own PointFields, point_step, the point count and the point bytes, untouched. The
adapter checks the fields; nothing is checked or converted here.

  clouds_to_gfkp.py BAG TOPIC OUT.gfkp
"""
import struct
import sys
from pathlib import Path


def record(msg):
    """One cloud (a rosbags or an rclpy PointCloud2) as a GFK1 record; also used live by
    scripts/orb-slam3/live.py, so this module imports nothing beyond the standard library
    at the top."""
    st = msg.header.stamp
    out = [b"GFK1", struct.pack("<qI", st.sec * 10**9 + st.nanosec, len(msg.fields))]
    for f in msg.fields:
        name = f.name.encode()
        out.append(struct.pack("<B", len(name)) + name + struct.pack("<IBI", f.offset, f.datatype, f.count))
    n = msg.width * msg.height
    data = bytes(msg.data)
    if len(data) < n * msg.point_step:
        n = len(data) // max(msg.point_step, 1)  # a short cloud: the adapter sees what is there
    out.append(struct.pack("<II", msg.point_step, n))
    out.append(data[: n * msg.point_step])
    return b"".join(out)


def convert(bag, topic, dst):
    """Writes every cloud of `topic` in `bag` to `dst`; returns the number of clouds."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import vins_tools as vt
    ts = vt.typestore2()
    count = 0
    Path(dst).parent.mkdir(parents=True, exist_ok=True)  # the adapter's folder (GF_FEATURES_DIR)
    with open(dst, "wb") as f:
        for _, _, mt, raw in vt.read_bag(bag, {topic}):
            f.write(record(ts.deserialize_cdr(raw, mt)))
            count += 1
    return count


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    n = convert(sys.argv[1], sys.argv[2], sys.argv[3])
    print(f"{n} clouds -> {sys.argv[3]}")
