"""Float64 NumPy references for the objectives layer (`dew_rl.objectives`), written from the equations.

Nothing here calls dew_rl: an `ObjectiveConfig` is only read for its fields. Every function takes
float64 arrays and returns float64 values.

Stop-gradient pieces (GSPO's pooled ratio, CISPO's weight, the "+" KL estimators, the detached
advantages and importance weights) take their value from `frozen`, the log-probs at which the
gradient is evaluated, and their gradient from `lp`. So `ref_loss(cfg, lp, ..., frozen=lp0)` is a
genuine function of `lp` whose derivative at `lp = lp0` is the gradient the objective must have, and
central finite differences of it give an independent reference gradient.
"""
from __future__ import annotations

import numpy as np

FLOOR = 1e-8
GROUP_EPS = 1e-6


# ----------------------------------------------------------------------------------------- helpers
def _keep(m):
    return np.asarray(m) != 0


def _sel(x, k):
    return np.where(k, np.asarray(x, np.float64), 0.0)


def moments(x, k):
    """Population (ddof 0) mean and variance over the kept positions, and their count."""
    v = np.asarray(x, np.float64)[k]
    if v.size == 0:
        return 0.0, 0.0, 0
    mu = v.mean()
    return mu, ((v - mu) ** 2).mean(), v.size


def population_normalize(x, k):
    mu, var, n = moments(x, k)
    return np.where(k, (_sel(x, k) - mu) / np.sqrt(max(var, FLOOR)), 0.0)


def bessel_whiten(x, k):
    """masked_whiten's convention (verl): mean and variance over N + 1e-8, Bessel's N / (N - 1), 1e-8 in the root."""
    v = np.asarray(x, np.float64)[k]
    n = v.size
    mu = v.sum() / (n + 1e-8)
    var = ((v - mu) ** 2).sum() / (n + 1e-8) * (n / max(n - 1, 1))
    return np.where(k, (_sel(x, k) - mu) / np.sqrt(var + 1e-8), 0.0)


def last_valid(k):
    out = np.zeros(k.shape, bool)
    for i in range(k.shape[0]):
        idx = np.flatnonzero(k[i])
        if idx.size:
            out[i, idx[-1]] = True
    return out


# ----------------------------------------------------------------------------------------- stage 1
def overlong(k, L_max, L_buf, factor):
    L = k.sum(1).astype(np.float64)
    return -factor * np.clip((L - (L_max - L_buf)) / L_buf, 0.0, 1.0)


def rfpp_returns(R, kl, k, beta, gamma):
    B, T = k.shape
    r = np.where(k, -beta * _sel(kl, k), 0.0) + np.where(last_valid(k), R[:, None], 0.0)
    G = np.zeros((B, T))
    for i in range(B):
        acc = 0.0
        for t in reversed(range(T)):
            acc = r[i, t] + gamma * acc
            G[i, t] = acc
    return np.where(k, G, 0.0)


def gae_raw(r, v, k, gamma, lam):
    "GAE with the masked-step carry; `lam` a number or one per row [B] (VAPO's length-adaptive lambda)."
    B, T = k.shape
    A = np.zeros((B, T))
    lams = np.broadcast_to(np.asarray(lam, np.float64), (B,))
    for i in range(B):
        a_next, v_next = 0.0, 0.0
        for t in reversed(range(T)):
            if k[i, t]:
                a_next = r[i, t] + gamma * v_next - v[i, t] + gamma * lams[i] * a_next
                v_next = v[i, t]
            A[i, t] = a_next
    return A


def response_mean(x, k):
    "Mean over every row of the row's token mean (an empty row counts as 0)."
    n = k.sum(1)
    return (np.where(k, x, 0.0).sum(1) / np.maximum(n, 1)).mean()


def group_index(group_ids, B, G):
    """Each row's group as a list of row indices: by id when `group_ids` is given, else contiguous blocks of G."""
    ids = np.arange(B) // G if group_ids is None else np.asarray(group_ids)
    return [np.flatnonzero(ids == ids[i]) for i in range(B)]


def ref_advantages(cfg, mask, rewards=None, old=None, ref=None, token_rewards=None, old_values=None, group_ids=None):
    """-> (advantages [B, T], returns [B, T] or None, kept mask [B, T] bool, metrics dict)."""
    est = cfg.advantage_estimator
    k = _keep(mask)
    B, T = k.shape
    G = cfg.n_samples_per_prompt
    metrics, returns = {}, None
    kl_on = not (isinstance(cfg.kl_coef, float) and cfg.kl_coef == 0.0)
    if kl_on and est in ("ppo", "reinforce_plus_plus"):
        kl_tok = _sel(old, k) - _sel(ref, k)
        metrics["rollout/reward_kl_penalty"] = response_mean(kl_tok, k)
    if est == "ppo":
        r = _sel(token_rewards, k)
        metrics["rollout/raw_reward"] = r.sum(1).mean()
        if kl_on:
            r = np.where(k, r - cfg.kl_coef * (_sel(old, k) - _sel(ref, k)), 0.0)
        v = _sel(old_values, k)
        lam = cfg.lam
        if cfg.length_adaptive_alpha is not None:   # VAPO: 1 - 1 / (alpha L), 0 below one token's worth
            lam = 1.0 - 1.0 / np.maximum(cfg.length_adaptive_alpha * k.sum(1), 1.0)
        raw = np.where(k, gae_raw(r, v, k, cfg.gamma, lam), 0.0)
        value_adv = raw if cfg.gae_lambda_value is None else gae_raw(r, v, k, cfg.gamma, cfg.gae_lambda_value)
        returns = np.where(k, value_adv + v, 0.0)
        adv = bessel_whiten(raw, k) if cfg.normalize_advantages else raw
    else:
        R = np.asarray(rewards, np.float64).copy()
        if cfg.reward_post_process is not None:
            R = np.asarray(cfg.reward_post_process(R), np.float64)
        if est == "dapo" and cfg.overlong_buffer_len is not None:
            R = R + overlong(k, cfg.max_response_length or T, cfg.overlong_buffer_len, cfg.overlong_penalty_factor)
        metrics["rollout/raw_reward"] = R.mean()
        members = group_index(group_ids, B, G)            # each row's group: its row indices
        size = np.array([len(m) for m in members])
        mean_g = np.array([R[m].mean() for m in members])
        if est == "reinforce_plus_plus":
            kl = _sel(old, k) - _sel(ref, k) if kl_on else np.zeros((B, T))
            returns = rfpp_returns(R, kl, k, cfg.kl_coef, cfg.gamma)
            raw = returns
        elif est == "reinforce_plus_plus_baseline":
            raw = np.where(k, (R - mean_g)[:, None], 0.0)
        elif est == "rloo":
            others = np.array([(R[m].sum() - R[i]) / max(len(m) - 1, 1) for i, m in enumerate(members)])
            raw = np.where(k, np.where(size > 1, R - others, 0.0)[:, None], 0.0)
        else:
            a = R - mean_g
            if cfg.norm_adv_by_std_in_grpo:
                std = np.array([R[m].std(ddof=1) if len(m) > 1 else 0.0 for m in members])
                a = np.where(size > 1, a / (std + GROUP_EPS), 0.0)
            raw = np.where(k, a[:, None], 0.0)
        if est == "dapo" and cfg.dynamic_sampling:
            kept_row = np.array([R[m].max() != R[m].min() for m in members])
            k = k & kept_row[:, None]
            raw = np.where(k, raw, 0.0)
            metrics["rollout/kept_groups"] = len({tuple(m) for i, m in enumerate(members) if kept_row[i]})
        if est in ("reinforce_plus_plus", "reinforce_plus_plus_baseline") and cfg.normalize_advantages:
            adv = population_normalize(raw, k)
        else:
            adv = raw
    mu0, var0, n = moments(raw, k)
    mu1, var1, _ = moments(adv, k)
    metrics.update({
        "rollout/advantages_raw_mean": mu0, "rollout/advantages_raw_std": np.sqrt(var0),
        "rollout/advantages_mean": mu1, "rollout/advantages_std": np.sqrt(var1),
        "rollout/valid_tokens": n, "rollout/zero_variance": float(var0 < FLOOR),
    })
    if returns is not None:
        metrics["rollout/returns"] = returns[k].mean()
    return adv, returns, k, metrics


# ----------------------------------------------------------------------------------------- stage 2
def aggregate(x, k, mode, counts=None, norm=None):
    """Every mode of the reductions chapter; `counts` = (rows, tokens) of the whole mini-batch."""
    S = _sel(x, k).sum(1)
    n = k.sum(1)
    rows, tokens = counts if counts is not None else (k.shape[0], n.sum())
    if mode == "token-mean":
        return S.sum() / max(tokens, 1)                 # a loss over no token is 0
    if mode == "token-sum":
        return S.sum()
    if mode == "seq-mean-token-mean":
        return (S / np.maximum(n, 1)).sum() / rows
    if mode == "seq-mean-token-sum":
        return S.sum() / rows
    if mode == "seq-mean-token-sum-norm":
        return S.sum() / rows / (k.shape[1] if norm is None else norm)
    raise ValueError(mode)


def kl_terms(lp, ref, kind, frozen):
    def k1(a):
        return a - ref

    def k2(a):
        return 0.5 * (a - ref) ** 2

    def k3(a):
        d = np.clip(ref - a, -20, 20)
        return np.clip(np.exp(d) - d - 1, -10, 10)

    base = {"k1": k1, "kl": k1, "k2": k2, "mse": k2, "k3": k3, "low_var_kl": k3}[kind.rstrip("+")]
    if kind.endswith("+"):
        return k2(lp) + (base(frozen) - k2(frozen))
    return base(lp)


def policy_terms(cfg, lp, old, adv, k, frozen):
    """-> (per-token loss, clipped indicator, dual-clip indicator), zero outside the mask."""
    est = cfg.loss_mode            # the per-token loss: verl's loss_mode
    A = np.where(k, adv, 0.0)
    if est == "gspo":
        d0 = np.where(k, frozen - old, 0.0)
        s = np.array([d0[i][k[i]].mean() if k[i].any() else 0.0 for i in range(k.shape[0])])
        x = np.where(k, lp - frozen + s[:, None], 0.0)
        x = np.where(s[:, None] > 10.0, 10.0, x)
    else:
        x = np.clip(np.where(k, lp - old, 0.0), -20, 20)
    rho = np.exp(x)
    if est == "sapo":
        tau = np.where(A > 0, cfg.tau_pos, cfg.tau_neg)
        l = -(4.0 / tau) / (1.0 + np.exp(-tau * (rho - 1.0))) * A
        return np.where(k, l, 0.0), np.zeros(k.shape, bool), np.zeros(k.shape, bool)
    if est == "cispo":
        rho0 = np.exp(np.clip(np.where(k, frozen - old, 0.0), -20, 20))
        lo, hi = 1 - cfg.cispo_epsilon_low, 1 + cfg.cispo_epsilon_high
        w = np.clip(rho0, lo, hi)
        l = -w * A * np.where(k, lp, 0.0)
        return np.where(k, l, 0.0), k & ((rho0 < lo) | (rho0 > hi)), np.zeros(k.shape, bool)
    unclipped = -A * rho
    clipped = -A * np.clip(rho, 1 - cfg.clip_ratio_low, 1 + cfg.clip_ratio_high)
    l = np.maximum(unclipped, clipped)
    is_clipped = k & (clipped > unclipped)
    if cfg.clip_ratio_c is None:
        dual = np.zeros(k.shape, bool)
    else:
        bound = -cfg.clip_ratio_c * A
        dual = k & (A < 0) & (l > bound)
        l = np.where(A < 0, np.minimum(l, bound), l)
    return np.where(k, l, 0.0), is_clipped, dual


def ref_loss(cfg, lp, mask, old, adv, ref=None, returns=None, old_values=None, values=None, entropy=None,
             behavior=None, counts=None, frozen=None):
    """-> (total loss, metrics dict); `counts` = (rows, tokens) of the mini-batch, or None for this batch's."""
    k = _keep(mask)
    lp = _sel(lp, k)
    frozen = lp if frozen is None else _sel(frozen, k)
    old, adv = _sel(old, k), _sel(adv, k)
    mode = cfg.loss_agg_mode
    norm = None
    if mode == "seq-mean-token-sum-norm":
        norm = cfg.loss_agg_norm or cfg.max_response_length or k.shape[1]

    def agg(x):
        return aggregate(x, k, mode, counts, norm)

    terms, clipped, dual = policy_terms(cfg, lp, old, adv, k, frozen)
    if cfg.tis_cap is not None:
        terms = terms * np.where(k, np.minimum(np.exp(np.clip(old - _sel(behavior, k), -20, 20)), cfg.tis_cap), 0.0)
    pg = agg(terms)
    total = pg
    metrics = {"train/pg_loss": pg, "train/pg_clipfrac": agg(clipped.astype(float)),
               "train/pg_clipfrac_lower": agg(dual.astype(float)),
               "train/ppo_kl": agg(-np.clip(frozen - old, -20, 20))}
    # kept tokens at which a log ratio the loss takes is beyond the clamp of 20 or not finite
    out = ~(np.abs(frozen - old) <= 20)
    if cfg.tis_cap is not None:
        out |= ~(np.abs(old - _sel(behavior, k)) <= 20)
    if cfg.use_kl_loss:
        kl = agg(np.where(k, kl_terms(lp, _sel(ref, k), cfg.kl_loss_type, frozen), 0.0))
        total = total + cfg.kl_loss_coef * kl
        metrics["train/kl_loss"] = kl
        out |= ~(np.abs(frozen - _sel(ref, k)) <= 20)
    metrics["train/log_ratio_clampfrac"] = agg((k & out).astype(float))
    if entropy is not None:
        h = agg(_sel(entropy, k))
        total = total - cfg.entropy_coeff * h
        metrics["train/entropy"] = h
    if cfg.advantage_estimator == "ppo":
        v, R, v_old = _sel(values, k), _sel(returns, k), _sel(old_values, k)
        c = cfg.cliprange_value
        e1 = (v - R) ** 2
        e2 = (np.clip(v, v_old - c, v_old + c) - R) ** 2
        vf = agg(0.5 * np.maximum(e1, e2))
        total = total + cfg.vf_coef * vf
        metrics["train/vf_loss"] = vf
        metrics["train/vf_clipfrac"] = agg((k & (e2 > e1)).astype(float))
    metrics["train/loss"] = total
    return total, metrics


def numeric_grad(f, x, h=1e-6):
    """Central differences of a scalar float64 function, entry by entry."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        up, dn = x.copy(), x.copy()
        up[idx] += h
        dn[idx] -= h
        g[idx] = (f(up) - f(dn)) / (2 * h)
    return g


def ref_dpo(pc, pr, rc, rr, mc, mr, beta):
    kc, kr = _keep(mc), _keep(mr)
    delta = (_sel(pc, kc) - _sel(rc, kc)).sum(1) - (_sel(pr, kr) - _sel(rr, kr)).sum(1)
    z = beta * delta
    loss = np.mean(np.logaddexp(0.0, -z))  # -log sigmoid(z)
    empty = float((~kc.any(1) & ~kr.any(1)).sum())  # pairs with both responses empty (none here: they would leave the mean)
    return loss, {"train/loss": loss, "train/reward_margin": np.mean(z), "train/reward_accuracy": np.mean(delta > 0),
                  "train/empty_pairs": empty}
