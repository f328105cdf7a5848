"""Shared set-up for tests/.

Four simulated CPU devices for the `shard_map` tests: the flag must be set before JAX starts, which
is why these tests live here and not in the notebooks.
"""
import os

_flag = "--xla_force_host_platform_device_count=4"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
