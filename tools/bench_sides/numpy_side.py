"""`make bench`, the NumPy side: a copy and a masked sum in plain NumPy, beside XLA's and torch's.

Only the `primitive:copy` and `primitive:masked_sum` cases: what one pass over the data costs without a
compiler or a framework on this machine (NumPy's elementwise loops are single-threaded).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench_common import serve  # noqa: E402


def build(case, data):
    name = case.split("@")[0]
    x, m = data["advantages"], data["mask"]
    if name == "primitive:copy":
        return lambda: x + 1
    if name == "primitive:masked_sum":
        return lambda: np.where(m != 0, x, 0).sum()
    raise KeyError(case)


if __name__ == "__main__":
    serve(build, lambda case: case.split("@")[0] in ("primitive:copy", "primitive:masked_sum"))
