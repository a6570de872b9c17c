#!/usr/bin/env python3
"""Visual-inertial sequences with exact ground truth, rendered from the real photos in
tests/data: a room (floor, ceiling, four walls) with boxes at several depths, every surface
textured with a photo, seen through a calibrated camera with distortion along a smooth 6-DoF
trajectory that starts at rest. 20 Hz images, 200 Hz IMU (specific force and angular rate in
the IMU/body frame from the trajectory's derivatives, EuRoC-like white noise and constant
biases).

Writes into OUT:
  bag/                 rosbag2 (MCAP): /cam0/image_raw (mono8), /cam0/camera_info, (/cam1/...),
                       /imu0 (sensor_msgs/Imu)
  groundtruth.tum      body (IMU) pose in the world, TUM: t x y z qx qy qz qw, at 200 Hz
  vins_config.yaml     the VINS-Fusion config for this sequence (output_path set by the caller)
  orb_slam3.yaml       an ORB-SLAM3 v1.0 settings file for it (PinHole kinds and fisheye_kb's
                       KannalaBrandt8: Camera1, the IMU, Camera2 and Stereo.T_c1_c2 for
                       stereo; its EuRoC extractor settings)
  cam0.yaml (cam1.yaml) camodocal camera files (PINHOLE, MEI for --kind fisheye,
                       KANNALA_BRANDT for fisheye_kb)
  sequence.json        what was rendered (kind, seed, intrinsics, extrinsics, noise)

Kinds: walk (slow walk), fast_rotation, low_texture, brightness (gain changes over time),
stereo (two cameras 11 cm apart), fisheye (MEI camera, ~150 degrees), fisheye_kb
(Kannala-Brandt camera, ~140 degrees: ORB-SLAM3's KannalaBrandt8).

  target/py-vio/bin/python scripts/render_vi_sequence.py --kind walk --out target/vio/walk
Deterministic for a given kind, seed and duration. Needs numpy, pillow, rosbags
(scripts/setup-vio.sh makes that venv).
"""
import argparse
import json
import math
import shutil
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

ROOT = Path(__file__).resolve().parent.parent
G = 9.81
T0_NS = 1_700_000_000 * 10**9  # first stamp

# EuRoC cam0's intrinsics and radial-tangential distortion (752x480).
PINHOLE = dict(w=752, h=480, fx=458.654, fy=457.296, cx=367.215, cy=248.375,
               k1=-0.28340811, k2=0.07395907, p1=0.00019359, p2=1.76187114e-05)
# A fisheye-like MEI camera (unified model): ~150 degrees across.
MEI = dict(w=752, h=480, xi=1.2, gamma1=560.0, gamma2=560.0, u0=376.0, v0=240.0,
           k1=-0.12, k2=0.03, p1=0.0002, p2=-0.0001)

# A Kannala-Brandt fisheye (ORB-SLAM3's KannalaBrandt8, camodocal's KANNALA_BRANDT): the
# angle theta from the axis maps to r = f * theta * (1 + k1 theta^2 + ... + k4 theta^8);
# ~140 degrees across. Coefficients of TUM-VI's cameras' size.
KB = dict(w=752, h=480, fx=300.0, fy=300.0, cx=376.0, cy=240.0,
          k1=0.0035, k2=0.0007, k3=-0.0020, k4=0.0002)

# Camera axes in the body (IMU) frame: camera z = body x (forward), x = -body y, y = -body z.
R_BC = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
T_BC0 = np.array([0.05, 0.02, -0.01])
BASELINE = 0.11  # stereo: cam1 sits 11 cm along cam0's x

# EuRoC's ADIS16448 densities (per sqrt(Hz)) and random-walk-free constant biases.
ACC_DENSITY, GYR_DENSITY = 2.0e-3, 1.7e-4
ACC_BIAS = np.array([0.03, -0.02, 0.04])
GYR_BIAS = np.array([0.002, -0.0015, 0.001])


def quintic(u):
    u = np.clip(u, 0.0, 1.0)
    return u * u * u * (10 - 15 * u + 6 * u * u)


def rot_zyx(yaw, pitch, roll):
    cy, sy, cp, sp, cr, sr = (math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch),
                              math.cos(roll), math.sin(roll))
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


class Trajectory:
    """Body pose in the world (z up) as smooth functions of time: at rest for `rest` s, then
    the motion faded in over `ramp` s (quintic: velocity and acceleration start at zero)."""

    def __init__(self, kind, rest=1.0, ramp=1.5):
        self.kind, self.rest, self.ramp = kind, rest, ramp

    def fade(self, t):
        return quintic((t - self.rest) / self.ramp)

    def pose(self, t):
        s = self.fade(t)
        m = t - self.rest
        if self.kind == "fast_rotation":
            p = np.array([0.3 * math.sin(0.6 * m), 0.3 * math.sin(0.45 * m + 0.4), 0.1 * math.sin(0.9 * m)])
            yaw = 1.1 * math.sin(1.6 * m) + 0.4 * math.sin(2.7 * m)
            pitch = 0.25 * math.sin(1.9 * m + 0.5)
            roll = 0.2 * math.sin(2.3 * m + 1.0)
        else:
            p = np.array([0.9 * math.sin(0.42 * m) + 0.15 * math.sin(1.3 * m),
                          0.7 * math.sin(0.55 * m + 0.3) + 0.1 * math.sin(1.7 * m),
                          0.12 * math.sin(0.9 * m + 0.2) + 0.03 * math.sin(3.6 * m)])
            yaw = 0.55 * math.sin(0.33 * m) + 0.12 * math.sin(1.1 * m)
            pitch = 0.08 * math.sin(0.7 * m + 0.4)
            roll = 0.06 * math.sin(0.9 * m + 1.3)
        pos = np.array([0.0, 0.0, 1.4]) + s * p
        return pos, rot_zyx(s * yaw, s * pitch, s * roll)

    def imu(self, t, h=1e-4):
        """True specific force and angular rate in the body frame (central differences in
        f64: errors ~1e-7, far below the noise)."""
        p0, r0 = self.pose(t - h)
        p1, r1 = self.pose(t)
        p2, r2 = self.pose(t + h)
        acc_w = (p2 - 2 * p1 + p0) / (h * h)
        f_b = r1.T @ (acc_w - np.array([0.0, 0.0, -G]))
        dr = r0.T @ r2
        ang = math.acos(max(-1.0, min(1.0, (np.trace(dr) - 1) / 2)))
        k = 0.5 if ang < 1e-12 else ang / (2 * math.sin(ang))
        w = k * np.array([dr[2, 1] - dr[1, 2], dr[0, 2] - dr[2, 0], dr[1, 0] - dr[0, 1]]) / (2 * h)
        return f_b, w


def load_texture(name, low_texture, size=512):
    img = PILImage.open(ROOT / "tests" / "data" / name).convert("L").resize((size, size), PILImage.BILINEAR)
    a = np.asarray(img, dtype=np.float32)
    if low_texture:
        # Mostly flat: heavy blur and 12 % of the contrast.
        img = PILImage.fromarray(a.astype(np.uint8)).filter(__import__("PIL.ImageFilter").ImageFilter.GaussianBlur(6))
        a = np.asarray(img, dtype=np.float32)
        a = 128 + 0.12 * (a - a.mean())
    return a


class Scene:
    """Planar rectangles (walls, floor, ceiling, box faces), each with a tiled photo."""

    def __init__(self, low_texture):
        names = ["brick.png", "building.png", "graf1.png", "astronaut.png", "camera.png",
                 "coffee_odd.png", "box.png", "basketball1.png", "left01.png", "graf3.png"]
        self.tex = [load_texture(n, low_texture) for n in names]
        self.quads = []  # (origin, axis u, axis v, normal, tex index, metres per texture)
        R, H = 4.0, 3.0
        # Walls x = +-R, y = +-R, floor z = 0, ceiling z = H.
        self.add([R, -R, 0], [0, 2 * R, 0], [0, 0, H], 0, 2.0)
        self.add([-R, R, 0], [0, -2 * R, 0], [0, 0, H], 1, 2.5)
        self.add([-R, -R, 0], [2 * R, 0, 0], [0, 0, H], 2, 2.2)
        self.add([R, R, 0], [-2 * R, 0, 0], [0, 0, H], 3, 2.4)
        self.add([-R, -R, 0], [2 * R, 0, 0], [0, 2 * R, 0], 4, 1.8)
        self.add([-R, R, H], [2 * R, 0, 0], [0, -2 * R, 0], 9, 3.0)
        # Boxes at several depths (centre, half sizes).
        for i, (c, hs) in enumerate([((2.6, -1.2, 0.5), (0.4, 0.5, 0.5)),
                                     ((2.2, 1.6, 0.8), (0.3, 0.3, 0.8)),
                                     ((-2.5, 2.0, 0.6), (0.5, 0.4, 0.6)),
                                     ((1.0, -2.8, 1.2), (0.6, 0.3, 0.3)),
                                     ((-2.0, -2.4, 0.4), (0.4, 0.4, 0.4))]):
            self.box(np.array(c), np.array(hs), 5 + i % 5)

    def add(self, o, u, v, tex, scale, centre=None):
        """A rectangle o + a u + b v; `centre` (a box's) makes its normal point away from it,
        else towards the room's centre, so that faces seen from behind can be skipped."""
        o, u, v = (np.array(x, dtype=np.float64) for x in (o, u, v))
        n = np.cross(u, v)
        inside = np.array([0.0, 0.0, 1.5]) if centre is None else centre
        if (inside - (o + (u + v) / 2)) @ n > 0:
            n = -n if centre is not None else n
        elif centre is None:
            n = -n
        self.quads.append((o, u, v, n / np.linalg.norm(n), tex, scale))

    def box(self, c, hs, tex):
        x, y, z = hs
        ex, ey, ez = np.array([2 * x, 0, 0]), np.array([0, 2 * y, 0]), np.array([0, 0, 2 * z])
        lo = c - hs
        for o, u, v in [(lo, ey, ez), (lo + ex, ey, ez), (lo, ex, ez), (lo + ey, ex, ez), (lo + ez, ex, ey)]:
            self.add(o, u, v, tex, 1.0, centre=c)

    def render(self, origin, dirs):
        """Gray values (float) along world rays `dirs` (N x 3) from `origin`."""
        n = dirs.shape[0]
        best = np.full(n, np.inf)
        val = np.full(n, 128.0, dtype=np.float32)
        for o, u, v, nrm, tex, scale in self.quads:
            if (origin - o) @ nrm <= 0:
                continue  # seen from behind: hidden by the room or the box itself
            den = dirs @ nrm
            with np.errstate(divide="ignore", invalid="ignore"):
                t = ((o - origin) @ nrm) / den
            ok = (t > 1e-6) & (t < best)
            if not ok.any():
                continue
            idx = np.nonzero(ok)[0]
            hit = origin + dirs[idx] * t[idx, None] - o
            a = hit @ u / (u @ u)
            b = hit @ v / (v @ v)
            inside = (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)
            idx, a, b = idx[inside], a[inside], b[inside]
            if idx.size == 0:
                continue
            best[idx] = t[idx]
            img = self.tex[tex]
            s = img.shape[0]
            tu = (a * np.linalg.norm(u) / scale) * s
            tv = (b * np.linalg.norm(v) / scale) * s
            val[idx] = bilinear(img, tu, tv)
        return val


def bilinear(img, x, y):
    s = img.shape[0]
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
    x0, y0 = x0.astype(np.int64) % s, y0.astype(np.int64) % s
    x1, y1 = (x0 + 1) % s, (y0 + 1) % s
    return ((img[y0, x0] * (1 - fx) + img[y0, x1] * fx) * (1 - fy)
            + (img[y1, x0] * (1 - fx) + img[y1, x1] * fx) * fy)


def pixel_rays(cam, model, ss=2):
    """Unit rays in the camera frame for a ss x ss grid of samples inside every pixel,
    through the inverse of the distortion (60 fixed-point steps: converged to ~1e-12 px)."""
    w, h = cam["w"], cam["h"]
    offs = (np.arange(ss) + 0.5) / ss - 0.5
    us, vs = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    rays = []
    for dy in offs:
        for dx in offs:
            u, v = us + dx, vs + dy
            if model == "KANNALA_BRANDT":
                # theta from the distorted radius by Newton's method (20 steps; the
                # polynomial is monotonic over the image), then the ray at that angle.
                mx, my = (u - cam["cx"]) / cam["fx"], (v - cam["cy"]) / cam["fy"]
                rd = np.sqrt(mx * mx + my * my)
                th = rd.copy()
                k = [cam["k1"], cam["k2"], cam["k3"], cam["k4"]]
                for _ in range(20):
                    t2 = th * th
                    f = th * (1 + t2 * (k[0] + t2 * (k[1] + t2 * (k[2] + t2 * k[3])))) - rd
                    df = 1 + t2 * (3 * k[0] + t2 * (5 * k[1] + t2 * (7 * k[2] + t2 * 9 * k[3])))
                    th = th - f / df
                s_ = np.where(rd > 0, np.sin(th) / np.maximum(rd, 1e-300), 1.0)
                d = np.stack([mx * s_, my * s_, np.cos(th)], -1)
                rays.append((d / np.linalg.norm(d, axis=-1, keepdims=True)).reshape(-1, 3))
                continue
            if model == "PINHOLE":
                mx, my = (u - cam["cx"]) / cam["fx"], (v - cam["cy"]) / cam["fy"]
            else:
                mx, my = (u - cam["u0"]) / cam["gamma1"], (v - cam["v0"]) / cam["gamma2"]
            x, y = mx.copy(), my.copy()
            for _ in range(60):
                r2 = x * x + y * y
                rad = cam["k1"] * r2 + cam["k2"] * r2 * r2
                dxd = x * rad + 2 * cam["p1"] * x * y + cam["p2"] * (r2 + 2 * x * x)
                dyd = y * rad + 2 * cam["p2"] * x * y + cam["p1"] * (r2 + 2 * y * y)
                x, y = mx - dxd, my - dyd
            if model == "PINHOLE":
                d = np.stack([x, y, np.ones_like(x)], -1)
            else:
                xi = cam["xi"]
                r2 = x * x + y * y
                z = 1 - xi * (r2 + 1) / (xi + np.sqrt(1 + (1 - xi * xi) * r2))
                d = np.stack([x, y, z], -1)
            rays.append((d / np.linalg.norm(d, axis=-1, keepdims=True)).reshape(-1, 3))
    return rays


def quat_xyzw(r):
    from numpy.linalg import eigh
    k = np.array([[r[0, 0] - r[1, 1] - r[2, 2], r[1, 0] + r[0, 1], r[2, 0] + r[0, 2], r[2, 1] - r[1, 2]],
                  [r[1, 0] + r[0, 1], r[1, 1] - r[0, 0] - r[2, 2], r[2, 1] + r[1, 2], r[0, 2] - r[2, 0]],
                  [r[2, 0] + r[0, 2], r[2, 1] + r[1, 2], r[2, 2] - r[0, 0] - r[1, 1], r[1, 0] - r[0, 1]],
                  [r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1], r[0, 0] + r[1, 1] + r[2, 2]]]) / 3
    q = eigh(k)[1][:, -1]
    return q if q[3] >= 0 else -q


def camodocal_file(model, cam, name):
    if model == "KANNALA_BRANDT":
        return (f"%YAML:1.0\n---\nmodel_type: KANNALA_BRANDT\ncamera_name: {name}\nimage_width: {cam['w']}\n"
                f"image_height: {cam['h']}\nprojection_parameters:\n   k2: {cam['k1']!r}\n   k3: {cam['k2']!r}\n"
                f"   k4: {cam['k3']!r}\n   k5: {cam['k4']!r}\n   mu: {cam['fx']!r}\n   mv: {cam['fy']!r}\n"
                f"   u0: {cam['cx']!r}\n   v0: {cam['cy']!r}\n")
    if model == "PINHOLE":
        return (f"%YAML:1.0\n---\nmodel_type: PINHOLE\ncamera_name: {name}\nimage_width: {cam['w']}\n"
                f"image_height: {cam['h']}\ndistortion_parameters:\n   k1: {cam['k1']!r}\n   k2: {cam['k2']!r}\n"
                f"   p1: {cam['p1']!r}\n   p2: {cam['p2']!r}\nprojection_parameters:\n   fx: {cam['fx']!r}\n"
                f"   fy: {cam['fy']!r}\n   cx: {cam['cx']!r}\n   cy: {cam['cy']!r}\n")
    return (f"%YAML:1.0\n---\nmodel_type: MEI\ncamera_name: {name}\nimage_width: {cam['w']}\n"
            f"image_height: {cam['h']}\nmirror_parameters:\n   xi: {cam['xi']!r}\ndistortion_parameters:\n"
            f"   k1: {cam['k1']!r}\n   k2: {cam['k2']!r}\n   p1: {cam['p1']!r}\n   p2: {cam['p2']!r}\n"
            f"projection_parameters:\n   gamma1: {cam['gamma1']!r}\n   gamma2: {cam['gamma2']!r}\n"
            f"   u0: {cam['u0']!r}\n   v0: {cam['v0']!r}\n")


def matrix_yaml(name, t):
    vals = ", ".join(repr(float(v)) for v in t.reshape(-1))
    return f"{name}: !!opencv-matrix\n   rows: 4\n   cols: 4\n   dt: d\n   data: [{vals}]\n"


def vins_config(ncam, cams, w, h):
    head = ("%YAML:1.0\n\n# Written by scripts/render_vi_sequence.py for a rendered sequence.\n"
            "imu: 1\nnum_of_cam: {n}\n\nimu_topic: \"/imu0\"\nimage0_topic: \"/cam0/image_raw\"\n"
            "image1_topic: \"/cam1/image_raw\"\noutput_path: \"/tmp/vins_output\"\n\n"
            "cam0_calib: \"cam0.yaml\"\ncam1_calib: \"cam1.yaml\"\nimage_width: {w}\nimage_height: {h}\n\n"
            "estimate_extrinsic: 0\n").format(n=ncam, w=w, h=h)
    body = "".join(matrix_yaml(f"body_T_cam{i}", t) for i, t in enumerate(cams))
    tail = ("\nmultiple_thread: 1\nmax_cnt: 150\nmin_dist: 30\nfreq: 10\nF_threshold: 1.0\nshow_track: 0\n"
            "flow_back: 1\n\nmax_solver_time: 0.04\nmax_num_iterations: 8\nkeyframe_parallax: 10.0\n\n"
            f"acc_n: 0.1\ngyr_n: 0.01\nacc_w: 0.001\ngyr_w: 0.0001\ng_norm: {G}\n\n"
            "estimate_td: 0\ntd: 0.0\n\nload_previous_pose_graph: 0\npose_graph_save_path: \"/tmp/vins_pg/\"\n"
            "save_image: 0\n")
    return head + body + tail


def orb_slam3_settings(cams, cam, noise, model="PINHOLE"):
    """ORB-SLAM3 v1.0 settings (File.version "1.0", PinHole or KannalaBrandt8) for this rig:
    both cameras share the intrinsics; IMU.T_b_c1 is body_T_cam0, Stereo.T_c1_c2 cam0_T_cam1."""
    def mat(name, t):
        vals = ", ".join(repr(float(v)) for v in t.reshape(-1))
        return f"{name}: !!opencv-matrix\n  rows: 4\n  cols: 4\n  dt: f\n  data: [{vals}]\n"
    kb = model == "KANNALA_BRANDT"
    dist = ("k1", "k2", "k3", "k4") if kb else ("k1", "k2", "p1", "p2")
    intr = "".join(f"Camera{i}.{k}: {cam[k]!r}\n" for i in range(1, len(cams) + 1)
                   for k in ("fx", "fy", "cx", "cy") + dist)
    ctype = "KannalaBrandt8" if kb else "PinHole"
    text = ("%YAML:1.0\n# Written by scripts/render_vi_sequence.py for a rendered sequence.\n"
            f'File.version: "1.0"\nCamera.type: "{ctype}"\n' + intr +
            f"Camera.width: {cam['w']}\nCamera.height: {cam['h']}\nCamera.fps: 20\nCamera.RGB: 1\n")
    if len(cams) == 2:
        text += "Stereo.ThDepth: 60.0\n" + mat("Stereo.T_c1_c2", np.linalg.inv(cams[0]) @ cams[1])
    text += mat("IMU.T_b_c1", cams[0])
    text += (f"IMU.NoiseGyro: {noise[1]!r}\nIMU.NoiseAcc: {noise[0]!r}\nIMU.GyroWalk: 1.9393e-05\n"
             "IMU.AccWalk: 3.0e-03\nIMU.Frequency: 200.0\n"
             "ORBextractor.nFeatures: 1000\nORBextractor.scaleFactor: 1.2\nORBextractor.nLevels: 8\n"
             "ORBextractor.iniThFAST: 20\nORBextractor.minThFAST: 7\n"
             "Viewer.KeyFrameSize: 0.05\nViewer.KeyFrameLineWidth: 1.0\nViewer.GraphLineWidth: 0.9\n"
             "Viewer.PointSize: 2.0\nViewer.CameraSize: 0.08\nViewer.CameraLineWidth: 3.0\n"
             "Viewer.ViewpointX: 0.0\nViewer.ViewpointY: -0.7\nViewer.ViewpointZ: -1.8\n"
             "Viewer.ViewpointF: 500.0\nViewer.imageViewScale: 1.0\n")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", required=True,
                    choices=["walk", "fast_rotation", "low_texture", "brightness", "stereo", "fisheye",
                             "fisheye_kb"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--supersample", type=int, default=1, help="samples per pixel side (default 1)")
    args = ap.parse_args()
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    rng = np.random.default_rng(args.seed)
    model = {"fisheye": "MEI", "fisheye_kb": "KANNALA_BRANDT"}.get(args.kind, "PINHOLE")
    cam = {"MEI": MEI, "KANNALA_BRANDT": KB}.get(model, PINHOLE)
    ncam = 2 if args.kind == "stereo" else 1
    traj = Trajectory(args.kind)
    scene = Scene(low_texture=args.kind == "low_texture")
    rays = pixel_rays(cam, model, args.supersample)
    t_bc = [np.eye(4) for _ in range(ncam)]
    for i in range(ncam):
        t_bc[i][:3, :3] = R_BC
        t_bc[i][:3, 3] = T_BC0 + R_BC @ np.array([BASELINE * i, 0.0, 0.0])

    out = args.out
    shutil.rmtree(out / "bag", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    ts = get_typestore(getattr(Stores, "ROS2_JAZZY", None) or Stores.ROS2_HUMBLE)
    T = ts.types
    Header, Time = T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    Image, CameraInfo, Imu = T["sensor_msgs/msg/Image"], T["sensor_msgs/msg/CameraInfo"], T["sensor_msgs/msg/Imu"]
    Quat, Vec3 = T["geometry_msgs/msg/Quaternion"], T["geometry_msgs/msg/Vector3"]
    RoI = T["sensor_msgs/msg/RegionOfInterest"]

    def header(ns, frame):
        return Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=frame)

    n_img = int(round(args.duration * 20))
    n_imu = int(round(args.duration * 200))
    acc_std, gyr_std = ACC_DENSITY * math.sqrt(200), GYR_DENSITY * math.sqrt(200)
    gt = []
    with Writer(out / "bag", version=8, storage_plugin=StoragePlugin.MCAP) as w:
        imu_c = w.add_connection("/imu0", Imu.__msgtype__, typestore=ts)
        img_c = [w.add_connection(f"/cam{i}/image_raw", Image.__msgtype__, typestore=ts) for i in range(ncam)]
        info_c = [w.add_connection(f"/cam{i}/camera_info", CameraInfo.__msgtype__, typestore=ts)
                  for i in range(ncam)]
        # IMU first for each 50 ms, so that every image finds its IMU already written.
        for k in range(n_imu + 1):
            t = k / 200.0
            ns = T0_NS + k * 5_000_000
            f, wb = traj.imu(t)
            f = f + ACC_BIAS + rng.normal(0, acc_std, 3)
            wb = wb + GYR_BIAS + rng.normal(0, gyr_std, 3)
            pos, rot = traj.pose(t)
            q = quat_xyzw(rot)
            gt.append(f"{ns / 1e9:.9f} {pos[0]:.9f} {pos[1]:.9f} {pos[2]:.9f} {q[0]:.9f} {q[1]:.9f} {q[2]:.9f} {q[3]:.9f}")
            msg = Imu(header=header(ns, "imu"), orientation=Quat(x=0.0, y=0.0, z=0.0, w=1.0),
                      orientation_covariance=np.array([-1.0] + [0.0] * 8),
                      angular_velocity=Vec3(x=wb[0], y=wb[1], z=wb[2]),
                      angular_velocity_covariance=np.zeros(9),
                      linear_acceleration=Vec3(x=f[0], y=f[1], z=f[2]),
                      linear_acceleration_covariance=np.zeros(9))
            w.write(imu_c, ns, ts.serialize_cdr(msg, Imu.__msgtype__))
            if k % 10 != 0 or k // 10 >= n_img:
                continue
            i_img = k // 10
            for c in range(ncam):
                r_wc = rot @ t_bc[c][:3, :3]
                o_wc = pos + rot @ t_bc[c][:3, 3]
                acc = None
                for r in rays:
                    v = scene.render(o_wc, r @ r_wc.T)
                    acc = v if acc is None else acc + v
                img = acc / len(rays)
                if args.kind == "brightness":
                    # Auto-exposure-like gain: slow swings and two quick steps.
                    g = 1.0 + 0.35 * math.sin(0.5 * t) + (0.25 if 12.0 <= t < 17.0 else 0.0) - (0.3 if t >= 22.0 else 0.0)
                    img = img * g
                px = np.clip(np.rint(img + rng.normal(0, 1.0, img.shape)), 0, 255).astype(np.uint8)
                px = px.reshape(cam["h"], cam["w"])
                hd = header(ns, f"cam{c}")
                if model == "PINHOLE":
                    kmat = [cam["fx"], 0.0, cam["cx"], 0.0, cam["fy"], cam["cy"], 0.0, 0.0, 1.0]
                    info = CameraInfo(header=hd, height=cam["h"], width=cam["w"], distortion_model="plumb_bob",
                                      d=np.array([cam["k1"], cam["k2"], cam["p1"], cam["p2"], 0.0]),
                                      k=np.array(kmat), r=np.eye(3).reshape(-1),
                                      p=np.array(kmat[:3] + [0.0] + kmat[3:6] + [0.0] + kmat[6:] + [0.0]),
                                      binning_x=0, binning_y=0,
                                      roi=RoI(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
                    w.write(info_c[c], ns + 1_000_000, ts.serialize_cdr(info, CameraInfo.__msgtype__))
                im = Image(header=hd, height=cam["h"], width=cam["w"], encoding="mono8", is_bigendian=0,
                           step=cam["w"], data=px.reshape(-1))
                w.write(img_c[c], ns + 1_000_000, ts.serialize_cdr(im, Image.__msgtype__))
            if i_img % 40 == 0:
                print(f"{args.kind}: frame {i_img}/{n_img}", flush=True)
    (out / "groundtruth.tum").write_text("\n".join(gt) + "\n")
    for c in range(ncam):
        (out / f"cam{c}.yaml").write_text(camodocal_file(model, cam, f"cam{c}"))
    (out / "vins_config.yaml").write_text(vins_config(ncam, t_bc, cam["w"], cam["h"]))
    if model in ("PINHOLE", "KANNALA_BRANDT"):
        (out / "orb_slam3.yaml").write_text(orb_slam3_settings(t_bc, cam, (ACC_DENSITY, GYR_DENSITY), model))
    (out / "sequence.json").write_text(json.dumps(
        {"kind": args.kind, "seed": args.seed, "duration_s": args.duration, "model": model, "camera": cam,
         "cameras": ncam, "body_T_cam": [t.tolist() for t in t_bc], "acc_bias": ACC_BIAS.tolist(),
         "gyr_bias": GYR_BIAS.tolist(), "acc_noise_std": acc_std, "gyr_noise_std": gyr_std,
         "image_hz": 20, "imu_hz": 200}, indent=1))
    print(f"wrote {out}: {n_img} frames x {ncam} camera(s), {n_imu + 1} IMU samples")


if __name__ == "__main__":
    main()
