"""`slurm-syncer run`: the daemon."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys

import structlog

from syncer.app import settings as settings_mod
from syncer.app.output import EXIT_USAGE, load_settings
from syncer.app.service import SyncerService
from syncer.app.wiring import build_service
from syncer.kube.errors import KubeError
from syncer.runtime.gc_pauses import FreezeAfterFullPasses
from syncer.runtime.memory import keep_big_buffers_off_the_heap
from syncer.slurm.errors import SlurmError

log = structlog.get_logger("syncer.app")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="keep Slurm and Kubernetes in agreement (the daemon)",
        description="Keep Slurm and Kubernetes in agreement. Options: docs/configuration.md.",
    )
    settings_mod.add_arguments(parser)
    parser.set_defaults(func=run)


def fail(message: str, code: int) -> int:
    print(f"slurm-syncer run: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    settings = load_settings("run", args)
    if settings is None:
        return EXIT_USAGE
    keep_big_buffers_off_the_heap()  # a 10,000-node list is 23 MB: its pages must not stay resident
    FreezeAfterFullPasses().install()  # a full GC pass over 10,000 nodes' caches held the loop 0.2-0.4 s
    return asyncio.run(_run(settings))


async def _run(settings: settings_mod.Settings) -> int:
    try:
        service = await build_service(settings, os.environ)
    except (KubeError, SlurmError, ValueError) as exc:
        return fail(str(exc), 2)
    try:
        await service.kube.get("/version")
    except KubeError as exc:
        await service.kube.close()
        return fail(
            f"cannot reach the Kubernetes API at {service.kube.server}: {exc.message} (check --kubeconfig)", 1
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        if not await start_or_stop(service, stop):  # start() waits while slurmrestd does not answer
            log.info("stopping", reason="signal while waiting for slurmrestd")
            await service.stop()
            return 0
    except OSError as exc:
        await service.stop()
        return fail(
            f"cannot serve on {settings.listen_address[0]}:{settings.listen_address[1]}: {exc.strerror}", 1
        )
    log.info("slurm-syncer running", dry_run=settings.dry_run, leader_election=settings.leader_election)
    return await serve(service, stop)


async def start_or_stop(service: SyncerService, stop: asyncio.Event) -> bool:
    """service.start(), unless `stop` is set first (False)."""
    starting = asyncio.create_task(service.start())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
    if starting.cancelled():
        return False
    starting.result()  # raises what start() raised (a port already in use)
    return True


async def serve(service: SyncerService, stop: asyncio.Event) -> int:
    """Until `stop` is set (0) or a background task ends by itself (1, so Kubernetes restarts the
    pod: a daemon with a dead loop must not keep answering its probes)."""
    waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(service.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    failure = service.manager.failure
    log.info("stopping", reason=str(failure) if failure else "signal")
    await service.stop()
    if failure is not None:
        print(f"slurm-syncer run: {failure}; exiting so that it is restarted", file=sys.stderr)
        return 1
    return 0
