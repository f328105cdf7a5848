"""Frontier conformance adapter for AReaL 1.0.4 (tools/conformance_frontier.py): its DAPO overlong penalty.

Runs in the `areal` environment of tools/refenvs.py (torch 2.13.0 CPU and `areal==1.0.4` with --no-deps). The module
areal/utils/functional/functional.py imports more of AReaL than `reward_overlong_penalty` uses, so, as in
tools/conformance_adapters/policyloss/areal_adapter.py, the function's definition is taken from the installed file's
syntax tree (`ast`) and executed, unchanged, in a namespace holding `torch` and `Any`. The rewards are recorded after
the call; the response length is the loss mask's row sum, as AReaL reads it.

    <areal-python> tools/conformance_adapters/frontier/areal_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import ast
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import torch

from _common import Recorder, load_inputs

VERSION = version("areal")
assert VERSION == "1.0.4", VERSION
SOURCE = Path(find_spec("areal").submodule_search_locations[0]) / "utils" / "functional" / "functional.py"
tree = ast.parse(SOURCE.read_text())
module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "reward_overlong_penalty"],
                    type_ignores=[])
assert len(module.body) == 1, "reward_overlong_penalty moved"
areal = {"torch": torch, "Any": Any}
exec(compile(module, str(SOURCE), "exec"), areal)
rec = Recorder("areal", f"AReaL {VERSION}")
FN = "areal/utils/functional/functional.py:reward_overlong_penalty"

for case, x in load_inputs(sys.argv[1]).items():
    for L, buf, fac in x["overlong"]:
        def run(L=int(L), buf=int(buf), fac=float(fac)):
            data = dict(rewards=torch.tensor(x["rewards"]), input_ids=torch.tensor(x["tokens"]),
                        loss_mask=torch.tensor(x["mask"] > 0))
            out = areal["reward_overlong_penalty"](data, overlong_tokens=buf, overlong_penalty_factor=fac,
                                                   max_response_length=L)
            rec.put(case, "overlong_reward", out["rewards"], FN,
                    f"overlong_tokens={buf}, overlong_penalty_factor={fac}, max_response_length={L}; loss_mask = the "
                    "response mask; rewards after the call", max_response_length=L, overlong_buffer_len=buf,
                    overlong_penalty_factor=fac)
        rec.attempt(f"{case}: overlong {L}", run)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__, source=str(SOURCE.relative_to(SOURCE.parents[3]))))
print(f"[areal] {len(rec.records)} outputs, {len(rec.failed)} failures")
