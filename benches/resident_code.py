#!/usr/bin/env python3
"""Where an echo server's resident code comes from (PERFORMANCE.md,
twenty-first session).

    benches/resident_code.py PATH [CALLS]

Runs PATH (a build of examples/echo) on stdio, makes CALLS `tools/call`
echo calls (default 10,000; 32 in flight), then prints its peak RSS, its
resident pages by mapping (/proc/PID/smaps), and the resident pages of its
code attributed to crates by the symbols they hold (/proc/PID/pagemap, read
as root; `nm` for the symbols). A page shared by functions of several
crates counts for each by the bytes it holds of them.
"""
import bisect
import collections
import json
import os
import re
import struct
import subprocess
import sys

CALL = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":'
        '{"name":"echo","arguments":{"message":"hello world"}}}\n')
INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
        '"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}\n'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
CRATE = re.compile(r"(?:<)?(?:&)?(?:dyn )?([A-Za-z_][A-Za-z0-9_]*)")


def drive(server, calls, in_flight=32):
    server.stdin.write(INIT.encode())
    server.stdin.flush()
    server.stdout.readline()
    sent = 0
    while sent < min(in_flight, calls):
        sent += 1
        server.stdin.write((CALL % sent).encode())
    server.stdin.flush()
    for _ in range(calls):
        if not server.stdout.readline():
            sys.exit("the server closed its output")
        if sent < calls:
            sent += 1
            server.stdin.write((CALL % sent).encode())
            server.stdin.flush()


def code_by_crate(pid, path):
    symbols = []
    nm = subprocess.run(["nm", "-S", "-C", path], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "tT":
            symbols.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    symbols.sort()
    starts = [s[0] for s in symbols]
    base, ranges = None, []
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        if len(parts) > 5 and parts[5] == os.path.realpath(path):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if base is None:
                base = start - int(parts[2], 16)
            if "x" in parts[1]:
                ranges.append((start, end))
    crates, pages = collections.Counter(), 0
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end in ranges:
            for page in range(start, end, 4096):
                pagemap.seek(page // 4096 * 8)
                if not struct.unpack("<Q", pagemap.read(8))[0] >> 63:
                    continue
                pages += 1
                lo, hi = page - base, page - base + 4096
                i = max(bisect.bisect_right(starts, lo) - 1, 0)
                while i < len(symbols) and symbols[i][0] < hi:
                    at, size, name = symbols[i]
                    overlap = min(hi, at + size) - max(lo, at)
                    if overlap > 0:
                        m = CRATE.match(name)
                        crates[m.group(1) if m else "?"] += overlap
                    i += 1
    return pages * 4, {k: round(v / 1024) for k, v in crates.most_common(20)}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    server = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        drive(server, calls)
        status = open(f"/proc/{server.pid}/status").read()
        kib = {k: int(re.search(k + r":\s+(\d+)", status).group(1))
               for k in ("VmHWM", "RssAnon", "RssFile")}
        mappings, current = collections.Counter(), None
        for line in open(f"/proc/{server.pid}/smaps"):
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = os.path.basename(parts[5]) if len(parts) > 5 else "[anon]"
                current = f"{name} {parts[1]}"
            elif line.startswith("Rss:") and current:
                mappings[current] += int(line.split()[1])
        code, crates = code_by_crate(server.pid, path)
        print(json.dumps({
            "KiB": kib,
            "resident KiB by mapping": dict(mappings.most_common(12)),
            "resident code KiB": code,
            "resident code KiB by crate": crates,
        }, indent=1))
    finally:
        server.stdin.close()
        server.wait()


if __name__ == "__main__":
    main()
