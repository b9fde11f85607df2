"""GYRE_TRACE_FILE: gyre-bench's calls under gyrerun, 3 ranks, one trace per
rank; each file is a JSON array (Chrome's Trace Event Format) whose events
are the calls made, named, with bytes, type, algorithm, transport and
result, on a row named after the communicator. With "steps"
(GYRE_TRACE_STEPS=1) every AllReduce also holds its plan's steps, nested
inside it: named, with peers and bytes; without it there are none.

Usage: trace_test.py GYRERUN GYRE_BENCH TRANSPORT [steps]
"""
import json
import os
import subprocess
import sys
import tempfile

gyrerun, bench, transport = sys.argv[1:4]
steps = sys.argv[4:5] == ["steps"]
ranks = 3
STEP_NAMES = {"copy", "reduce", "send", "recv", "recv-reduce", "recv-reduce-send", "recv-reduce-copy-send",
              "recv-copy-send", "copy-send", "send-addresses", "recv-addresses", "read-copy", "read-reduce"}


def check_steps(r, call, inside):
    """The steps of one call: within its span, on its row, each a known
    primitive whose peers are other ranks and whose messages carry bytes."""
    assert inside, ("a call without steps", call)
    eps = 0.002  # the microseconds' printed precision
    for s in inside:
        a = s["args"]
        assert s["name"] in STEP_NAMES, s
        assert s["ts"] >= call["ts"] - eps and s["ts"] + s["dur"] <= call["ts"] + call["dur"] + eps, (s, call)
        assert s["dur"] >= 0 and a["lane"] == 0 and s["tid"] == call["tid"], s
        for side in ("from", "to"):
            if side in a:
                assert 0 <= a[side] < ranks and a[side] != r, s
        if s["name"].startswith(("send", "recv")) or s["name"].endswith("send"):
            assert "from" in a or "to" in a, s
            assert a["bytes"] > 0, s
    # Within one lane the steps follow each other in the plan's order.
    order = [s["args"]["step"] for s in sorted(inside, key=lambda s: s["ts"])]
    assert order == sorted(order), order

with tempfile.TemporaryDirectory(prefix="gyre-trace-") as d:
    pattern = os.path.join(d, "trace-%r.json")
    cmd = [gyrerun, "-n", str(ranks), "--timeout", "120", "-x", "GYRE_TRACE_FILE=" + pattern,
           "-x", "GYRE_TRANSPORT=" + transport, "-x", "GYRE_TRACE_STEPS=" + ("1" if steps else "0"), bench, "allreduce", "-b", "1K", "-e", "64K",
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
        calls = [e for e in calls if e.get("cat") == "gyre"]
        seqs = [e["args"]["seq"] for e in calls]
        assert seqs == sorted(seqs), "calls out of order"
        step_events = [e for e in events if e.get("cat") == "step"]
        if not steps:
            assert not step_events, step_events[:3]
            continue
        for call in allreduces:
            end = call["ts"] + call["dur"] + 0.002
            inside = [s for s in step_events if s["tid"] == call["tid"] and call["ts"] - 0.002 <= s["ts"] <= end]
            check_steps(r, call, inside)
        print("rank %d: %d steps in %d allreduces" % (r, len(step_events), len(allreduces)))
print("PASS: %d traces over %s%s" % (ranks, transport, " with steps" if steps else ""))
