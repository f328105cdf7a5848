"""A*-PO, truncation shaping (stop properly, masked truncated completions) and TPO against float64 references.

Every reference is written from the equations in NumPy float64 and never calls the production functions:

* A*-PO (Brantley et al. 2025, arXiv:2505.20686v1; TRL 1.16.0 `A2POTrainer`):
  V*(x) = beta1 log mean_j exp(R_j / beta1); loss term (beta2 sum_t m_t (log pi - log pi_ref) - (R - V*))^2.
* Stop properly (OpenRLHF `apply_stop_properly_penalty`, NeMo-RL `stop_properly_penalty_coef`): a truncated
  response's reward times c for c in [0, 1], replaced by c for c < 0. TRL's `mask_truncated_completions`: the
  truncated rows leave the loss mask; truncated = the last kept token is not an EOS id.
* TPO (Saeidi et al. 2024, arXiv:2405.16681v2; TRL 1.16.0 `TPOTrainer`): mean over pairs of a reference-free
  pair loss (sigmoid, hinge on summed log-probs; ipo, tpo-l on per-token means) plus tpo_alpha times the gold
  response's NLL averaged over every gold token.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from dew_rl.testing import poison, random_mask


def _lsig(z):
    return -np.logaddexp(0.0, -z)


# --------------------------------------------------------------------------- A*-PO
def ref_value(r, group, beta):
    r = np.asarray(r, np.float64)
    ids = np.repeat(np.arange(r.size // group), group) if np.ndim(group) == 0 else np.asarray(group)
    out = np.empty_like(r)
    for i in range(r.size):
        out[i] = beta * np.log(np.mean(np.exp(r[ids == ids[i]] / beta)))
    return out


def ref_astar(lp, ref, m, r, v, beta):
    out = []
    for i in range(lp.shape[0]):
        d = sum(float(lp[i, t]) - float(ref[i, t]) for t in range(lp.shape[1]) if m[i, t] != 0)
        out.append((beta * d - (float(r[i]) - float(v[i]))) ** 2)
    return np.array(out)


@pytest.mark.parametrize("group", [4, 2, "ids"])
@pytest.mark.parametrize("beta", [0.5, 0.1, 3.0])
def test_astar_po_value(group, beta):
    rng = np.random.default_rng(1)
    r = np.concatenate([np.zeros(4), np.ones(4), rng.integers(0, 2, 4), rng.normal(0, 2, 4)])
    grp = np.array([3, 3, 1, 3, 1, 1, 1, 8, 8, 5, 8, 8, 3, 5, 1, 8]) if group == "ids" else group
    got = rl.astar_po_value(jnp.asarray(r, jnp.float32), grp, beta)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got, np.float64), ref_value(r, grp, beta), rtol=1e-5, atol=1e-5)
    got16 = rl.astar_po_value(jnp.asarray(r, jnp.bfloat16), grp, beta)
    assert got16.dtype == jnp.bfloat16
    r16 = np.asarray(jnp.asarray(r, jnp.bfloat16), np.float64)
    np.testing.assert_allclose(np.asarray(got16, np.float64), ref_value(r16, grp, beta), rtol=2e-2, atol=2e-2)


def test_astar_po_value_limits_and_overflow():
    r = np.array([1.0, 0.0, 0.0, 0.0])
    v = np.asarray(rl.astar_po_value(r.astype(np.float32), 4, 100.0))
    np.testing.assert_allclose(v, np.full(4, 0.25), atol=2e-3)              # beta -> inf: the mean
    v = np.asarray(rl.astar_po_value(r.astype(np.float32), 4, 0.01))
    np.testing.assert_allclose(v, np.full(4, 1.0 + 0.01 * np.log(0.25)), atol=1e-5)   # beta -> 0: the maximum
    big = rl.astar_po_value(np.full(4, 300.0, np.float32), 4, 0.01)          # exp(3e4) overflows unshifted
    np.testing.assert_allclose(np.asarray(big), 300.0, rtol=1e-6)


@pytest.fixture(scope="module")
def astar_batch():
    B, T = 7, 9
    m = random_mask(5, B, T, empty_rows=2)
    rng = np.random.default_rng(5)
    lp = -rng.uniform(0.05, 3.0, (B, T))
    ref = lp + rng.normal(0, 0.4, (B, T))
    r = rng.integers(0, 2, B).astype(np.float64)
    v = rng.uniform(0.0, 1.0, B)
    return lp, ref, m, r, v


@pytest.mark.parametrize("beta", [1e-3, 0.3])
def test_astar_po_loss_terms_value_and_poison(astar_batch, beta):
    lp, ref, m, r, v = astar_batch
    want = ref_astar(lp, ref, m, r, v, beta)
    f = lambda *a: rl.astar_po_loss_terms(*a, beta=beta)[0]
    for fn in (f, jax.jit(f)):
        got = fn(jnp.asarray(poison(lp, m), jnp.float32), jnp.asarray(poison(ref, m), jnp.float32), m, r, v)
        assert got.dtype == jnp.float32 and np.isfinite(np.asarray(got)).all()
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=1e-6)


def test_astar_po_loss_terms_gradient_is_pinned(astar_batch):
    lp, ref, m, r, v = astar_batch
    beta = 0.2
    k = m != 0
    d = np.where(k, lp - ref, 0.0).sum(1)
    want = np.where(k, (2 * beta * (beta * d - (r - v)))[:, None], 0.0)
    lp32, ref32 = jnp.asarray(poison(lp, m), jnp.float32), jnp.asarray(poison(ref, m), jnp.float32)
    for grad in (jax.grad, lambda f: jax.jit(jax.grad(f))):
        g = grad(lambda x: rl.astar_po_loss_terms(x, ref32, m, r, v, beta)[0].sum())(lp32)
        assert np.isfinite(np.asarray(g)).all()
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-6)
    # the reference log-probs, the rewards and V* are data: no gradient reaches them
    for arg, f in ((ref32, lambda x: rl.astar_po_loss_terms(lp32, x, m, r, v, beta)[0].sum()),
                   (jnp.asarray(r, jnp.float32), lambda x: rl.astar_po_loss_terms(lp32, ref32, m, x, v, beta)[0].sum()),
                   (jnp.asarray(v, jnp.float32), lambda x: rl.astar_po_loss_terms(lp32, ref32, m, r, x, beta)[0].sum())):
        assert not np.asarray(jax.grad(f)(arg)).any()


def test_astar_po_misuse():
    x, m = -np.ones((2, 3)), np.ones((2, 3))
    with pytest.raises(ValueError, match=r"astar_po_value: `beta` must be a positive finite number"):
        rl.astar_po_value(np.zeros(4), 2, -1.0)
    with pytest.raises(ValueError, match=r"astar_po_value: the length of `rewards` \(4\) must be a multiple of `group` \(3\)"):
        rl.astar_po_value(np.zeros(4), 3)
    with pytest.raises(ValueError, match=r"astar_po_loss_terms: `rewards` must have one entry per row of `log_probs`"):
        rl.astar_po_loss_terms(x, x, m, np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match=r"astar_po_loss_terms: `mask` must have the shape of `log_probs`"):
        rl.astar_po_loss_terms(x, x, np.ones((2, 2)), np.ones(2), np.ones(2))


# --------------------------------------------------------------------------- truncation
def ref_truncated(tokens, mask, eos):
    eos = set(np.atleast_1d(eos).tolist())
    out = []
    for tok, row in zip(tokens, mask):
        kept = [t for t in range(len(row)) if row[t] != 0]
        out.append(bool(kept) and int(tok[kept[-1]]) not in eos)
    return np.array(out)


def ref_stop(r, cut, c):
    return np.array([(c if c < 0 else c * x) if k else x for x, k in zip(np.asarray(r, np.float64), cut)])


@pytest.mark.parametrize("eos", [2, (2, 5), [0, 4]])
def test_truncated_rows(eos):
    m = random_mask(9, 10, 8, empty_rows=2)
    tok = np.random.default_rng(9).integers(0, 6, (10, 8))
    want = ref_truncated(tok, m, eos)
    assert 0 < want.sum() < 10
    assert np.asarray(rl.truncated_rows(tok, m, eos)).tolist() == want.tolist()
    jf = jax.jit(rl.truncated_rows, static_argnums=2)
    assert np.asarray(jf(tok, m, tuple(np.atleast_1d(eos).tolist()))).tolist() == want.tolist()


@pytest.mark.parametrize("c", [0.0, 0.5, 1.0, -0.5])
def test_stop_properly_rewards(c):
    rng = np.random.default_rng(3)
    r = rng.normal(size=9)
    cut = rng.random(9) < 0.5
    cut[:2] = (True, False)
    x = np.where(cut, np.nan, r) if c < 0 else r        # a replaced reward is never read
    for fn in (rl.stop_properly_rewards, jax.jit(rl.stop_properly_rewards)):
        got = fn(jnp.asarray(x, jnp.float32), cut, c)
        assert got.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(got, np.float64), ref_stop(x, cut, c), rtol=1e-6, atol=1e-7)
    g = jax.grad(lambda y: rl.stop_properly_rewards(y, cut, c).sum())(jnp.asarray(x, jnp.float32))
    np.testing.assert_array_equal(np.asarray(g), np.where(cut, max(c, 0.0), 1.0).astype(np.float32))


def test_mask_truncated_completions():
    m = random_mask(4, 6, 5, empty_rows=1)
    cut = np.array([True, False, True, False, False, True])
    for dt in (np.float32, np.int32, bool):
        got = rl.mask_truncated_completions(m.astype(dt), cut)
        assert got.dtype == jnp.dtype(dt)
        np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.where(cut[:, None], 0.0, m))


def test_truncation_misuse():
    tok, m = np.zeros((2, 3), np.int32), np.ones((2, 3))
    with pytest.raises(ValueError, match=r"truncated_rows: `tokens` must be an integer array"):
        rl.truncated_rows(tok.astype(np.float32), m, 2)
    with pytest.raises(ValueError, match=r"truncated_rows: `eos_token_ids` must be a Python int or a non-empty sequence"):
        rl.truncated_rows(tok, m, ())
    with pytest.raises(ValueError, match=r"stop_properly_rewards: `stop_properly_penalty_coef` must be a finite number <= 1"):
        rl.stop_properly_rewards(np.zeros(2), [True, False], 2.0)
    with pytest.raises(ValueError, match=r"stop_properly_rewards: `truncated` must have the shape of `rewards`"):
        rl.stop_properly_rewards(np.zeros(2), [True, False, True], 0.5)
    with pytest.raises(ValueError, match=r"mask_truncated_completions: `truncated` must have the shape"):
        rl.mask_truncated_completions(m, [True])


# --------------------------------------------------------------------------- TPO
def ref_tpo(pc, pr, mc, mr, pg, mg, beta=0.01, loss_type="sigmoid", label_smoothing=0.0, tpo_alpha=1.0, tpo_l_gamma=0.5):
    def s(x, k):
        return float(np.sum(np.where(k != 0, x, 0.0)))

    def mean(x, k):
        return s(x, k) / max(int((k != 0).sum()), 1)

    x = mean if loss_type in ("ipo", "tpo-l") else s
    per = []
    for p in range(pc.shape[0]):
        if not ((mc[p] != 0).any() or (mr[p] != 0).any()):
            continue                                        # a pair with no token leaves the mean
        u = x(pc[p], mc[p]) - x(pr[p], mr[p])
        if loss_type in ("sigmoid", "tpo-l"):
            z = beta * u - (tpo_l_gamma if loss_type == "tpo-l" else 0.0)
            per.append(-(1 - label_smoothing) * _lsig(z) - label_smoothing * _lsig(-z))
        elif loss_type == "hinge":
            per.append(max(0.0, 1 - beta * u))
        else:
            per.append((u - 1 / (2 * beta)) ** 2)
    nll = -s(pg, mg) / max(int((mg != 0).sum()), 1)
    return (np.mean(per) if per else 0.0) + tpo_alpha * nll


@pytest.fixture(scope="module")
def tpo_batch():
    P = 6
    mc, mr, mg = random_mask(11, P, 7, empty_rows=0), random_mask(12, P, 5, empty_rows=1), random_mask(13, P, 4, empty_rows=2)
    mc[3] = 0; mr[3] = 0                                    # pair 3: no token at all
    rng = np.random.default_rng(14)
    pc, pr, pg = rng.normal(-1.5, 0.7, (P, 7)), rng.normal(-1.8, 0.7, (P, 5)), rng.normal(-0.9, 0.5, (P, 4))
    return pc, pr, mc, mr, pg, mg


SETTINGS = [dict(), dict(loss_type="hinge", beta=0.5), dict(loss_type="ipo", beta=0.1), dict(loss_type="tpo-l"),
            dict(loss_type="tpo-l", beta=2.0, tpo_l_gamma=1.0, label_smoothing=0.1, tpo_alpha=0.25),
            dict(label_smoothing=0.2, beta=0.3, tpo_alpha=0.0)]


@pytest.mark.parametrize("kw", SETTINGS, ids=str)
def test_tpo_loss_value_and_poison(tpo_batch, kw):
    pc, pr, mc, mr, pg, mg = tpo_batch
    want = ref_tpo(pc, pr, mc, mr, pg, mg, **kw)
    args = [jnp.asarray(poison(a, k), jnp.float32) for a, k in ((pc, mc), (pr, mr))]
    gold = jnp.asarray(poison(pg, mg), jnp.float32)
    f = lambda a, b, g: rl.tpo_loss(a, b, mc, mr, g, mg, **kw)
    for fn in (f, jax.jit(f)):
        loss, metrics = fn(*args, gold)
        assert loss.dtype == jnp.float32 and all(np.isfinite(float(v)) for v in metrics.values())
        np.testing.assert_allclose(float(loss), want, rtol=1e-5, atol=1e-5)
        assert float(metrics["pairs"]) == 5.0 and float(metrics["empty_pairs"]) == 1.0


@pytest.mark.parametrize("kw", [dict(), dict(loss_type="tpo-l", beta=0.5), dict(loss_type="ipo", beta=0.1)], ids=str)
def test_tpo_loss_gradient(tpo_batch, kw):
    pc, pr, mc, mr, pg, mg = tpo_batch
    h = 1e-6

    def fd(which):
        base = [pc, pr, pg]
        g = np.zeros_like(base[which])
        for idx in np.ndindex(g.shape):
            up = [b.copy() for b in base]; dn = [b.copy() for b in base]
            up[which][idx] += h; dn[which][idx] -= h
            g[idx] = (ref_tpo(up[0], up[1], mc, mr, up[2], mg, **kw) - ref_tpo(dn[0], dn[1], mc, mr, dn[2], mg, **kw)) / (2 * h)
        return g

    with jax.enable_x64(True):
        a = [jnp.asarray(poison(x, k), jnp.float64) for x, k in ((pc, mc), (pr, mr), (pg, mg))]
        grads = jax.grad(lambda c, r, g: rl.tpo_loss(c, r, mc, mr, g, mg, **kw)[0], argnums=(0, 1, 2))(*a)
    for which, (g, k) in enumerate(zip(grads, (mc, mr, mg))):
        assert np.isfinite(np.asarray(g)).all()
        np.testing.assert_allclose(np.asarray(g), np.where(k != 0, fd(which), 0.0), rtol=1e-5, atol=1e-6)


def test_tpo_loss_misuse():
    a3, a4, m3, m4 = np.zeros((2, 3)), np.zeros((2, 4)), np.ones((2, 3)), np.ones((2, 4))
    with pytest.raises(ValueError, match=r"tpo_loss: `loss_type` must be one of 'sigmoid', 'hinge', 'ipo', 'tpo-l'"):
        rl.tpo_loss(a3, a4, m3, m4, a3, m3, loss_type="simpo")
    with pytest.raises(ValueError, match=r"tpo_loss: `policy_gold` is required unless tpo_alpha is the host number 0"):
        rl.tpo_loss(a3, a4, m3, m4)
    with pytest.raises(ValueError, match=r"tpo_loss: `mask_gold` must have the shape of `policy_gold`"):
        rl.tpo_loss(a3, a4, m3, m4, a3, m4)
    with pytest.raises(ValueError, match=r"tpo_loss: `beta` must be a positive number"):
        rl.tpo_loss(a3, a4, m3, m4, a3, m3, beta=0.0)
    with pytest.raises(ValueError, match=r"tpo_loss: `label_smoothing` is not read by loss_type='hinge'"):
        rl.tpo_loss(a3, a4, m3, m4, a3, m3, loss_type="hinge", label_smoothing=0.1)
