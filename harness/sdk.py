"""The anthropic SDK, loaded on first use.

Relied on by config (the client), model_call (the SDK's errors, and httpx's) and errors.
Importing the SDK takes about 2.5 s, which `--help`, a usage error, a REPL without a key and
importing a lesson do not need; so it loads when first touched (importlib's LazyLoader).
Without it each of those waits, and a missing SDK is a traceback at import instead of cli's
one line.
"""

import importlib.util
import sys


def _lazy(name: str):
    """The module, loaded on first attribute access; None if it is not installed."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


anthropic = _lazy("anthropic")   # None: not installed (cli says how to install it)
# The SDK's HTTP library: httpx2 in the releases requirements.txt allows (classic httpx, which
# other packages install too, would not match its errors); httpx in older ones.
httpx = _lazy("httpx2") or _lazy("httpx")
