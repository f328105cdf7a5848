"""Advantage-frontier conformance adapter for AReaL 1.0.4: its reward normalisation (`Normalization`) on the shared inputs.

Runs in the `areal` environment of tools/refenvs.py (torch 2.13.0 CPU and `areal==1.0.4` with --no-deps: the wheel
pins torch < 2.11 and an agent stack none of this uses). `Normalization` lives in areal/utils/data.py, whose imports
(einops, torchdata, AReaL's platform and sequence-packing modules) are not installed and not used by it. So the
adapter reads that installed file, takes the class definition from its syntax tree (`ast`) and executes it,
unchanged, in a namespace that holds torch, NumPy and torch.distributed (not initialised: one process). AReaL's own
code, from the wheel; nothing is copied into this repository. `NormConfig` is given as a namespace with the fields
the class reads (mean_level, mean_leave1out, std_level, std_unbiased, eps, group_size).

    <areal-python> tools/conformance_adapters/advantages/areal_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import ast
import sys
import types
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import Recorder, load_inputs  # noqa: E402

VERSION = version("areal")
assert VERSION == "1.0.4", VERSION
SOURCE = Path(find_spec("areal").submodule_search_locations[0]) / "utils" / "data.py"
tree = ast.parse(SOURCE.read_text())
module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Normalization"],
                    type_ignores=[])
assert len(module.body) == 1, "Normalization moved"
areal = {"torch": torch, "np": np, "dist": dist, "NormConfig": object}
exec(compile(module, str(SOURCE), "exec"), areal)
rec = Recorder("areal", f"AReaL {VERSION}")
FN = "areal/utils/data.py:Normalization"

for case, x in load_inputs(sys.argv[1]).items():
    G = int(x["G"])
    if not G:
        continue  # AReaL groups contiguous blocks of `group_size` rows only
    for ml in ("batch", "group", None):
        for sl in ("batch", "group", None):
            for loo in (False, True):
                for unbiased in (True, False):
                    if not unbiased and (ml, sl, loo) != ("group", "batch", False):
                        continue
                    def run(ml=ml, sl=sl, loo=loo, unbiased=unbiased):
                        cfg = types.SimpleNamespace(mean_level=ml, mean_leave1out=loo, std_level=sl,
                                                    std_unbiased=unbiased, eps=1e-5, group_size=G)
                        out = areal["Normalization"](cfg)(torch.tensor(x["rewards"]))
                        rec.put(case, "levels", out[:, None] * torch.tensor(x["mask"]), FN,
                                f"NormConfig(mean_level={ml!r}, mean_leave1out={loo}, std_level={sl!r}, "
                                f"std_unbiased={unbiased}, eps=1e-5, group_size={G}) on the [B] rewards, "
                                "high_precision=True (float64 statistics), shown at the kept tokens",
                                mean_level=ml or "none", std_level=sl or "none", leave1out=loo, unbiased=unbiased)
                    rec.attempt(f"{case}: {ml}/{sl}/{loo}/{unbiased}", run)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__, source=str(SOURCE.relative_to(SOURCE.parents[2]))))
print(f"[areal] {len(rec.records)} outputs, {len(rec.failed)} failures")
