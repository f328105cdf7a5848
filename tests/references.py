"""Float64 NumPy references shared by more than one test file.

Written from the equations; nothing here calls dew_rl. Chapter notebooks keep their own references
in view of the reader; this module holds only those that several files under tests/ need.
"""
import numpy as np


def population_normalize(x, m, var_floor=1e-8):
    """m * (x - mu) / sqrt(max(var, floor)) over every valid position, population variance (ddof 0).

    Returns (normalised array, population variance of the valid values)."""
    k = np.asarray(m) != 0
    x = np.asarray(x, dtype=np.float64)
    v = x[k]
    mu = v.mean()
    var = ((v - mu) ** 2).mean()
    return np.where(k, (np.where(k, x, 0.0) - mu) / np.sqrt(max(var, var_floor)), 0.0), var
