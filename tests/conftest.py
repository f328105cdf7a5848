"""Shared set-up for tests/.

Four simulated CPU devices for the `shard_map` tests: the flag must be set before JAX starts, which
is why these tests live here and not in the notebooks.
"""
import os

_flag = "--xla_force_host_platform_device_count=4"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the flag above)
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="module")
def ref(request):
    """The frozen outputs of a reference framework, from the .npz named by the test module's FIXTURE."""
    with np.load(request.module.FIXTURE) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def mesh():
    """A one-axis mesh ("dp") over the four simulated CPU devices (a test module may define its own)."""
    from jax.sharding import Mesh

    devices = jax.devices()
    assert len(devices) >= 4, f"expected 4 CPU devices from XLA_FLAGS, got {len(devices)}"
    return Mesh(np.array(devices[:4]), ("dp",))


@pytest.fixture
def x64():
    """Run the test with float64 enabled in JAX (the oracles computed in float64)."""
    with jax.enable_x64(True):
        yield
