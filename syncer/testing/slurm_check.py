"""A short scripted check of the Slurm side on a fresh sandbox (what `scripts/demo` runs for now)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache, NodeChange
from syncer.slurm.client import SlurmClient
from syncer.testing.sandbox import Sandbox, up


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


async def scenario(sandbox: Sandbox) -> None:
    async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
        assert client.version is not None
        say(f"slurmrestd at {sandbox.rest_url} speaks {client.version.name}; listing nodes")
        listing = await client.list_all_nodes()
        say(f"{len(listing.nodes)} nodes, {listing.body_bytes / 1e6:.1f} MB in {listing.seconds:.2f} s")
        node = "node00001"
        cache = NodeCache(client, poll_interval_s=0.2)
        drained = asyncio.Event()

        def on_changes(changes: list[NodeChange]) -> None:
            if any(c.name == node and c.after is not None and c.after.drain_flag for c in changes):
                drained.set()

        cache.subscribe(on_changes)
        await cache.poll_once()
        poller = asyncio.create_task(cache.run())
        try:
            say(f"draining {node} through slurmrestd with an owned reason")
            written = time.monotonic()
            await client.update_node(node, state=["DRAIN"], reason="k8s: demo drain")
            shown = sandbox.run("sinfo", "-h", "-n", node, "-o", "%T %E").stdout.strip()
            say(f"sinfo now says: {shown}")
            await asyncio.wait_for(drained.wait(), timeout=30)
            say(f"the node cache saw the drain {time.monotonic() - written:.2f} s after the write")
            await client.update_node(node, state=["UNDRAIN"])
            state = sandbox.run("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()
            say(f"undrained (UNDRAIN, not RESUME): {state}")
            say(
                f"cache: {cache.stats.probes} probes, {cache.stats.not_modified} answered 304, "
                f"{cache.stats.full_fetches} full lists"
            )
        finally:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="slurm-syncer-demo-")) / "sandbox"
    say(f"starting a real Slurm 24.11 sandbox with {args.nodes} CLOUD nodes in {directory}")
    sandbox = up(directory, nodes=args.nodes)
    try:
        asyncio.run(scenario(sandbox))
    finally:
        if args.keep:
            say("left running; try:")
            print(sandbox.exports())
            print(f"slurm-syncer sandbox down --dir {directory}")
        else:
            sandbox.down()
            say("sandbox stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
