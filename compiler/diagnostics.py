"""One warning per distinct problem per process: a fallback is worth telling once."""
import warnings

_warned = set()


def warn_once(key, message, stacklevel=3):
    if key in _warned:
        return False
    _warned.add(key)
    warnings.warn(message, stacklevel=stacklevel)
    return True


def reset():
    _warned.clear()
