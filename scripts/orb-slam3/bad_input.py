#!/usr/bin/env python3
"""Bad clouds never crash ORB-SLAM3: the adapter (gf_features.so) skips and counts them.

From an end-to-end's good features folder (OUT/features of e2e.py) and its sequence, writes
four broken copies and runs the real ORB-SLAM3 (monocular, the first --frames frames) on
each through the adapter:
  no_descriptor   the clouds' descriptor field removed from their field table;
  short_step      point_step 24 (the first six floats only) while the descriptor field stays;
  octave          one keypoint per cloud on octave 9 (the settings have 8 levels);
  stamps          every stamp 1 ms late (no cloud for any frame).
Each run must exit 0 with every frame skipped and the reason named in the adapter's counts.

  bad_input.py --tools DIR --vocabulary FILE --settings FILE --features DIR --sequence DIR --out DIR
"""
import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path


def records(data):
    at = 0
    while at < len(data):
        assert data[at:at + 4] == b"GFK1"
        stamp, nf = struct.unpack_from("<qI", data, at + 4)
        p = at + 16
        fields = []
        for _ in range(nf):
            ln = data[p]
            name = data[p + 1:p + 1 + ln].decode()
            off, dt, cnt = struct.unpack_from("<IBI", data, p + 1 + ln)
            fields.append([name, off, dt, cnt])
            p += 1 + ln + 9
        step, n = struct.unpack_from("<II", data, p)
        p += 8
        yield stamp, fields, step, n, bytearray(data[p:p + step * n])
        at = p + step * n


def write(recs):
    out = []
    for stamp, fields, step, n, pts in recs:
        out.append(b"GFK1" + struct.pack("<qI", stamp, len(fields)))
        for name, off, dt, cnt in fields:
            b = name.encode()
            out.append(struct.pack("<B", len(b)) + b + struct.pack("<IBI", off, dt, cnt))
        out.append(struct.pack("<II", step, n) + bytes(pts))
    return b"".join(out)


def no_descriptor(r):
    stamp, fields, step, n, pts = r
    return stamp, [f for f in fields if f[0] != "descriptor"], step, n, pts


def short_step(r):
    stamp, fields, step, n, pts = r
    cut = b"".join(bytes(pts[i * step:i * step + 24]) for i in range(n))
    return stamp, fields, 24, n, bytearray(cut)


def octave(r):
    stamp, fields, step, n, pts = r
    off = next(f[1] for f in fields if f[0] == "octave")
    if n:
        struct.pack_into("<f", pts, off, 9.0)
    return stamp, fields, step, n, pts


def stamps(r):
    stamp, fields, step, n, pts = r
    return stamp + 1_000_000, fields, step, n, pts


CASES = {"no_descriptor": (no_descriptor, "without descriptors"), "short_step": (short_step, "too short"),
         "octave": (octave, "beyond the settings"), "stamps": (stamps, "no cloud with the frame's stamp")}


def main():
    ap = argparse.ArgumentParser()
    for k in ("tools", "vocabulary", "settings", "features", "sequence", "out"):
        ap.add_argument(f"--{k}", required=True, type=Path)
    ap.add_argument("--frames", type=int, default=40)
    a = ap.parse_args()
    seq = a.out / "sequence"
    seq.mkdir(parents=True, exist_ok=True)
    lines = (a.sequence / "frames.csv").read_text().splitlines()[: a.frames]
    (seq / "frames.csv").write_text("".join(ln + "\n" for ln in lines))
    for cam in a.sequence.glob("cam*"):
        link = seq / cam.name
        if not link.exists():
            link.symlink_to(cam.resolve())
    failed = []
    for name, (fix, reason) in CASES.items():
        d = a.out / name
        d.mkdir(parents=True, exist_ok=True)
        for f in a.features.glob("*.gfkp"):
            (d / f.name).write_bytes(write(fix(r) for r in records(f.read_bytes())))
        run = d / "run"
        run.mkdir(exist_ok=True)
        env = {"LD_PRELOAD": str(a.tools / "gf_features.so"), "GF_FEATURES_DIR": str(d),
               "GF_FEATURES_STATS": str(run / "adapter.json"), "PATH": "/usr/bin:/bin"}
        p = subprocess.run([str(a.tools / "run_sequence"), str(a.vocabulary), str(a.settings), "mono", str(seq),
                            str(run)], env=env, capture_output=True, text=True)
        stats = json.loads((run / "adapter.json").read_text()) if (run / "adapter.json").exists() else {}
        ok = (p.returncode == 0 and stats.get("skipped") == len(lines) and stats.get("fed") == 0
              and any(reason in k for k in stats.get("reasons", {})))
        print(f"{name}: exit {p.returncode}, {stats.get('skipped')} of {len(lines)} frames skipped, "
              f"reasons {list(stats.get('reasons', {}))}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failed.append(name)
    if failed:
        sys.exit(f"bad input cases failed: {failed}")


if __name__ == "__main__":
    main()
