"""The only code that talks to slurmrestd.

- `client.SlurmClient(url, token_source, api_version=None, timeout_s=10, deadline_s=30, attempts=5)`:
  `start()` negotiates the API version (newest of v0.0.44..v0.0.40 the server serves, or the pinned one);
  `ping()`, `list_nodes(update_time=None) -> NodeListing | None` (None: HTTP 304, nothing changed),
  `list_all_nodes()`, `get_node(name)`, `update_node(name, state=, reason=, comment=, features=)`,
  `delete_node(name)`, `list_partitions()`, `list_jobs()`, `diag()`, `diag_sized()`; `stats` counts
  requests, seconds and bytes per endpoint. URLs: http://, https://, unix:///path. The version is chosen
  again whenever slurmrestd may have been replaced (`version_follow`: seen away, a path answered as not
  served (`SlurmPathNotServed`), another release answering, `version_may_change(why)`: slurmctld started
  anew; seen away and slurmctld started anew are settled by a check under the version in use when it
  still stands); `subscribe_versions(callback())` tells of a change.
  `slurmctld_conf()` (`GET /conf`, v0.0.45: SlurmctldPort, MetricsType, ReconfigFlags ->
  `keeps_partitions`, the power-saving Suspend*/Resume* settings; None before). Partitions:
  `partition_states()` (typed, any version), `put_partition(name, settings, nodes=)` and
  `delete_partition(name)` (v0.0.45 only: `partition_writes`; SlurmVersionError before any request elsewhere).
- `partitions`: `PartitionSettings` (None = not managed), `PartitionState`, `check` (InvalidPartition for what
  Slurm would refuse or store wrongly), `body`, `node_changes(have, want) -> "+a,-b"`, `partition_in_use`.
- `auth`: `StaticToken`, `TokenFile` (re-read on change or rejection), `JwtKeyToken` (minted HS256,
  renewed before expiry), `NoToken` (rest_auth/local over a unix socket). Tokens never reach logs or errors.
- `errors`: `SlurmError` > `SlurmConnectionError`, `SlurmTimeout`, `SlurmAuthError`, `SlurmDecodeError`,
  `SlurmVersionError`, `SlurmPathNotServed`, `SlurmApiError` (carries Slurm's errors and warnings) >
  `SlurmNotFound`.
- `cache.NodeCache(client, poll_interval_s=1, strategy="conditional"|"full", max_duty=0.25, stale_after_s=)`:
  `run()` polls; `subscribe(callback(list[NodeChange]))`; `nodes`, `synced`, `stale`, `age_s`, `nudge()`;
  `subscribe_fresh(callback())`: once each time the data turns fresh after being stale (or before the first
  answer), for decisions withheld on stale data (the JobCache has it too).
- `cache.NodeCache(..., hint=MetricsReader(url), hint_floor_s=30)`: slurmctld's node-state counts decide
  when to list; a full check at least every `hint_floor_s`; a failing hint falls back to probes; while the
  counts keep moving, a list starts when they move again during one (`lists_in_flight=2`), half a list's
  time after it (`list_spacing()`: evenly spaced starts).
- `cache.NodeCache.subscribe_reloads(callback())`: called once slurmctld reloaded (reconfigure, restart) and a
  list asked for after it is applied; `reload.ReloadWatch` reads slurmctld's start marker for it.
- `metrics_hint.MetricsReader(url, timeout_s=2, max_bytes=4 MiB).read() -> Reading(fingerprint, ...)`:
  `GET /metrics/partitions` of slurmctld 25.11+; errors `SlurmMetricsError` > `SlurmMetricsUnavailable`,
  `SlurmMetricsTimeout`, `SlurmMetricsDecodeError`.
- Jobs for pods (issue 44; value types in `syncer.model.jobs`): `submit_job(JobSubmission, placeholder=False)
  -> int` (external on v0.0.43+, a placeholder batch job where allowed, else SlurmUnsupported; never retried),
  `get_job(id) -> SlurmJob` (SlurmNotFound), `list_job_details(update_time=None, keep=) -> JobListing | None`,
  `job_states(ids) -> {id: states}`, `cancel_job(id, signal=None) -> bool`, `update_job(id, hold=, priority=,
  nice=, time_limit_min=)`; `jobs`: the wire shapes and bodies (the marker is `admin_comment`).
- `job_cache.JobCache(client, owned=, poll_interval_s=1, detail_interval_s=5, pending_interval_s=30,
  list_interval_s=600, hint=None, live_interval_s=None, pending_first_s=None)` (the last two: the states of
  the jobs not yet ended read this often; a tracked pending job read whole again 1x, 2x, 4x ... this after):
  `run()`, `subscribe(callback(list[JobChange]))`, `jobs`, `synced`, `stale`, `age_s`, `cause`, `track(id)`,
  `fresh(id)`, `resync()`, `forget(id)`, `nudge()`.
- `versions`: what differs per API version (live-verified: v0.0.40, v0.0.41, v0.0.42).
"""
