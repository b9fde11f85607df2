"""GYRE_TRACE_FILE: gyre-bench's calls under gyrerun, 3 ranks, one trace per
rank; each file is a JSON array (Chrome's Trace Event Format) whose events
are the calls made, named, with bytes, type, algorithm, transport and
result, on a row named after the communicator.

Usage: trace_test.py GYRERUN GYRE_BENCH TRANSPORT
"""
import json
import os
import subprocess
import sys
import tempfile

gyrerun, bench, transport = sys.argv[1:4]
ranks = 3
with tempfile.TemporaryDirectory(prefix="gyre-trace-") as d:
    pattern = os.path.join(d, "trace-%r.json")
    cmd = [gyrerun, "-n", str(ranks), "--timeout", "120", "-x", "GYRE_TRACE_FILE=" + pattern,
           "-x", "GYRE_TRANSPORT=" + transport, bench, "allreduce", "-b", "1K", "-e", "64K",
           "-f", "8", "-n", "3", "-w", "1"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    assert p.returncode == 0, p.stdout
    files = sorted(os.listdir(d))
    assert files == ["trace-%d.json" % r for r in range(ranks)], files
    for r in range(ranks):
        with open(os.path.join(d, "trace-%d.json" % r)) as f:
            events = json.load(f)  # a valid JSON array, closed at exit
        rows = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        assert rows and rows[1].startswith("comm 1: rank %d of %d" % (r, ranks)), rows
        calls = [e for e in events if e.get("ph") == "X"]
        allreduces = [e for e in calls if e["name"] == "allreduce" and e["args"]["bytes"] >= 1024]
        # 1K, 8K, 64K: one warm-up and 3 timed calls each at least.
        assert len(allreduces) >= 12, (len(allreduces), calls[:3])
        sizes = sorted({e["args"]["bytes"] for e in allreduces})
        assert sizes == [1024, 8192, 65536], sizes
        for e in allreduces:
            a = e["args"]
            assert e["pid"] == r and e["dur"] >= 0 and e["ts"] > 0, e
            assert a["result"] == "ok" and a["dtype"] == "float32" and a["algorithm"], e
            assert a["transports"] == transport, e
        seqs = [e["args"]["seq"] for e in calls]
        assert seqs == sorted(seqs), "calls out of order"
print("PASS: %d traces over %s" % (ranks, transport))
