#!/usr/bin/env python3
"""Markdown tables from scripts/vio-e2e.sh and scripts/vins_parity.py results, for
docs/tracking.md: one row per sequence and side (median of the repeats, spread), and the
parity of our tracker with VINS-Fusion's FeatureTracker per sequence.

  scripts/vio_table.py --e2e target/vio-results/e2e-* --parity target/vio-results/parity-*
"""
import argparse
import json
from pathlib import Path


def f(v, p=4):
    return "-" if v is None else f"{v:.{p}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--e2e", nargs="*", type=Path, default=[])
    ap.add_argument("--parity", nargs="*", type=Path, default=[])
    a = ap.parse_args()
    if a.e2e:
        print("| sequence | features fed to VINS-Fusion | ATE RMSE m: median (spread) | RPE 1 s m | init s | "
              "frames with a pose | diverged runs | front-end ms per frame (CPU) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for d in a.e2e:
            s = json.loads((d / "summary.json").read_text())
            name = d.name.removeprefix("e2e-")
            for side, label in (("own", "its own tracker"), ("gpu_features", "gpu_features (replay)")):
                r = s.get(side)
                if not r:
                    continue
                extra = " ".join(s["sequence"].get("set", []))
                print(f"| {name} | {label}{' ' + extra if extra and side != 'own' else ''} | "
                      f"{f(r['ate_rmse_m'])} ({f(r.get('ate_rmse_spread'))}) | {f(r['rpe_m'])} | {f(r['init_s'], 2)} | "
                      f"{f(r['frames_with_pose'], 3)} | {r['diverged']} of {len(r['runs'])} | {f(r.get('frontend_ms'), 1)} |")
    if a.parity:
        print()
        print("| sequence | frames identical | features compared | VINS's FeatureTracker ms (median) |")
        print("|---|---:|---:|---:|")
        for d in a.parity:
            s = json.loads((d / "parity.json").read_text())
            name = d.name.removeprefix("parity-")
            print(f"| {name} | {s['frames_equal']} of {s['frames']} | {s['points']} | {f(s['vins_tracker_ms_median'], 1)} |")


if __name__ == "__main__":
    main()
