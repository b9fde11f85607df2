"""Pairwise AllToAll's pieces on one host of 4 ranks, from the step trace
(GYRE_TRACE_STEPS=1) of gyre-bench's AllToAll of 4 MiB (1 MiB blocks):
over shared memory the host's FIFO budget cuts them to 128 KiB; over a
transport without FIFOs they are the communicator's chunk (TCP's
GYRE_TCP_CHUNK_BYTES, 256 KiB; UCX's 256 KiB, where 1 MiB pieces measured
the same and 4 MiB slower). UCX once got the shared-memory cut: 128 KiB.

Usage: alltoall_pieces_test.py GYRERUN GYRE_BENCH TRANSPORT
"""
import json
import os
import subprocess
import sys
import tempfile

gyrerun, bench, transport = sys.argv[1:4]
ranks = 4
expected = {"shm": 128 << 10, "tcp": 256 << 10, "ucx": 256 << 10}[transport]

with tempfile.TemporaryDirectory(prefix="gyre-pieces-") as d:
    pattern = os.path.join(d, "trace-%r.json")
    cmd = [gyrerun, "-n", str(ranks), "--timeout", "120", "-x", "GYRE_TRACE_FILE=" + pattern,
           "-x", "GYRE_TRANSPORT=" + transport, "-x", "GYRE_TRACE_STEPS=1", "-x", "GYRE_ALGO=alltoall:pairwise",
           bench, "alltoall", "-b", "4M", "-e", "4M", "-n", "1", "-w", "0"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    assert p.returncode == 0, p.stdout
    for r in range(ranks):
        with open(os.path.join(d, "trace-%d.json" % r)) as f:
            events = json.load(f)
        calls = [e for e in events if e.get("cat") == "gyre" and e["name"] == "alltoall"]
        assert calls and all(c["args"]["algorithm"] == "pairwise" for c in calls), calls
        for call in calls:
            end = call["ts"] + call["dur"] + 0.002
            sends = [s["args"]["bytes"] for s in events if s.get("cat") == "step" and s["name"] == "send"
                     and call["ts"] - 0.002 <= s["ts"] <= end]
            # Each of the 3 peers' 1 MiB block, in pieces of the expected size.
            assert sum(sends) == 3 << 20, (r, sum(sends))
            assert max(sends) == expected, (r, transport, sorted(set(sends)))
print("PASS: %d ranks over %s cut pieces of %d bytes" % (ranks, transport, expected))
