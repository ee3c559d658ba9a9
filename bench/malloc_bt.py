#!/usr/bin/env python3
"""bench/malloc_bt.py — aggregates the stacks bench/malloc_count.c writes in
backtrace mode (BENCH_MALLOC_BT=FILE): prints the most frequent call sites,
skipping the shim's own frames and the allocator entry points.

usage: bench/malloc_bt.py FILE [DEPTH]   (DEPTH frames per site, default 4)"""
import collections
import os
import re
import subprocess
import sys

SKIP = re.compile(r"malloc_count|\((malloc|calloc|realloc|posix_memalign|memalign|aligned_alloc|valloc)\+")


_names = {}


def resolve(binary, offset):
    """addr2line for frames backtrace_symbols could not name (static functions,
    a statically linked libcstream.a): offset is relative to the module base."""
    key = (binary, offset)
    if key not in _names:
        name = "+" + offset
        if os.path.exists(binary):
            try:
                # a return address: the call is the instruction before it
                out = subprocess.run(["addr2line", "-f", "-e", binary, hex(int(offset, 16) - 1)],
                                     capture_output=True, text=True, timeout=10).stdout.split("\n")
                if out and out[0] and out[0] != "??":
                    name = out[0]
            except (OSError, subprocess.SubprocessError, ValueError):
                pass
        _names[key] = name
    return _names[key]


def frame(line):
    # "binary(func+0x12)[0xaddr]" -> "func (binary)"; "binary(+0x12)" -> addr2line
    m = re.match(r"(.*?)\((.*?)\)\s*\[(.*?)\]", line)
    if not m:
        return line.strip()
    binary, sym, addr = m.groups()
    if sym.startswith("+"):
        name = resolve(binary, sym[1:])
    else:
        name = sym.split("+")[0] if sym else addr
    return "%s (%s)" % (name, binary.rsplit("/", 1)[-1])


def main():
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    sites = collections.Counter()
    total = 0
    stack = []
    for line in open(sys.argv[1], errors="replace"):
        if line.startswith("--"):
            frames = [frame(l) for l in stack if not SKIP.search(l)]
            sites[" <- ".join(frames[:depth])] += 1
            total += 1
            stack = []
        else:
            stack.append(line)
    for site, n in sites.most_common(30):
        print("%6.2f%%  %s" % (100.0 * n / total, site))
    print("%d samples" % total)


if __name__ == "__main__":
    main()
