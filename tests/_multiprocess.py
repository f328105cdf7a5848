"""Launch a child script in several real processes joined by `jax.distributed.initialize` on 127.0.0.1.

Used by the tests that need real CPU collectives across processes (gloo). Each child is started as
`python child.py PORT PROCESS_ID PAYLOAD` with JAX on the CPU and no simulated devices, so every
process owns one device. A child reports by printing one line `RESULT <json>` with a `"pid"` key.
The launcher bounds the whole run by one deadline and kills every child it started, whatever happens.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The first lines of every child: CPU collectives and the coordinator on 127.0.0.1.
PREAMBLE = """
import json, sys
import numpy as np
import jax
# gloo is already the default CPU collectives implementation in jax 0.10.2; set it explicitly anyway
jax.config.update("jax_cpu_collectives_implementation", "gloo")
PORT, PID, NPROC = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PAYLOAD = json.loads(sys.argv[4])
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{PORT}", num_processes=NPROC, process_id=PID,
                           initialization_timeout=30)
assert jax.process_count() == NPROC and jax.local_device_count() == 1
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(child: str, payload, tmp_path: Path, nproc: int = 2, timeout: float = 90.0) -> dict:
    """Run `PREAMBLE + child` in `nproc` processes; return {pid: the dict each printed after RESULT}.

    Fails (AssertionError) when a child exits non-zero, prints no RESULT line, or the deadline passes;
    every child is killed before returning or raising.
    """
    script = tmp_path / "child.py"
    script.write_text(PREAMBLE + child)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    port = free_port()
    text = json.dumps(payload)
    procs = [subprocess.Popen([sys.executable, str(script), str(port), str(i), str(nproc), text], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(nproc)]
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(deadline - time.monotonic(), 1.0))
            outputs.append(out)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the {nproc} processes did not finish within {timeout} s") from e
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    results = {}
    for out in outputs:
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert lines, out[-3000:]
        r = json.loads(lines[-1][len("RESULT "):])
        results[r["pid"]] = r
    assert set(results) == set(range(nproc)), sorted(results)
    return results
