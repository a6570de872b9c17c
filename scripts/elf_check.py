#!/usr/bin/env python3
"""Checks an ELF executable for a target system (scripts/package-jetson.sh): its machine,
the highest GLIBC_x.y symbol version it needs (at most --max-glibc), and that every shared
library it needs is one of glibc's or libgcc_s (what every Linux system has).

  python3 scripts/elf_check.py --machine AArch64 --max-glibc 2.31 bin/gpu_features

Prints 'glibc needed: X.Y (limit L)' and 'needs: lib1 lib2 ...'; exits 1 naming what fails.
Reads the file with binutils' readelf (any architecture).
"""
import argparse
import re
import subprocess
import sys

SYSTEM_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libgcc_s.so.1", "ld-linux-aarch64.so.1", "ld-linux-x86-64.so.2",
}


def readelf(args, path):
    return subprocess.run(["readelf", *args, path], check=True, capture_output=True,
                          text=True).stdout


def version(s):
    return tuple(int(x) for x in s.split("."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machine", required=True, help="readelf's Machine, e.g. AArch64")
    ap.add_argument("--max-glibc", required=True)
    ap.add_argument("elf")
    a = ap.parse_args()
    header = readelf(["-h"], a.elf)
    m = re.search(r"Machine:\s+(.*)", header)
    machine = m.group(1).strip() if m else "?"
    errors = []
    if a.machine not in machine:
        errors.append(f"machine is {machine!r}, not {a.machine}")
    needed_versions = set(re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", readelf(["-V"], a.elf)))
    top = max(needed_versions, key=version) if needed_versions else "none"
    if needed_versions and version(top) > version(a.max_glibc):
        newer = sorted((v for v in needed_versions if version(v) > version(a.max_glibc)), key=version)
        errors.append(f"needs glibc {top} > {a.max_glibc} (symbol versions {', '.join(newer)})")
    libs = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", readelf(["-d"], a.elf))
    extra = [lib for lib in libs if lib not in SYSTEM_LIBS]
    if extra:
        errors.append(f"needs shared libraries beyond glibc: {', '.join(extra)}")
    print(f"glibc needed: {top} (limit {a.max_glibc})")
    print(f"needs: {' '.join(libs)}")
    print(f"machine: {machine}")
    if errors:
        sys.exit(f"elf_check {a.elf}: " + "; ".join(errors))


if __name__ == "__main__":
    main()
