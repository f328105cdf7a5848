"""Policy-loss conformance adapter for AReaL 1.0.4: its M2PO mask (`_apply_m2po_masking`) on the shared inputs.

Runs in the `areal` environment of tools/refenvs.py (torch 2.13.0 CPU and `areal==1.0.4` with --no-deps). The
module that holds the M2PO functions, areal/trainer/ppo/actor.py, imports AReaL's whole training stack (engines,
RPC, hydra configs) at its top, none of which the two functions use. So the adapter reads that installed file,
takes the two function definitions from its syntax tree (`ast`) and executes them, unchanged, in a namespace that
holds `torch`: AReaL's own code, from the wheel, without its imports. Nothing is copied into this repository.

    <areal-python> tools/conformance_adapters/policyloss/areal_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import ast
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import torch

from _common import Recorder, load_inputs

VERSION = version("areal")
assert VERSION == "1.0.4", VERSION
SOURCE = Path(find_spec("areal").submodule_search_locations[0]) / "trainer" / "ppo" / "actor.py"
tree = ast.parse(SOURCE.read_text())
wanted = {"_apply_m2po_masking", "_get_m2po_loss_mask"}
module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted], type_ignores=[])
assert {n.name for n in module.body} == wanted, "the M2PO functions moved"
areal = {"torch": torch}
exec(compile(module, str(SOURCE), "exec"), areal)
rec = Recorder("areal", f"AReaL {VERSION}")
FN = "areal/trainer/ppo/actor.py:_apply_m2po_masking"

for case, x in load_inputs(sys.argv[1]).items():
    for tau in (0.3, 0.1, 0.02, 1e-9):
        def run(tau=tau):
            out = areal["_apply_m2po_masking"](torch.tensor(x["behavior"]), torch.tensor(x["old"]),
                                               torch.tensor(x["mask"] > 0), tau)
            rec.put(case, "mask", out.float(), FN, f"old_logp = behaviour log-probs, prox_logp = old log-probs, "
                    f"m2_threshold={tau}", loss="m2po_mask", tau=tau)
        rec.attempt(f"{case}: m2po {tau}", run)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__, source=str(SOURCE.relative_to(SOURCE.parents[3]))))
print(f"[areal] {len(rec.records)} outputs, {len(rec.failed)} failures")
