"""Shared helpers of the VINS-Fusion tools (scripts/vio_e2e.py, scripts/vins_parity.py):
VINS config files (OpenCV FileStorage YAML), copies of them with keys changed, bags read and
converted with the `rosbags` package, our `feature` messages decoded.

Nothing here knows ROS 1 beyond what `rosbags` writes; the ROS 1 tools themselves
(roscore, rosbag, vins_node) are run by the callers with the system's /usr/bin/python3.
"""
import re
import shutil
from pathlib import Path

import numpy as np


def read_opencv_yaml(path):
    """The top-level scalar keys of an OpenCV YAML file (enough for VINS's settings; dotted
    names, as ORB-SLAM3's `Camera1.fx`, too)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r'^([A-Za-z_][A-Za-z0-9_.]*):\s*(.*?)\s*(#.*)?$', line)
        if not m or m.group(2).startswith("!!"):
            continue
        v = m.group(2)
        if len(v) >= 2 and v[0] == v[-1] == '"':
            out[m.group(1)] = v[1:-1]
            continue
        try:
            out[m.group(1)] = float(v) if any(c in v for c in ".eE") else int(v)
        except ValueError:
            out[m.group(1)] = v
    return out


def config_copy(src, dst_dir, overrides):
    """Copies the VINS config `src` and its camera files into `dst_dir` with the keys in
    `overrides` replaced (strings quoted); returns the copy's path. Everything else is kept
    byte for byte, `!!opencv-matrix` blocks included."""
    src, dst_dir = Path(src), Path(dst_dir)
    dst_dir.mkdir(parents=True, exist_ok=True)
    keys = read_opencv_yaml(src)
    for k in ("cam0_calib", "cam1_calib"):
        if k in keys and (src.parent / keys[k]).exists():
            shutil.copyfile(src.parent / keys[k], dst_dir / Path(keys[k]).name)
            overrides.setdefault(k, Path(keys[k]).name)
    text = src.read_text()
    for k, v in overrides.items():
        val = f'"{v}"' if isinstance(v, str) else repr(v)
        text, n = re.subn(rf'^{k}:[^\n]*$', f'{k}: {val}', text, flags=re.M)
        if n == 0:
            text += f"\n{k}: {val}\n"
    dst = dst_dir / src.name
    dst.write_text(text)
    return dst


def typestore2():
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(getattr(Stores, "ROS2_JAZZY", None) or Stores.ROS2_HUMBLE)


def read_bag(path, topics):
    """(topic, log_ns, msgtype, raw CDR) of the wanted topics of a rosbag2 directory or a
    single .mcap file, in log-time order."""
    from rosbags.rosbag2 import Reader
    path = Path(path)
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic in topics]
        for c, t, raw in r.messages(connections=conns):
            yield c.topic, t, c.msgtype, raw


def bag_topics(path):
    from rosbags.rosbag2 import Reader
    with Reader(Path(path)) as r:
        return {c.topic: c.msgtype for c in r.connections}


def write_rosbag2(path, items, ts=None):
    """Writes (topic, msgtype, log_ns, raw CDR) items into a rosbag2 (MCAP) at `path`."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    ts = ts or typestore2()
    shutil.rmtree(path, ignore_errors=True)
    conns = {}
    with Writer(Path(path), version=8, storage_plugin=StoragePlugin.MCAP) as w:
        for topic, msgtype, t, raw in items:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ts)
            w.write(conns[topic], t, raw)


def feature_points(raw, ts=None, camera=0):
    """Our `feature` message (VINS-Fusion's layout, or VINS-Mono's one-camera layout) as
    {id: (x, y, z, u, v, vx, vy)} of f32 for one camera (0, or 1 for a stereo pair's second),
    and the stamp in seconds (sec + nsec * 1e-9, as ROS's toSec)."""
    ts = ts or typestore2()
    m = ts.deserialize_cdr(raw, "sensor_msgs/msg/PointCloud")
    ch = {c.name: np.asarray(c.values, dtype=np.float32) for c in m.channels}
    if "id_of_point" in ch:
        ch = {"id": ch["id_of_point"], "camera": np.zeros_like(ch["id_of_point"]), "u": ch["u_of_point"],
              "v": ch["v_of_point"], "velocity_x": ch["velocity_x_of_point"],
              "velocity_y": ch["velocity_y_of_point"]}
    out = {}
    for i, p in enumerate(m.points):
        if int(ch["camera"][i]) != camera:
            continue
        out[int(ch["id"][i])] = tuple(np.float32(v) for v in (
            p.x, p.y, p.z, ch["u"][i], ch["v"][i], ch["velocity_x"][i], ch["velocity_y"][i]))
    return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, out


def mono_config(fusion_config, out, freq=10, equalize=1, f_threshold=1.0):
    """A VINS-Mono config (camera and front-end keys in one file, as its euroc_config.yaml)
    made from a one-camera VINS-Fusion config: its camera file's keys, then image_topic,
    imu_topic, max_cnt, min_dist and the given freq, F_threshold, equalize (fisheye 0)."""
    fusion_config, out = Path(fusion_config), Path(out)
    keys = read_opencv_yaml(fusion_config)
    cam = (fusion_config.parent / keys["cam0_calib"]).read_text().splitlines()
    body = [l for l in cam if not l.startswith("%") and l.strip() != "---"]
    lines = ["%YAML:1.0", "---", *body,
             f'image_topic: "{keys["image0_topic"]}"', f'imu_topic: "{keys.get("imu_topic", "/imu0")}"',
             f'max_cnt: {int(float(keys.get("max_cnt", 150)))}', f'min_dist: {int(float(keys.get("min_dist", 30)))}',
             f"freq: {freq}", f"F_threshold: {f_threshold}", f"equalize: {equalize}", "fisheye: 0",
             'output_path: "/tmp/vins_mono_output/"']
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out
