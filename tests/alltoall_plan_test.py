"""How a host of 4 ranks plans AllToAll over each transport, from the step
trace (GYRE_TRACE_STEPS=1) of gyre-bench's calls as the tuner chose them:

- 64 B blocks: Bruck where each message is system calls on both sides
  (TCP, UCX over tcp: its log2 n rounds beat pairwise's n-1 messages a
  rank), pairwise over shared memory, gyre's or UCX's (the messages'
  latencies overlap).
- 1 MiB blocks (4 MiB calls): pairwise, in pieces of the shared-memory
  FIFO budget over shared memory (128 KiB), of the communicator's chunk
  over TCP (GYRE_TCP_CHUNK_BYTES) and UCX with its peer failure handling
  (GYRE_UCX_ERROR_MODE=peer, "ucx-peer": 256 KiB, eager through UCX's
  buffers), and whole over UCX without it (its default here, "ucx", and
  over its tcp alone, "ucx-none"), whose large messages land in place
  (transport::kLargeInPlace: 1 MiB pieces by zero-copy rendezvous). UCX
  once got the
  shared-memory cut, for FIFOs it does not have, and so did TCP within a
  host where GYRE_TRANSPORT=auto and GYRE_SHM_DISABLE=1 (the cut was
  decided from the setting, not from the transports chosen).

Usage: alltoall_plan_test.py GYRERUN GYRE_BENCH TRANSPORT
(TRANSPORT: shm, tcp, ucx, ucx-peer, ucx-none, or auto-noshm: auto with
shared memory disabled)
"""
import json
import os
import subprocess
import sys
import tempfile

gyrerun, bench, transport = sys.argv[1:4]
ranks = 4
piece = {"shm": 128 << 10, "tcp": 256 << 10, "ucx": 1 << 20, "ucx-peer": 256 << 10, "ucx-none": 1 << 20,
         "auto-noshm": 256 << 10}[transport]
env = {"auto-noshm": ["-x", "GYRE_TRANSPORT=auto", "-x", "GYRE_SHM_DISABLE=1"],
       "ucx-none": ["-x", "GYRE_TRANSPORT=ucx", "-x", "GYRE_UCX_ERROR_MODE=none", "-x", "UCX_TLS=tcp,self"],
       "ucx-peer": ["-x", "GYRE_TRANSPORT=ucx", "-x", "GYRE_UCX_ERROR_MODE=peer"]}.get(
           transport, ["-x", "GYRE_TRANSPORT=" + transport])
# UCX by default reaches its host's peers through its shared memory (no
# system calls: pairwise), with its peer error handling or UCX_TLS=tcp,self
# through its tcp.
small_algo = "pairwise" if transport in ("shm", "ucx") else "bruck"


def calls_of(size):
    """Each rank's traced AllToAll calls of `size` bytes, with their steps."""
    with tempfile.TemporaryDirectory(prefix="gyre-a2a-") as d:
        pattern = os.path.join(d, "trace-%r.json")
        cmd = [gyrerun, "-n", str(ranks), "--timeout", "120", "-x", "GYRE_TRACE_FILE=" + pattern,
               *env, "-x", "GYRE_TRACE_STEPS=1",
               bench, "alltoall", "-b", str(size), "-e", str(size), "-n", "1", "-w", "0"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        assert p.returncode == 0, p.stdout
        out = []
        for r in range(ranks):
            with open(os.path.join(d, "trace-%d.json" % r)) as f:
                events = json.load(f)
            calls = [e for e in events if e.get("cat") == "gyre" and e["name"] == "alltoall"]
            assert calls, (r, "no AllToAll traced")
            for call in calls:
                used = {"auto-noshm": "tcp", "ucx-none": "ucx", "ucx-peer": "ucx"}.get(transport, transport)
                assert call["args"]["transports"] == used, (r, transport, call["args"]["transports"])
                end = call["ts"] + call["dur"] + 0.002
                sends = [s["args"]["bytes"] for s in events if s.get("cat") == "step" and s["name"] == "send"
                         and call["ts"] - 0.002 <= s["ts"] <= end]
                out.append((r, call["args"]["algorithm"], sends))
        return out


for r, algo, sends in calls_of(64):
    assert algo == small_algo, (r, transport, "64 B", algo)
for r, algo, sends in calls_of(4 << 20):
    assert algo == "pairwise", (r, transport, "4 MiB", algo)
    # Each of the 3 peers' 1 MiB block, in pieces of the expected size.
    assert sum(sends) == 3 << 20, (r, sum(sends))
    assert max(sends) == piece, (r, transport, sorted(set(sends)))
print("PASS: %d ranks over %s: %s at 64 B, pairwise in %d-byte pieces at 4 MiB" % (ranks, transport, small_algo, piece))
