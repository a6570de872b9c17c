#!/usr/bin/env python3
"""Splits each frame's round trip (gpu_features_load -> the node or relay -> back) into its
three parts, from the traces the processes write with GF_TRACE_DIR=DIR (src/ros/trace.rs):

  in    the load's publish -> the node's take (serialisation, the middleware, the wake-up of
        the node's spinning thread, the take)
  node  the take -> the keypoints published (the relay: -> its answer published)
  out   -> the answer's arrival in the load (the middleware back, the load's executor);
        "published" is when the publishing call returned, and the answer can arrive a few
        tens of microseconds before that: this part can be slightly negative

All instants are CLOCK_MONOTONIC, one clock for the processes of a host. Joined by header
stamp: DIR/load-<input>.tsv with DIR/node-<input>.tsv (or relay-<input>.tsv).

  scripts/trace_split.py DIR [--label TEXT] [--check]

prints one markdown row per input (p50 / p99 in ms), then, where several inputs' frames
share a stamp (cameras triggered together), when the node took the first, second, ... of
them after the first was sent. --check exits 1 unless every answered frame of the load has
the node's row, each frame was taken after it was sent and answered after it was taken
(instants from different clocks would break this).
"""
import argparse
import glob
import os
import sys


def read(path):
    with open(path) as f:
        head = f.readline().split()
        rows = {}
        for line in f:
            v = [int(x) for x in line.split()]
            rows[v[0]] = v[1:]
    return head, rows


def pct(v, q):
    if not v:
        return float("nan")
    s = sorted(v)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--label", default="")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    loads = sorted(glob.glob(os.path.join(a.dir, "load-*.tsv")))
    if not loads:
        print(f"trace_split: no load-*.tsv in {a.dir}", file=sys.stderr)
        return 1
    ok = True
    joined = {}  # input -> {stamp: (sent, received, published)}
    print(f"| {a.label or 'trace'}: input | by | frames | in p50 / p99 | node p50 / p99 | "
          "out p50 / p99 | round trip p50 / p99 (ms) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for lp in loads:
        inp = os.path.basename(lp)[len("load-"):-len(".tsv")]
        peer = None
        for who in ("node", "relay"):
            p = os.path.join(a.dir, f"{who}-{inp}.tsv")
            if os.path.exists(p):
                peer = (who, p)
                break
        if peer is None:
            print(f"trace_split: no node-{inp}.tsv or relay-{inp}.tsv", file=sys.stderr)
            ok = False
            continue
        _, load = read(lp)
        _, other = read(peer[1])
        parts = {"in": [], "node": [], "out": [], "rt": []}
        joined[inp] = {}
        missing = negative = 0
        for stamp, (sent, answered) in load.items():
            if stamp not in other:
                missing += 1
                continue
            received, published = other[stamp]
            joined[inp][stamp] = (sent, received, published)
            p = (received - sent, published - received, answered - published)
            negative += p[0] < 0 or p[1] + p[2] < 0
            for k, x in zip(("in", "node", "out"), p):
                parts[k].append(x / 1e6)
            parts["rt"].append((answered - sent) / 1e6)
        cell = lambda k: f"{pct(parts[k], 50):.3f} / {pct(parts[k], 99):.3f}"
        print(f"| {inp} | {peer[0]} | {len(parts['rt'])} | {cell('in')} | {cell('node')} | "
              f"{cell('out')} | {cell('rt')} |")
        if missing or negative or not parts["rt"]:
            print(f"trace_split: {inp}: {len(load)} answered frames, {missing} without the "
                  f"{peer[0]}'s row, {negative} taken before sent or answered before taken", file=sys.stderr)
            ok = False
    bursts(joined)
    return 0 if ok or not a.check else 1


def bursts(joined, within_ns=1_000_000):
    """The frames several inputs sent within 1 ms under one stamp: the k-th take after the
    first send (p50 over such stamps), which shows whether the node takes a burst's frames
    as they arrive or one after the other, and the node part (taken -> published) of the
    k-th frame taken (p50 / p99), which shows which of a burst's frames pays for the
    others."""
    if len(joined) < 2:
        return
    common = set.intersection(*(set(j) for j in joined.values()))
    takes = [[] for _ in joined]
    parts = [[] for _ in joined]
    for stamp in common:
        rows = [j[stamp] for j in joined.values()]
        first = min(r[0] for r in rows)
        if max(r[0] for r in rows) - first > within_ns:
            continue
        for k, (_, received, published) in enumerate(sorted(rows, key=lambda r: r[1])):
            takes[k].append((received - first) / 1e6)
            parts[k].append((published - received) / 1e6)
    if takes[0]:
        print(f"\n{len(takes[0])} stamps sent by all {len(joined)} inputs within 1 ms; "
              "1st, 2nd, ... frame taken after the first send, p50 ms: "
              + ", ".join(f"{pct(t, 50):.3f}" for t in takes)
              + "; its node part, p50 / p99 ms: "
              + ", ".join(f"{pct(t, 50):.3f} / {pct(t, 99):.3f}" for t in parts) + "\n")


if __name__ == "__main__":
    sys.exit(main())
