"""Errors ember raises to its users."""


class EmberError(RuntimeError):
    """Base class of ember's errors."""


class EmberUnsupportedError(EmberError):
    """ember cannot lower this graph; `op` names the culprit, `shapes` its inputs."""

    def __init__(self, op, shapes="", detail=""):
        self.op, self.shapes, self.detail = op, shapes, detail
        msg = f"ember cannot lower {op}"
        if shapes:
            msg += f" with inputs {shapes}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


class EmberIndexError(IndexError, RuntimeError):
    """An index out of range found by a compiled graph's run-time check. Eager raises
    IndexError for embedding / indexing and RuntimeError for gather: this is both."""
