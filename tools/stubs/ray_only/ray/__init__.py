"""A stub `ray` for importing verl's loss code without Ray: verl's package import touches only
`ray.ObjectRef`. Any other attribute is a loud error, so nothing silently runs on the stub."""


class ObjectRef:
    pass


def __getattr__(name):
    raise AttributeError(f"ray stub (tools/stubs/ray_only): ray.{name} is not part of the reference run")
