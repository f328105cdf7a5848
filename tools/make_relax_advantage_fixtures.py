"""Freeze Relax's reward normalisers and advantage estimators on inputs drawn here: tests/fixtures/advantages_relax.npz.

Relax (redai-infra/Relax) is not on the package index and cannot be cloned here. At REVISION its group advantages
are computed in two files: relax/algorithms/rewards.py (rollout side: GRPO's group mean/std, Dr.GRPO's centring, the
REINFORCE++-baseline group mean, RLOO's leave-one-out, GDPO steps 1 and 2) and relax/algorithms/advantages.py (trainer
side: GDPO step 3, the per-training-batch whitening, and the per-token REINFORCE++ / REINFORCE++-baseline estimators).
Both import other Relax modules at their top (relax.algorithms.numerics, relax.algorithms.spec,
relax.utils.logging_utils, relax.utils.training.ppo_utils), so neither can be executed whole outside a Relax install.

This script takes as first argument either the git directory of a Relax checkout (each file is then read with
`git --git-dir D show REV:path` at its own revision, FILES below) or a directory holding the four texts as
`rewards.py`, `advantages.py`, `numerics.py`, `ppo_utils.py`. From each file's syntax tree (`ast`) it takes the
top-level definitions it needs (FILES[...]["definitions"]: functions and module-level assignments), checks the text's
length and the sha256 of those definitions' source text (the concatenation, in file order, of
`ast.get_source_segment(text, node)`, UTF-8), checks that none is decorated, and executes them unchanged
(`compile(..., dont_inherit=True)`) in one fresh module namespace per file. It runs in the `trl` environment of
tools/refenvs.py (torch 2.13.0):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_relax_advantage_fixtures.py /tmp/relax_adv

What each namespace holds, as the file's own imports would give it:

* the names the file imports from the standard library and torch (`math`, `Real`, `Any`, `Callable`, `torch`,
  `dist` = torch.distributed);
* the names it imports from the other two Relax files run here, bound to the objects those files' executed
  definitions made (numerics: `GDPO_EPS`, `STD_EPS`, `collapsed_columns`, `is_collapsed`, `distributed_mean_std`;
  ppo_utils: `compute_rloo_leave_one_out_rewards`, `get_grpo_returns`, `get_reinforce_plus_plus_returns`,
  `get_reinforce_plus_plus_baseline_advantages`); the script checks that each is named in the file's own
  `from relax... import` statement;
* `get_logger` = `logging.getLogger` (stand-in for relax.utils.logging_utils.get_logger, whose only use here is
  `logger = get_logger(__name__)`; numerics logs one info line on the first batch statistic, rewards.py warns when
  every GDPO group of a batch is silent: logging only, no value depends on it).

Two other stand-ins, both for objects outside these files:

* `Sample` (relax's rollout sample): an object with `group_index` and, for GDPO, `get_reward_components(keys)`
  returning that sample's component values in the order of `keys` (Python floats). That is all the functions run
  here read of a sample;
* `megatron.core.mpu`, imported inside `get_reinforce_plus_plus_returns`: only its
  `get_context_parallel_world_size()` is called, and it returns 1 (one process, no context parallelism, which is
  the truth here); modules `megatron` / `megatron.core` are put in `sys.modules` for that call only (the script
  refuses to run if a `megatron` is already imported), so the context-parallel branches are not taken.

Revisions. rewards.py and advantages.py are read at REVISION (redai-infra/Relax). The index this project can read
holds relax/algorithms/numerics.py of redai-infra/Relax only at NUMERICS_REVISION and relax/utils/training/
ppo_utils.py of redai-infra/Relax not at REVISION (its stored redai-infra versions predate
`compute_rloo_leave_one_out_rewards`, which rewards.py imports). The numerics file is therefore taken at
NUMERICS_REVISION (its docstrings name `advantages._agree_on_segmentation`, which exists at REVISION), and ppo_utils
at PPO_UTILS_REVISION of redai-studio/Relax, the text tools/make_relax_ppo2_fixtures.py already runs. Whether these
two files equal their state at REVISION is not verified. Of the four ppo_utils definitions run here, three
(`get_grpo_returns`, `compute_rloo_leave_one_out_rewards`, `get_reinforce_plus_plus_baseline_advantages`) read the
same (up to a type annotation) in the newest stored ppo_utils version whose signatures match advantages.py at
REVISION; `get_reinforce_plus_plus_returns` there computes the same returns with a float64 reverse cumulative sum
instead of this float32 loop (a round-off difference).

Nothing of Relax is copied into this repository: the outputs go to the fixture, with the revisions, the files, the
definitions, their sha256 and the settings in the .json next to it.

Inputs (drawn by the torch-free `make_inputs` with a fixed seed, stored under in/<case>/<name>; rewards float32,
group ids (Relax's `Sample.group_index`) and response lengths int32):

* single-reward cases `g2`, `g3`, `g5`, `g8` (Relax requires every group of a batch to have exactly
  `n_samples_per_prompt` samples, so one case per group size 2, 3, 5, 8): groups of equal rewards, binary and
  non-dyadic (0 x 2, 0.9 x 2, 0.9 x 3, 0.6 x 5, 0.1 x 8: the float32 mean of some is not the reward), partial ties,
  non-binary rewards (uniform on [0, 10], rewards in the hundreds), a near-degenerate group (spread ~1e-3, where
  the epsilon of the standard deviation matters); in `g5` the groups are interleaved (ids not contiguous);
* GDPO cases `m4` (G 4, 6 groups) and `m8` (G 8, 3 groups): rewards [B, 3], components (correct, format, length),
  with a column flat within a group, a group flat in every column (combined 0), a group whose first two columns
  sum to 1 (they cancel under equal weights: Relax's noise floor returns exact zeros), a length column of spread
  ~1e-3 (GDPO_EPS = 1e-4 moves it by ~10%), response lengths [B] for the per-token broadcast;
* REINFORCE++ case `r` (B 8, T 9, G 4): rewards [B], kl [B, T] (k1 values; masked positions hold large values that
  must not count), mask [B, T] with interior holes, masked positions inside a response after its last valid token,
  and a fully masked response; lengths [B] (Relax's per-response tensors are `x[i, :lengths[i]]`).

Recorded (key relax/<case>/<kind>[/<param>=<v>...], float64 copies of Relax's outputs):

* `grpo_adv`: `normalize_group_mean_std` with grpo_std_normalization True (per sample); `drgrpo_adv`: the same with
  False (Dr.GRPO, `--disable-grpo-std-normalization`); `rloo_adv`: `normalize_group_leave_one_out`; cases g2, g3,
  g5, g8;
* `gdpo_combined` (param w): `normalize_gdpo_decoupled` (GDPO steps 1 and 2, per sample, float64), w = `none`
  (every weight 1.0) or `1,0.5,2`; `gdpo_adv` (params segments, w): `advantage_gdpo` fed those combined rewards
  (as production does, through the float32 `rewards` column), kl[i] = zeros(lengths[i]), mini_batch_sizes the
  segments (`24` or two training batches `12,12` / `8,16`); per-token, the responses concatenated; cases m4, m8;
* `rpp_returns` (params gamma, kl_coef): `advantage_reinforce_plus_plus`, per token (responses concatenated, each
  `[:lengths[i]]`); `rpp_baseline_reward`: `normalize_group_mean` (per sample); `rpp_baseline_adv`:
  `advantage_reinforce_plus_plus_baseline` fed those rewards (per token); case r.

tests/test_advantages_relax.py compares dew_rl's `group_advantage`, `rloo_advantage`, `gdpo_advantage`,
`reinforce_plus_plus_returns` and `group_baseline_advantage` with the frozen outputs.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import relax_source  # noqa: E402  (tools/relax_source.py)

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "redai-infra/Relax"
REVISION = "c1399bf3e285a43f69e6bdd7df38d4f04e841797"
NUMERICS_REVISION = "5241b113daef8cfaa320fad6f2a35a28b8d32d47"  # redai-infra/Relax: the only stored version
PPO_UTILS_REPOSITORY = "redai-studio/Relax"
PPO_UTILS_REVISION = "2854c256da903068a91490adfe4a6274258f3862"  # as tools/make_relax_ppo2_fixtures.py
# Executed in this order (a file's imports from another one are bound before it runs). `chars`: the text's length.
FILES = {
    "numerics": dict(
        repository=REPOSITORY, revision=NUMERICS_REVISION, path="relax/algorithms/numerics.py", chars=8673,
        definitions=("logger", "_LOGGED_GROUP_SIZE", "_log_group_once", "STD_EPS", "GDPO_EPS", "is_collapsed",
                     "collapsed_columns", "distributed_mean_std"),
        sha256="819bc242ccfa9082f8767a0d6d04464f04b1179dd6ea971211129e4b84b1c3f9"),
    "ppo_utils": dict(
        repository=PPO_UTILS_REPOSITORY, revision=PPO_UTILS_REVISION, path="relax/utils/training/ppo_utils.py",
        chars=68658,
        definitions=("get_grpo_returns", "compute_rloo_leave_one_out_rewards", "get_reinforce_plus_plus_returns",
                     "get_reinforce_plus_plus_baseline_advantages"),
        sha256="7ef387ff7c6b9d7cf50ee33d444c05e416a5803b99e65fab3791941b20339345"),
    "rewards": dict(
        repository=REPOSITORY, revision=REVISION, path="relax/algorithms/rewards.py", chars=29210,
        definitions=("logger", "GROUP_EPS", "_FLOAT32_MAX", "_NOISE_FLOOR_SAFETY", "group_positions",
                     "_group_normalize", "normalize_group_mean", "normalize_group_mean_std",
                     "_reject_non_finite_group", "normalize_group_leave_one_out", "resolve_gdpo_keys",
                     "resolve_gdpo_weights", "extract_reward_components", "standardize_group_components",
                     "component_noise_scale", "combine_group", "normalize_gdpo_decoupled"),
        sha256="8df655eaeeb9feda530449dbb0572db9f9f61dbbd98b56f2721b359e0f6ba939"),
    "advantages": dict(
        repository=REPOSITORY, revision=REVISION, path="relax/algorithms/advantages.py", chars=16538,
        definitions=("whiten_scalar", "_as_reward_tensor", "_agree_on_segmentation", "_whiten_by_segment",
                     "advantage_gdpo", "advantage_reinforce_plus_plus", "advantage_reinforce_plus_plus_baseline"),
        sha256="c274f64614943ccae1c91b74908b40480b6b8c9b4b1f0aed67f5b6775eb7b27a"),
}
# Names each file imports from another Relax file run here: {file: {(module, source file): names}}
IMPORTS = {
    "numerics": {},
    "ppo_utils": {},
    "rewards": {("relax.algorithms.numerics", "numerics"): ("GDPO_EPS", "STD_EPS", "collapsed_columns"),
                ("relax.utils.training.ppo_utils", "ppo_utils"): ("compute_rloo_leave_one_out_rewards",)},
    "advantages": {("relax.algorithms.numerics", "numerics"): ("GDPO_EPS", "distributed_mean_std", "is_collapsed"),
                   ("relax.utils.training.ppo_utils", "ppo_utils"): (
                       "get_grpo_returns", "get_reinforce_plus_plus_baseline_advantages",
                       "get_reinforce_plus_plus_returns")},
}
OUT = ROOT / "tests" / "fixtures" / "advantages_relax.npz"
SEED = 20260602
GROUP_CASES = {"g2": 2, "g3": 3, "g5": 5, "g8": 8}  # case: n_samples_per_prompt
GDPO_CASES = {"m4": 4, "m8": 8}
GDPO_KEYS = ("correct", "format", "length")
GDPO_WEIGHTS = {"none": None, "1,0.5,2": (1.0, 0.5, 2.0)}
GDPO_SEGMENTS = {"m4": ((24,), (12, 12)), "m8": ((24,), (8, 16))}
RPP_GROUP = 4
RPP_SETTINGS = ((0.0, 1.0), (0.05, 1.0), (0.05, 0.9))  # (kl_coef, gamma)


def make_inputs() -> dict:
    """Every input under in/<case>/<name>; numpy only (tests/test_advantages_relax.py re-draws them)."""
    rng = np.random.default_rng(SEED)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x = {}

    def put_groups(case, groups, order=None):
        r = np.concatenate([np.asarray(g, np.float64) for g in groups])
        gid = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        if order is not None:
            r, gid = r[order], gid[order]
        x[f"in/{case}/rewards"] = f32(r)
        x[f"in/{case}/group"] = gid.astype(np.int32)

    put_groups("g2", [[1.0, 0.0], [0.0, 0.0], [0.9, 0.9], [0.25, -1.5], rng.normal(0.0, 1.0, 2),
                      [1.0, 1.0015], [0.7, 0.2]])
    put_groups("g3", [[0.9, 0.9, 0.9], [1.0, 0.0, 1.0], [0.2, 0.2, 0.7], rng.normal(0.0, 1.0, 3),
                      [2.5, -1.0, 0.0]])
    order = rng.permutation(20)
    put_groups("g5", [[0.3, 1.2, 0.3, -0.5, 1.2], [0.6] * 5, [1.0, 0.0, 0.0, 0.0, 0.0],
                      rng.uniform(0.0, 10.0, 5)], order=order)
    g8 = rng.normal(0.0, 1.0, 8)
    g8[5] = g8[2]
    put_groups("g8", [[1, 1, 0, 0, 0, 1, 0, 0], [0.1] * 8, g8, rng.integers(100, 900, 8).astype(float),
                      3.0 + 1e-3 * np.array([0, 1, 2, 0.5, 1.5, 2, 0.25, 1])])

    # GDPO: [B, 3] (correct, format, length)
    def gdpo_case(case, groups, T):
        comp = np.concatenate([np.stack([np.asarray(c, np.float64) for c in g], axis=1) for g in groups])
        G = len(groups[0][0])
        x[f"in/{case}/rewards"] = f32(comp)
        x[f"in/{case}/group"] = np.repeat(np.arange(len(groups)), G).astype(np.int32)
        x[f"in/{case}/lengths"] = rng.integers(1, T + 1, comp.shape[0]).astype(np.int32)

    def rand_group(G):
        return (rng.integers(0, 2, G).astype(float), rng.integers(0, 2, G).astype(float),
                np.round(rng.uniform(50.0, 1000.0, G)))

    gdpo_case("m4", [
        ([1, 0, 1, 0], [1, 1, 1, 1], [120, 340, 95, 410]),  # format flat
        ([1, 1, 1, 1], [1, 1, 1, 1], [200, 200, 200, 200]),  # flat in every column
        ([0, 1, 0, 0], [1, 0, 1, 1], [300, 300, 300, 300]),  # correct + format = 1: cancel under equal weights
        ([0.7, 0.2, 0.7, 0.9], [0, 1, 1, 0], [500.0, 500.001, 500.002, 500.0005]),  # non-binary, length ~1e-3
        (rng.normal(0.0, 1.0, 4), [0, 1, 0, 1], np.round(rng.uniform(50.0, 1000.0, 4))),
        rand_group(4),
    ], T=6)
    gdpo_case("m8", [
        ([1, 0, 1, 1, 0, 0, 1, 0], [1, 1, 0, 1, 1, 1, 1, 1], [410, 220, 220, 380, 95, 600, 410, 150]),
        (rng.uniform(0.0, 1.0, 8), [1] * 8, 700.0 + 1e-3 * np.arange(8)),
        rand_group(8),
    ], T=5)

    # REINFORCE++: B 8, T 9, groups of 4
    B, T = 8, 9
    lengths = np.array([9, 6, 8, 3, 9, 5, 7, 4])
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    for r, c in ((0, 2), (0, 5), (1, 1), (4, 3), (4, 4), (6, 2)):  # interior holes
        mask[r, c] = 0.0
    mask[2, 6:8] = 0.0  # response 2: its last two tokens masked (its last valid token is 5)
    mask[4, 8] = 0.0  # response 4 likewise (last valid 7)
    mask[5] = 0.0  # a fully masked response
    kl = rng.normal(0.0, 0.1, (B, T))
    kl[mask == 0] = 1e3  # masked values must not count
    rewards = np.array([1.0, 0.0, 0.7, 0.7, 0.35, -0.4, 1.3, 0.35])
    x["in/r/rewards"] = f32(rewards)
    x["in/r/kl"] = f32(kl)
    x["in/r/mask"] = mask
    x["in/r/lengths"] = lengths.astype(np.int32)
    x["in/r/group"] = np.repeat(np.arange(B // RPP_GROUP), RPP_GROUP).astype(np.int32)
    return x


def read_text(source: str, name: str) -> str:
    "FILES[name]'s text: from `source/<name>.py` when that file exists, else from the git dir `source` at its revision."
    spec = FILES[name]
    p = Path(source) / f"{name}.py"
    return relax_source.read_text(str(p) if p.is_file() else source, spec["revision"], spec["path"])


def _name(node) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def definitions(text: str, name: str) -> tuple[list, str]:
    """FILES[name]'s definitions (top-level nodes, file order) and the sha256 of their source segments, checked
    against the pins (the text's length, the names and their order, the hash, no decorators)."""
    spec = FILES[name]
    if len(text) != spec["chars"]:
        raise SystemExit(f"{spec['path']}: {len(text)} characters, not {spec['chars']} (@{spec['revision']})")
    tree = ast.parse(text)
    nodes = [n for n in tree.body if _name(n) in spec["definitions"]]
    names = tuple(_name(n) for n in nodes)
    if names != spec["definitions"]:
        raise SystemExit(f"{spec['path']}: found the definitions {names}, not {spec['definitions']} in this order")
    for n in nodes:
        if getattr(n, "decorator_list", []):
            raise SystemExit(f"{spec['path']}: {_name(n)} is decorated")
    digest = hashlib.sha256("".join(ast.get_source_segment(text, n) for n in nodes).encode("utf-8")).hexdigest()
    if digest != spec["sha256"]:
        raise SystemExit(f"{spec['path']}: sha256 of the definitions {digest} is not the pinned {spec['sha256']} "
                         f"(@{spec['revision']})")
    for (module, _), wanted in IMPORTS[name].items():
        imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == module
                    for a in n.names}
        if not set(wanted) <= imported:
            raise SystemExit(f"{spec['path']}: does not import {sorted(set(wanted) - imported)} from {module}")
    return nodes, digest


def load_relax(texts: dict) -> tuple[dict, dict]:
    """Execute each file's definitions unchanged in its own fresh module (order of FILES), its namespace holding
    the standard names and torch, `get_logger` = logging.getLogger, and the names it imports from the files
    executed before it. Returns ({name: module}, {name: sha256})."""
    import logging
    import math
    from numbers import Real
    from typing import Any, Callable

    import torch
    import torch.distributed as dist
    mods, digests = {}, {}
    for name, spec in FILES.items():
        nodes, digests[name] = definitions(texts[name], name)
        modname = f"relax_{name}_{spec['revision'][:12]}"
        mod = types.ModuleType(modname)
        mod.__file__ = f"{spec['repository']}@{spec['revision'][:12]}:{spec['path']}"
        mod.__dict__.update(torch=torch, dist=dist, math=math, Real=Real, Any=Any, Callable=Callable,
                            get_logger=logging.getLogger)
        for (_, source), wanted in IMPORTS[name].items():
            mod.__dict__.update({w: getattr(mods[source], w) for w in wanted})
        sys.modules[modname] = mod
        exec(compile(ast.Module(body=nodes, type_ignores=[]), mod.__file__, "exec", dont_inherit=True), mod.__dict__)
        for fn in spec["definitions"]:
            obj = getattr(mod, fn)
            if isinstance(obj, types.FunctionType):
                assert obj.__code__.co_filename == mod.__file__, (name, fn)
        mods[name] = mod
    return mods, digests


class Sample:
    """Stand-in for Relax's rollout sample: the group index and, for GDPO, the reward components by key."""

    def __init__(self, group_index: int, components: dict | None = None):
        self.group_index = group_index
        self.components = components

    def get_reward_components(self, keys):
        return [self.components[k] for k in keys]


@contextlib.contextmanager
def no_context_parallelism():
    """`from megatron.core import mpu` inside Relax's REINFORCE++ helper gets an `mpu` whose
    `get_context_parallel_world_size()` is 1 (one process); removed again afterwards."""
    if any(m == "megatron" or m.startswith("megatron.") for m in sys.modules):
        raise SystemExit("a megatron module is already imported; refusing to shadow it")
    megatron, core = types.ModuleType("megatron"), types.ModuleType("megatron.core")
    core.mpu = types.SimpleNamespace(get_context_parallel_world_size=lambda: 1)
    megatron.core = core
    sys.modules.update({"megatron": megatron, "megatron.core": core})
    try:
        yield
    finally:
        del sys.modules["megatron"], sys.modules["megatron.core"]


def rows(a, lengths) -> list:
    "Relax's per-response layout: [a[i, :lengths[i]] for each row]."
    return [np.asarray(a)[i, :n] for i, n in enumerate(lengths)]


def main(argv: list[str]) -> int:
    from argparse import Namespace

    import torch
    texts = {name: read_text(argv[0], name) for name in FILES}
    relax, digests = load_relax(texts)
    rw, adv = relax["rewards"], relax["advantages"]
    inputs = make_inputs()
    arrays, records = dict(inputs), []

    def put(case, kind, value, file, function, settings, **params):
        key = "/".join([f"relax/{case}/{kind}"] + [f"{k}={params[k]}" for k in sorted(params)])
        assert key not in arrays, key
        if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            dtype = str(value[0].dtype)
            assert all(str(v.dtype) == dtype for v in value), key
            value = torch.cat([v.detach() for v in value]).numpy()
        elif isinstance(value, list):
            assert all(type(v) is float for v in value), key
            dtype = "list[float]"
        else:
            raise TypeError(key)
        arrays[key] = np.asarray(value, np.float64)
        records.append(dict(key=key, framework="relax", case=case, kind=kind, params=params,
                            framework_function=f"{FILES[file]['path']}:{function}", settings=settings, dtype=dtype))

    # GRPO, Dr.GRPO, RLOO: one scalar per sample
    for case, G in GROUP_CASES.items():
        r, gid = inputs[f"in/{case}/rewards"], inputs[f"in/{case}/group"]
        samples = [Sample(int(g)) for g in gid]
        raw = r.tolist()
        s = f"n_samples_per_prompt={G}; samples' group_index = in/{case}/group; raw_rewards = in/{case}/rewards"
        for kind, flag in (("grpo_adv", True), ("drgrpo_adv", False)):
            args = Namespace(n_samples_per_prompt=G, grpo_std_normalization=flag)
            put(case, kind, rw.normalize_group_mean_std(args, samples, raw), "rewards", "normalize_group_mean_std",
                f"{s}; grpo_std_normalization={flag}")
        args = Namespace(n_samples_per_prompt=G)
        put(case, "rloo_adv", rw.normalize_group_leave_one_out(args, samples, raw), "rewards",
            "normalize_group_leave_one_out", s)

    # GDPO: steps 1 and 2 (rollout side), then step 3 (advantage_gdpo) per segmentation
    for case, G in GDPO_CASES.items():
        comp, gid, lengths = (inputs[f"in/{case}/{n}"] for n in ("rewards", "group", "lengths"))
        samples = [Sample(int(g), dict(zip(GDPO_KEYS, row))) for g, row in zip(gid, comp.tolist())]
        kl = [torch.zeros(int(n)) for n in lengths]
        for wname, weights in GDPO_WEIGHTS.items():
            args = Namespace(n_samples_per_prompt=G, gdpo_reward_keys=list(GDPO_KEYS),
                             gdpo_reward_weights=None if weights is None else list(weights))
            combined = rw.normalize_gdpo_decoupled(args, samples, [0.0] * len(samples))
            s = (f"n_samples_per_prompt={G}, gdpo_reward_keys={list(GDPO_KEYS)}, gdpo_reward_weights="
                 f"{args.gdpo_reward_weights}; samples' group_index = in/{case}/group, get_reward_components = the "
                 f"row of in/{case}/rewards (Python floats)")
            put(case, "gdpo_combined", combined, "rewards", "normalize_gdpo_decoupled", s, w=wname)
            for seg in GDPO_SEGMENTS[case]:
                a, ret = adv.advantage_gdpo(args, rewards=combined, kl=kl, process_group=None,
                                            mini_batch_sizes=list(seg))
                assert a is not ret and all(x is y for x, y in zip(a, ret))
                put(case, "gdpo_adv", a, "advantages", "advantage_gdpo",
                    f"rewards = relax/{case}/gdpo_combined/w={wname} (list[float]); kl[i] = zeros(lengths[i]) "
                    f"(float32); process_group=None; mini_batch_sizes={list(seg)}; advantages, responses "
                    f"concatenated", segments=",".join(map(str, seg)), w=wname)

    # REINFORCE++ and REINFORCE++-baseline
    r, kl_all, mask, lengths, gid = (inputs[f"in/r/{n}"] for n in ("rewards", "kl", "mask", "lengths", "group"))
    kl = [torch.tensor(v) for v in rows(kl_all, lengths)]
    masks = [torch.tensor(v) for v in rows(mask, lengths)]
    resp = [int(n) for n in lengths]
    total = [n + 7 for n in resp]  # prompt of 7 tokens (only read when context parallelism splits a sequence)
    s = ("rewards = in/r/rewards (list[float]); kl[i] = in/r/kl[i, :lengths[i]], loss_masks[i] = in/r/mask[i, "
         ":lengths[i]] (float32); response_lengths = lengths, total_lengths = lengths + 7; responses concatenated")
    for kl_coef, gamma in RPP_SETTINGS:
        args = Namespace(kl_coef=kl_coef, gamma=gamma)
        with no_context_parallelism():
            a, ret = adv.advantage_reinforce_plus_plus(args, rewards=r.tolist(), kl=[k.clone() for k in kl],
                                                       loss_masks=masks, response_lengths=resp,
                                                       total_lengths=total)
        put("r", "rpp_returns", a, "advantages", "advantage_reinforce_plus_plus",
            f"kl_coef={kl_coef}, gamma={gamma}; {s}; advantages (= returns); megatron.core.mpu stand-in: "
            "context-parallel world size 1", gamma=gamma, kl_coef=kl_coef)
    args = Namespace(n_samples_per_prompt=RPP_GROUP)
    centred = rw.normalize_group_mean(args, [Sample(int(g)) for g in gid], r.tolist())
    put("r", "rpp_baseline_reward", centred, "rewards", "normalize_group_mean",
        f"n_samples_per_prompt={RPP_GROUP}; samples' group_index = in/r/group; raw_rewards = in/r/rewards")
    a, ret = adv.advantage_reinforce_plus_plus_baseline(args, rewards=centred, kl=kl, loss_masks=masks)
    assert a is ret
    put("r", "rpp_baseline_adv", a, "advantages", "advantage_reinforce_plus_plus_baseline",
        "rewards = relax/r/rpp_baseline_reward (list[float]); kl[i] = in/r/kl[i, :lengths[i]], loss_masks[i] = "
        "in/r/mask[i, :lengths[i]]; responses concatenated")

    not_run = [dict(framework="relax", framework_function=f, dew_rl=d, why=why) for f, d, why in (
        ("relax/algorithms/advantages.py:advantage_grpo_broadcast", "-",
         "get_grpo_returns' broadcast (ones_like(kl[i]) * reward) runs here inside advantage_gdpo; GRPO's "
         "arithmetic is normalize_group_mean_std"),
        ("relax/algorithms/advantages.py:advantage_gae", "gae",
         "needs megatron's context-parallel rank and PPO's value model; GAE is frozen from ppo_utils by "
         "tools/make_relax_ppo_fixtures.py"),
        ("relax/algorithms/advantages.py:compute_advantages_and_returns", "-",
         "dispatch through relax.algorithms.spec.get_algorithm (not in these files)"),
        ("relax/algorithms/rewards.py:normalize_none", "-", "returns its input"),
        ("relax/algorithms/rewards.py:group_carries_reward_signal, observed_reward_signal, metrics_group_verdict",
         "-", "filters and metrics (need relax.algorithms.spec), not advantages"),
        ("relax.utils.distributed_utils.distributed_masked_whiten (--normalize-advantages)",
         "global_masked_normalize", "the token whitening that REINFORCE++ / REINFORCE++-baseline apply later is "
         "not in these files"))]
    relax_source.save_fixture(OUT, ROOT, arrays, dict(
        framework="relax", version=f"Relax {REPOSITORY}@{REVISION}", revision=REVISION,
        files={name: dict(repository=spec["repository"], revision=spec["revision"], path=spec["path"],
                          chars=spec["chars"]) for name, spec in FILES.items()},
        definitions={name: list(spec["definitions"]) for name, spec in FILES.items()},
        sha256=digests,
        how="each file's definitions above taken from its syntax tree at its revision (length and sha256 of the "
        "definitions' source segments checked) and executed unchanged in a fresh module namespace per file holding "
        "torch, dist, math, Real, Any, Callable, get_logger = logging.getLogger and the names the file imports from "
        "the other files run here; Sample and megatron.core.mpu (context-parallel world size 1) are stand-ins "
        "(tools/make_relax_advantage_fixtures.py), torch " + torch.__version__,
        records=records, failed=[], not_run=not_run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
