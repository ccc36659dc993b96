"""`slurm-syncer check`: preflight, item by item, with what to fix."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from syncer.app import check_scope, permissions
from syncer.app import settings as settings_mod
from syncer.app.check_power import PowerNodeSet, power_checks, power_nodesets
from syncer.app.check_scheduler import lines as scheduler_lines
from syncer.app.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_output_argument, dump, load_settings
from syncer.app.permissions import Right
from syncer.app.service import hint_reader
from syncer.app.status_cmd import CONNECTION_OPTIONS, OTHERS_FROM_ENV
from syncer.app.wiring import kube_client, slurm_client
from syncer.controllers.nodeset.manifests import nodesets_path
from syncer.controllers.partitions.controller import PATH as PARTITIONS_PATH
from syncer.controllers.partitions.plan import ADD_KEEP, NEEDS
from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import expiry_check
from syncer.slurm.cache import POLLER_LISTS_PER_MINUTE, busiest_lists_per_minute
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmAuthError, SlurmError
from syncer.slurm.metrics_hint import SlurmMetricsError
from syncer.slurm.metrics_locate import COST, REMEDY, LocatedMetricsReader
from syncer.slurm.versions import VERSIONS, ApiVersion

# the options check's help lists; the others come from the environment or --config, as for `run`
CHECK_OPTIONS = (*CONNECTION_OPTIONS, "slurm-metrics-url", "slurm-metrics-port", "dry-run")


@dataclass(frozen=True)
class Item:
    ok: bool
    what: str
    fix: str = ""
    warn: bool = False  # works, but not as well as it could: shown, not counted as a failure


async def check_hint(client: SlurmClient, url: str, port: int, poll_interval_s: float) -> Item:
    """Whether slurmctld's node counts can spare slurmrestd (--slurm-metrics-url); what it costs if not."""
    if url in ("off", ""):
        cost = await predicted_cost(client, poll_interval_s)
        return Item(True, f"slurmctld's metrics hint: off; {cost}", warn=True, fix=REMEDY)
    reader = hint_reader(client, url, port)
    assert reader is not None
    try:
        reading = await reader.read()
    except SlurmMetricsError as exc:
        cost = await predicted_cost(client, poll_interval_s)
        return Item(True, f"slurmctld's metrics hint ({url}) unusable: {exc}; {cost}", warn=True, fix=REMEDY)
    finally:
        await reader.close()
    partitions = len({partition for partition, _, _ in reading.fingerprint})
    where, how = url, url
    if isinstance(reader, LocatedMetricsReader):  # auto: where it found slurmctld, and from what
        where, how = reader.url, f"{url}, found from {reader.source}"
    return Item(
        True, f"slurmctld's metrics hint: node counts of {partitions} partition(s) read at {where} ({how})"
    )


async def predicted_cost(client: SlurmClient, poll_interval_s: float) -> str:
    """What polling without the hint costs on this cluster, from the time of one node list here."""
    started = time.perf_counter()
    try:
        await client.list_all_nodes()
    except SlurmError:
        return COST
    list_s = time.perf_counter() - started
    lists = busiest_lists_per_minute(list_s, poll_interval_s)
    return (
        f"{COST}: on a busy cluster up to {lists:.0f} lists a minute here (one took {list_s:.2f} s), "
        f"{lists / POLLER_LISTS_PER_MINUTE:.1f} x the slurmrestd bytes of a full list every 30 s"
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="preflight: can the syncer reach and change Slurm and Kubernetes?",
        description="Check, item by item, what `slurm-syncer run` needs, and say what to fix. It writes "
        "nothing but the write probe (one node's comment rewritten with its own value), which --dry-run "
        f"and --no-write-probe skip. Exit code {EXIT_FAILED} when an item fails. {OTHERS_FROM_ENV}",
    )
    add_output_argument(parser, "text")
    parser.add_argument(
        "--no-write-probe",
        action="store_true",
        help="do not rewrite a Slurm node's comment to learn whether the token may update nodes",
    )
    settings_mod.add_arguments(parser, CHECK_OPTIONS)
    parser.set_defaults(func=run)


def check_topology(client: SlurmClient, settings: settings_mod.Settings) -> list[Item]:
    """Topology from labels is written only where the REST API takes `topology_str` (Slurm 25.05+)."""
    named = [n for n in (settings.value("topology_block_name"), settings.value("topology_tree_name")) if n]
    if not named or client.version is None:
        return []
    api = f"API {client.version.name}" + (f" (Slurm {client.release})" if client.release else "")
    if client.version.topology:
        return [Item(True, f"node topology from labels can be written ({', '.join(named)}; {api})")]
    return [
        Item(
            False,
            f"node topology from labels ({', '.join(named)}) needs Slurm 25.05+ (REST v0.0.43+); "
            f"{api} has no topology_str: nothing will be written",
            "upgrade Slurm to 25.05+, or leave --topology-block-name and --topology-tree-name empty",
        )
    ]


async def listed(kube: KubeClient, path: str) -> list[dict[str, Any]] | None:
    """The objects at `path` ([] without the CRD); None when they cannot be listed (RBAC items say why)."""
    try:
        found = await kube.get(path, {"limit": "500"})
    except KubeError as exc:
        return [] if exc.status == 404 else None
    return list(found.get("items") or [])


async def check_partitions(client: SlurmClient, why: str) -> list[Item]:
    """SlurmPartitions are written only over REST v0.0.45 (Slurm 26.05+) and where slurmctld keeps them over
    a reconfigure (ReconfigFlags=KeepPartInfo; without it a reconfigure deletes them and kills their jobs).
    `why`: what makes partitions matter here (the option, the CRs found)."""
    if client.version is None:
        return []
    api = f"API {client.version.name}" + (f" (Slurm {client.release})" if client.release else "")
    if not client.partition_writes:
        return [
            Item(
                False,
                f"SlurmPartitions ({why}): {NEEDS}; {api} cannot write partitions, nothing will be written",
                "upgrade Slurm to 26.05+, or turn --partitions-enabled off",
            )
        ]
    try:
        conf = await client.slurmctld_conf()
    except SlurmError as exc:
        return [Item(False, f"SlurmPartitions ({why}): slurmctld's /conf not read: {exc}", ADD_KEEP)]
    if conf is None or not conf.keeps_partitions:
        return [
            Item(False, f"SlurmPartitions ({why}): slurmctld's ReconfigFlags lacks KeepPartInfo", ADD_KEEP)
        ]
    return [Item(True, f"SlurmPartitions ({why}) can be written: {api}, ReconfigFlags=KeepPartInfo")]


async def check_slurm(client: SlurmClient, skip_probe: str = "") -> list[Item]:
    """Slurm's items; `skip_probe` names why the write probe is not made (empty: it is)."""
    items = []
    try:
        version = await client.start()
    except SlurmError as exc:
        return [
            Item(
                False,
                f"slurmrestd at {client.url}: {exc}",
                "check --slurm-url, that slurmrestd runs, and the network path",
            )
        ]
    with contextlib.suppress(SlurmError):
        await client.ping()  # its answer names Slurm's release; a failure shows at the node list below
    items.append(
        Item(
            True,
            f"slurmrestd at {client.url} answers; API {version.name} in use"
            + (f" (Slurm {client.release})" if client.release else ""),
        )
    )
    items.extend(_version_items(version))
    try:
        listing = await client.list_all_nodes()
        items.append(Item(True, f"token accepted: {len(listing.nodes)} Slurm nodes listed"))
    except SlurmAuthError as exc:
        return [
            *items,
            Item(
                False,
                f"token rejected: {exc}",
                "give a valid token (--slurm-token-file) or the JWT key (--slurm-jwt-key-file)",
            ),
        ]
    except SlurmError as exc:
        return [*items, Item(False, f"node list failed: {exc}", "see slurmrestd's log")]
    if listing.nodes:
        items.append(await _write_probe(client, listing.nodes[0], skip_probe))
    return items


def _version_items(version: ApiVersion) -> list[Item]:
    """What the API version in use cannot do, or has not been verified to do."""
    items = []
    if not version.reservation_writes:
        items.append(
            Item(
                True,
                f"maintenance windows need Slurm 25.05+: API {version.name} cannot create reservations, so "
                "windows are reported on their Nodes (Event, condition, metric) and not reserved in Slurm",
                warn=True,
            )
        )
    if not version.verified_live:
        verified = ", ".join(v.name for v in VERSIONS.values() if v.verified_live)
        items.append(
            Item(
                False,
                f"API {version.name} is not verified against a live Slurm by this release",
                f"pin a verified one with --slurm-api-version ({verified})",
            )
        )
    return items


async def _write_probe(client: SlurmClient, probe: SlurmNode, skip_probe: str) -> Item:
    """Whether the token may update nodes: `probe`'s comment rewritten with its own value, or why not."""
    if skip_probe:
        return Item(
            True,
            f"write probe skipped ({skip_probe}): whether the token may update nodes (drain/undrain) "
            "is not checked",
            "run check once without --dry-run and --no-write-probe: its write probe rewrites one "
            "node's comment with the comment it has",
            warn=True,
        )
    try:
        # rewriting a node's comment with its current value changes nothing but needs operator rights
        await client.update_node(probe.name, comment=probe.comment)
    except SlurmError as exc:
        return Item(
            False,
            f"token may not update nodes: {exc}",
            "use a token of SlurmUser or of an operator (sacctmgr modify user NAME set adminlevel=operator)",
        )
    return Item(
        True,
        "token may update nodes (drain/undrain): write probe rewrote the comment of "
        f"{probe.name} with its own value (--no-write-probe skips it)",
    )


async def check_kube(client: KubeClient, rights: list[Right]) -> list[Item]:
    try:
        version = await client.get("/version")
    except KubeError as exc:
        return [
            Item(
                False,
                f"Kubernetes API at {client.server}: {exc.message}",
                "check --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster service account",
            )
        ]
    items = [
        Item(
            True,
            f"Kubernetes API at {client.server} answers (version {version.get('gitVersion', '?')}); "
            f"credentials from {client.credentials}",
        )
    ]
    for right in rights:  # only what this configuration uses, in the scope it uses it
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": right.resource_attributes()},
        }
        name = str(right)
        try:
            answer = await client.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
        except KubeError as exc:
            items.append(
                Item(
                    False,
                    f"cannot ask whether I may {name}: {exc.message}",
                    "grant create on selfsubjectaccessreviews",
                )
            )
            continue
        allowed = bool((answer.get("status") or {}).get("allowed"))
        items.append(
            Item(
                allowed,
                f"may {name}: {right.why}",
                "" if allowed else "grant it to the syncer's ServiceAccount (the Helm chart does)",
            )
        )
    return items


def probe_skipped(settings: settings_mod.Settings, no_write_probe: bool) -> str:
    """Why check must not write to Slurm ("" when it may): a dry run writes nothing anywhere."""
    if settings.dry_run:
        return "--dry-run" if settings.sources.get("dry_run") == "flag" else "dry-run configuration"
    return "--no-write-probe" if no_write_probe else ""


async def collect(settings: settings_mod.Settings, no_write_probe: bool = False) -> list[Item]:
    slurm = slurm_client(settings)
    try:
        items = await check_slurm(slurm, probe_skipped(settings, no_write_probe))
        items += check_topology(slurm, settings)
        if all(item.ok for item in items):
            url, port = settings.slurm_metrics_url, settings.slurm_metrics_port
            # up to: where "changed" is a 500 (24.11) a list may follow each quick probe, under the duty limit
            every = min(settings.slurm_poll_interval, settings.slurm_probe_interval)
            items.append(await check_hint(slurm, url, port, every))
    finally:
        await slurm.close()
    items += [Item(*line) for line in expiry_check(slurm.token, time.time())]  # the token's own exp
    try:
        kube = await kube_client(settings)
    except KubeError as exc:
        return [
            *items,
            Item(
                False,
                exc.message,
                "check --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster service account",
            ),
        ]
    try:
        lease_namespace = settings.lease_namespace_resolved(os.environ)
        items += await check_kube(kube, permissions.needed(settings, lease_namespace))
        partitions = await listed(kube, PARTITIONS_PATH)
        nodesets = await listed(kube, nodesets_path(settings.namespace))
        items += await check_scheduler(settings, kube)
    finally:
        await kube.close()
    name, adopts = settings.cluster_name_resolved(), settings.adopt_unlabelled
    source = "--cluster-name" if settings.cluster_name else "the lease name; set --cluster-name to choose"
    found = check_scope.scoped("SlurmPartition", partitions or []) + check_scope.scoped(
        "NodeSet", nodesets or []
    )
    items += [Item(*line) for line in check_scope.scope_lines(name, source, adopts, found)]
    # the objects this release acts on (its own, and the unlabelled ones it would take); None: not listed
    declared = len(check_scope.ours(partitions, name, adopts)) if partitions is not None else None
    powered = power_nodesets(check_scope.ours(nodesets or [], name, adopts))
    why = "--partitions-enabled" if settings.value("partitions_enabled") else ""
    why = "; ".join(w for w in (why, f"{declared} SlurmPartition(s) exist" if declared else "") if w)
    if why or powered:
        slurm = slurm_client(settings)
        try:
            with contextlib.suppress(SlurmError):  # unreachable: check_slurm's item says so already
                await slurm.start()
            if why:
                items += await check_partitions(slurm, why)
            if powered:
                items += await check_power_saving(slurm, powered)
        finally:
            await slurm.close()
    return items


async def check_scheduler(settings: settings_mod.Settings, kube: KubeClient) -> list[Item]:
    """The one-pool scheduler: on or off, its name and namespaces, whether this Slurm can stand a job for a
    pod, and the pods waiting with why."""
    options = settings.controller_options("scheduler")
    slurm = slurm_client(settings)
    try:
        with contextlib.suppress(SlurmError):  # unreachable: check_slurm's item says so already
            if options.enabled:
                await slurm.start()
        release = f"{settings.lease_namespace_resolved(os.environ)}/{settings.lease_name}:{options.name}"
        found = await scheduler_lines(
            slurm, kube, options.name, options.namespaces, options.placeholder, release
        )
    finally:
        await slurm.close()
    return [Item(*line) for line in found]


async def check_power_saving(client: SlurmClient, nodesets: list[PowerNodeSet]) -> list[Item]:
    """What slurmctld's power saving needs for NodeSets with spec.power, from its GET /conf (26.05+)."""
    if client.version is None:
        return []  # slurmrestd unreachable: check_slurm's item says so
    api = f"API {client.version.name}" + (f" (Slurm {client.release})" if client.release else "")
    try:
        conf = await client.slurmctld_conf()
    except SlurmError as exc:
        names = ", ".join(map(str, nodesets))
        return [
            Item(
                False,
                f"power saving for NodeSet(s) {names}: slurmctld's /conf not read: {exc}",
                "see slurmrestd's log",
            )
        ]
    return [Item(*line) for line in power_checks(conf, nodesets, api)]


TEXT_LABEL = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}


def status_of(item: Item) -> str:
    return ("warn" if item.warn else "ok") if item.ok else "fail"


def report(items: list[Item], fmt: str) -> str:
    failed = sum(not i.ok for i in items)
    warned = sum(i.ok and i.warn for i in items)
    if fmt != "text":
        listed = [{"status": status_of(i), "what": i.what, "fix": i.fix} for i in items]
        return dump({"items": listed, "ok": len(items) - failed, "failed": failed, "warned": warned}, fmt)
    lines = []
    for item in items:
        lines.append(f"{TEXT_LABEL[status_of(item)]:<4}  {item.what}")
        if (item.warn or not item.ok) and item.fix:
            lines.append(f"      fix: {item.fix}")
    lines.append(f"{len(items) - failed} ok, {failed} failed" + (f" ({warned} to improve)" if warned else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    settings = load_settings("check", args)
    if settings is None:
        return EXIT_USAGE
    items = asyncio.run(collect(settings, args.no_write_probe))
    print(report(items, args.output))
    return EXIT_OK if all(item.ok for item in items) else EXIT_FAILED
