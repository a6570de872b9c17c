#!/usr/bin/env python3
"""Build real ROS 2 bags (MCAP and sqlite3) from real frames with the pure-Python `rosbags`
package (no ROS install): the frames of a video (e.g. vtest.avi from Debian opencv-doc,
cockatoo.mp4 from python3-imageio) or a camera pan over a still photo (tests/data/*.png).

Writes, under OUT:
  mcap/     bag directory (metadata.yaml + mcap/mcap_0.mcap)
  sqlite3/  bag directory (metadata.yaml + sqlite3/sqlite3_0.db3)
  manifest.json  topics, frame count and every header stamp / log time written

Topics: /camera/image_raw (sensor_msgs/msg/Image, bgr8 or mono8), optionally
/camera/image_raw/compressed (sensor_msgs/msg/CompressedImage, png: lossless, so the test
can compare) and /chatter (std_msgs/msg/String, a non-image topic the replay must skip).

Usage: make_bags.py --out DIR (--video FILE | --image FILE) [--frames N] [--size WxH]
                    [--mono] [--compressed]
Needs: rosbags and numpy (scripts/setup-bags-python.sh makes such a venv), plus
opencv-python-headless for --video or an --image that is not a binary PPM/PGM.
"""
import argparse
import json
import shutil
import sys
import zlib
import struct
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore


def png_bytes(img):
    """Minimal PNG encoder (8-bit gray or RGB), so cv2 is optional for --image."""
    h, w = img.shape[:2]
    ctype = 0 if img.ndim == 2 else 2
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def read_image_rgb(path):
    """RGB (or gray) array of an image file: binary PPM/PGM natively, anything else via cv2."""
    data = Path(path).read_bytes()
    if data[:2] in (b"P5", b"P6"):
        fields, pos = [], 2
        while len(fields) < 3:
            while data[pos:pos + 1].isspace():
                pos += 1
            if data[pos:pos + 1] == b"#":
                pos = data.index(b"\n", pos)
                continue
            end = pos
            while not data[end:end + 1].isspace():
                end += 1
            fields.append(int(data[pos:end]))
            pos = end
        w, h, maxval = fields
        if maxval != 255:
            sys.exit(f"{path}: only 8-bit PNM is supported")
        ch = 3 if data[:2] == b"P6" else 1
        px = np.frombuffer(data, dtype=np.uint8, count=w * h * ch, offset=pos + 1)
        return px.reshape((h, w, 3) if ch == 3 else (h, w))
    import cv2  # noqa: PLC0415

    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        sys.exit(f"cannot read {path}")
    if img.ndim == 3:
        img = cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB)
    return img


def frames_from_video(path, n, size):
    import cv2  # noqa: PLC0415

    cap = cv2.VideoCapture(str(path))
    out = []
    while len(out) < n:
        ok, bgr = cap.read()
        if not ok:
            break
        if size:
            bgr = bgr[: size[1], : size[0]]
        out.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    if not out:
        sys.exit(f"no frames read from {path}")
    return out


def frames_from_pan(path, n, size):
    """A camera pan: windows of SIZE moving 5 px right and 3 px down per frame."""
    img = read_image_rgb(path)
    h, w = img.shape[:2]
    fw, fh = size or (min(w, 320), min(h, 240))
    out = []
    for i in range(n):
        x = min(5 * i, w - fw)
        y = min(3 * i, h - fh)
        out.append(np.ascontiguousarray(img[y : y + fh, x : x + fw]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--video", type=Path)
    src.add_argument("--image", type=Path)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--size", help="WxH crop")
    ap.add_argument("--mono", action="store_true", help="publish mono8 instead of bgr8")
    ap.add_argument("--compressed", action="store_true", help="also a png CompressedImage topic")
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x")) if args.size else None
    frames = (frames_from_video(args.video, args.frames, size) if args.video
              else frames_from_pan(args.image, args.frames, size))

    store = getattr(Stores, "ROS2_JAZZY", None) or Stores.ROS2_HUMBLE
    ts = get_typestore(store)
    Image = ts.types["sensor_msgs/msg/Image"]
    CompressedImage = ts.types["sensor_msgs/msg/CompressedImage"]
    String = ts.types["std_msgs/msg/String"]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]

    t0 = 1_700_000_000 * 10**9 + 250_000_000
    period = 33_333_333
    manifest = {"frames": len(frames), "topics": {}, "stamps": [], "log_times": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for plugin, name in [(StoragePlugin.MCAP, "mcap"), (StoragePlugin.SQLITE3, "sqlite3")]:
        path = args.out / name
        shutil.rmtree(path, ignore_errors=True)
        with Writer(path, version=8, storage_plugin=plugin) as w:
            conn = w.add_connection("/camera/image_raw", Image.__msgtype__, typestore=ts)
            cconn = (w.add_connection("/camera/image_raw/compressed", CompressedImage.__msgtype__, typestore=ts)
                     if args.compressed else None)
            sconn = w.add_connection("/chatter", String.__msgtype__, typestore=ts)
            for i, rgb in enumerate(frames):
                stamp_ns = t0 + i * period
                log_ns = stamp_ns + 1_000_000  # received 1 ms after the stamp
                hdr = Header(stamp=Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id="camera")
                if args.mono or rgb.ndim == 2:
                    gray = rgb if rgb.ndim == 2 else (
                        (rgb[..., 0].astype(np.uint32) * 4899 + rgb[..., 1].astype(np.uint32) * 9617
                         + rgb[..., 2].astype(np.uint32) * 1868 + 8192) >> 14).astype(np.uint8)
                    data, enc, step = gray.reshape(-1), "mono8", gray.shape[1]
                    h, wd = gray.shape
                else:
                    bgr = np.ascontiguousarray(rgb[..., ::-1])
                    data, enc, step = bgr.reshape(-1), "bgr8", bgr.shape[1] * 3
                    h, wd = bgr.shape[:2]
                msg = Image(header=hdr, height=h, width=wd, encoding=enc, is_bigendian=0, step=step,
                            data=np.ascontiguousarray(data, dtype=np.uint8))
                w.write(conn, log_ns, ts.serialize_cdr(msg, Image.__msgtype__))
                if cconn is not None:
                    c = CompressedImage(header=hdr, format="rgb8; png compressed rgb8",
                                        data=np.frombuffer(png_bytes(rgb), dtype=np.uint8))
                    w.write(cconn, log_ns, ts.serialize_cdr(c, CompressedImage.__msgtype__))
                s = String(data=f"frame {i}")
                w.write(sconn, log_ns, ts.serialize_cdr(s, String.__msgtype__))
                if name == "mcap":
                    manifest["stamps"].append(stamp_ns)
                    manifest["log_times"].append(log_ns)
    manifest["topics"] = {"/camera/image_raw": "sensor_msgs/msg/Image", "/chatter": "std_msgs/msg/String"}
    if args.compressed:
        manifest["topics"]["/camera/image_raw/compressed"] = "sensor_msgs/msg/CompressedImage"
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {len(frames)} frames to {args.out}/mcap and {args.out}/sqlite3")


if __name__ == "__main__":
    main()
