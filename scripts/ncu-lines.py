#!/usr/bin/env python3
"""Where a kernel's instructions and stalls go, per source line, from an `ncu` report.

On the GPU machine (kernels compiled with line information; ncu finds the sources by their
bare names in the working directory, as the NVRTC translation unit names them):

    export GPU_FEATURES_KERNEL_LINE_INFO=1
    cp kernels/*.cu kernels/common.cuh .
    ncu --set full --import-source yes -k regex:'^fast_harris$' --launch-skip 10 \\
        --launch-count 1 -f -o /tmp/fh gpu_features bench --backend cuda --sizes 1920x1080 ...
    ncu -i /tmp/fh.ncu-rep --page source --csv --print-source cuda,sass > fh.csv
    python3 scripts/ncu-lines.py fh.csv [TOP]

Prints the TOP (default 25) source lines by warp-stall samples, with their share of the
executed warp instructions and of the samples (docs/performance.md, change 19).
"""
import csv
import sys


def lines(path):
    """(instructions, stall samples, file, line, source) per source line of the CSV."""
    out, name = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0] in ("File Path", "File Name"):
                name = row[1].rsplit("/", 1)[-1]
            elif len(row) > 8 and row[0] not in ("", "Line No") and row[7] not in ("", "-"):
                try:
                    samples = int(row[4]) if row[4] not in ("", "-") else 0
                    out.append((int(row[7]), samples, name, int(row[0]), row[1].strip()))
                except ValueError:
                    continue
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = lines(sys.argv[1])
    if not rows:
        sys.exit(f"{sys.argv[1]}: no per-line metrics (was the report taken with --set full?)")
    inst = sum(r[0] for r in rows) or 1
    samples = sum(r[1] for r in rows) or 1
    print(f"{inst} warp instructions, {samples} stall samples")
    for n, s, name, line, src in sorted(rows, key=lambda r: (-r[1], -r[0]))[:top]:
        print(f"{100 * n / inst:5.1f}% inst {100 * s / samples:5.1f}% stalls  {name}:{line}  {src[:90]}")


if __name__ == "__main__":
    main()
