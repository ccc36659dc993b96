"""From settings to live objects: the Slurm client, the Kubernetes client and the service."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from syncer.app.registry import registrations
from syncer.app.service import ServiceConfig, SyncerService
from syncer.app.settings import Settings
from syncer.kube.client import KubeClient
from syncer.slurm.auth import JwtKeyToken, NoToken, TokenFile, TokenSource
from syncer.slurm.client import SlurmClient


def slurm_client(settings: Settings) -> SlurmClient:
    token: TokenSource
    if settings.slurm_token_file:
        token = TokenFile(Path(settings.slurm_token_file), user=settings.slurm_jwt_user)
    elif settings.slurm_jwt_key_file:
        token = JwtKeyToken(Path(settings.slurm_jwt_key_file), user=settings.slurm_jwt_user)
    else:
        token = NoToken()  # a unix socket with rest_auth/local
    version = None if settings.slurm_api_version in ("", "auto") else settings.slurm_api_version
    return SlurmClient(settings.slurm_url, token, api_version=version, timeout_s=settings.slurm_timeout)


async def kube_client(settings: Settings) -> KubeClient:
    return await KubeClient.from_config(
        settings.kubeconfig or None, qps=settings.kube_qps, burst=settings.kube_burst
    )


def service_config(settings: Settings, environ: Mapping[str, str]) -> ServiceConfig:
    host, port = settings.listen_address
    return ServiceConfig(
        owner_prefix=settings.owner_prefix,
        controllers={r.name: r.options_from(settings.values) for r in registrations()},
        slurm_poll_interval_s=settings.slurm_poll_interval,
        slurm_probe_interval_s=settings.slurm_probe_interval,
        slurm_poll_strategy=settings.slurm_poll_strategy,
        slurm_stale_after_s=settings.slurm_stale_after,
        slurm_metrics_url=settings.slurm_metrics_url,
        slurm_metrics_port=settings.slurm_metrics_port,
        slurm_metrics_interval_s=settings.slurm_metrics_interval,
        slurm_metrics_floor_s=settings.slurm_metrics_floor,
        slurm_metrics_duty=settings.slurm_metrics_duty,
        slurm_metrics_lists_in_flight=settings.slurm_metrics_lists_in_flight,
        namespace=settings.namespace,
        bind_by_node_name=settings.bind_by_node_name,
        node_name_labels=settings.node_name_label,
        pod_selector=settings.pod_selector,
        workers=settings.workers,
        dry_run=settings.dry_run,
        leader_election=settings.leader_election,
        lease_namespace=settings.lease_namespace_resolved(environ),
        lease_name=settings.lease_name,
        cluster_name=settings.cluster_name_resolved(),
        adopt_unlabelled=settings.adopt_unlabelled,
        identity=settings.identity_resolved(),
        lease_duration_s=settings.lease_duration,
        renew_deadline_s=settings.renew_deadline,
        retry_period_s=settings.retry_period,
        listen_host=host,
        listen_port=port,
        jobs_poll_interval_s=settings.jobs_poll_interval,
    )


async def build_service(settings: Settings, environ: Mapping[str, str]) -> SyncerService:
    return SyncerService(
        slurm_client(settings), await kube_client(settings), service_config(settings, environ)
    )
