"""The sandbox's one error type."""


class SandboxError(RuntimeError):
    """The sandbox could not be built, started or stopped; the message says what to do."""
