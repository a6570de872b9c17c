#!/usr/bin/env python3
"""Registers, stack frame (spills show here) and static shared memory of every kernel in a
CUBIN, read from its ELF sections (no CUDA needed): `.text.<kernel>`'s sh_info is the
kernel's symbol, `.nv.info` holds per symbol EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE
(0x11) records, `.nv.shared.<kernel>` is the kernel's static shared memory.

    GF_DUMP_CUBIN=/tmp LD_LIBRARY_PATH=$(bash scripts/setup-nvrtc.sh) \\
        cargo test --release --lib kernels_compile_with_nvrtc
    python3 scripts/cubin-regs.py /tmp/kernels-sm_90.cubin
"""
import struct
import sys


def sections(data):
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    for h in hdrs:
        end = names.index(b"\0", h[0])
        yield names[h[0]:end].decode(), h


def attributes(blob):
    """{attr: {symbol: value}} of the (symbol, value) records of an .nv.info section."""
    out, i = {}, 0
    while i + 4 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size, then the payload
            (size,) = struct.unpack_from("<H", blob, i + 2)
            if size == 8:
                sym, val = struct.unpack_from("<II", blob, i + 4)
                out.setdefault(attr, {})[sym] = val
            i += 4 + size
        else:
            i += 4
    return out


def main(path):
    data = open(path, "rb").read()
    syms, shared, info = {}, {}, {}
    for name, h in sections(data):
        if name.startswith(".text."):
            syms[name[6:]] = h[7]
        elif name.startswith(".nv.shared."):
            shared[name[11:]] = h[5]
        elif name == ".nv.info":
            info = attributes(data[h[4]:h[4] + h[5]])
    regs, frame = info.get(0x2F, {}), info.get(0x11, {})
    print(f"{'kernel':24} {'regs':>5} {'frame B':>8} {'shared B':>9}")
    for k in sorted(syms):
        s = syms[k]
        print(f"{k:24} {regs.get(s, -1):5} {frame.get(s, -1):8} {shared.get(k, 0):9}")


if __name__ == "__main__":
    main(sys.argv[1])
