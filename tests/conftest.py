"""Shared fixtures: the real Slurm sandbox, the Kubernetes API emulator and the real API server."""

pytest_plugins = [
    "tests.fixtures.slurm",
    "tests.fixtures.kube",
    "tests.fixtures.kube_real",
    "tests.fixtures.kube_targets",
]


def pytest_configure(config: object) -> None:
    """The syncers under test log through structlog's default console renderer, whose default exception
    formatter is rich's with every frame's locals: at load 13-15 each logged exception (a reconcile retried
    on a 404, a Slurm timeout) held the event loop the syncer, the emulator and the test share for 9-33 s,
    so slurmrestd looked silent for minutes (tests/e2e/test_nodeset_power.py, 35 such tracebacks in one
    run). Plain tracebacks: the same frames, without the locals and the layout."""
    import structlog

    processors = list(structlog.get_config()["processors"])
    if processors and isinstance(processors[-1], structlog.dev.ConsoleRenderer):
        processors[-1] = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        structlog.configure(processors=processors)
