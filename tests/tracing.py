"""Counting compilations without reading jit's private cache.

`jax.jit(f)._cache_size()` reads the C++ dispatch cache, which a long-lived pytest worker does not always use (a
fresh-clone run found it at 0 after calls that compiled). A trace is what a recompilation costs and a Python list
appended to inside the traced function records each one, whatever the dispatch path.
"""
import jax


def jit_counting_traces(fn, **jit_kwargs):
    "`(jax.jit(fn), traces)`: `len(traces)` is how many times fn was traced, i.e. compiled for a new signature."
    traces = []

    def traced(*args, **kwargs):
        traces.append(None)
        return fn(*args, **kwargs)
    return jax.jit(traced, **jit_kwargs), traces
