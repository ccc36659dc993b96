"""The sync engine's pure decision core (no I/O, no asyncio, time passed in); contract in docs/contract.md.

- `options.SyncOptions(owner_prefix="k8s: ", ready_grace_s=60.0, drain_on_conditions=(),
  cordon_on_slurm_drain=False, max_reason_bytes=256)`: frozen; refuses an empty/control-laden prefix
  or a cap without room after it.
- `causes`: `Cause(kind, text)` with kinds `cordon`, `not-ready`, `condition`, `drain-annotation`,
  `terminating`, `scale-in`, `scheduler-hold`; `drain_causes(pod, node, *, now, opts, scale_in_of=None,
  held=None) -> Drain(causes, recheck_at, reason, automatic)` (texts cleaned and composed by
  syncer/model/reason.py: `distinct`, `compose`; stable order; `recheck_at` = when a pending
  Ready grace period ends, else None; `reason` = the Slurm reason they compose; `automatic` =
  `is_automatic(causes)`); `condition_text(cond)`;
  `is_automatic(causes)` (every cause in `AUTOMATIC` = not-ready, condition: the valve may hold it back;
  any `EXPLICIT` cause makes the drain an intent the valve never holds nor counts).
- `shown`: `shown(slurm, node_slurm=None) -> {Slurm name: Shown(reason_at, faults, message)}` for `slurm`
  and each known Slurm node in `node_slurm` (`shown_of(node)` for one): the reason's time in RFC 3339 (None
  without a reason or a time), `unhealthy_flags`, and the node's `reason_message` (its reason sanitised and
  capped at 1024 bytes once, when the node was read: syncer/model/slurm.py).
- `plan`: `decide(slurm, pod, node, *, now, opts, slurm_fresh, scale_in_of=None, node_slurm=None,
  held=None) -> Decision` (`drain_causes`, `shown`, then `decide_with(slurm, pod, node, drain, facts, *,
  now, opts, slurm_fresh, node_slurm=None)` on them: the three steps the reconcile takes) with
  `slurm_action: SlurmAction(kind "drain"|"undrain", reason, redrain=False) | None`, `annotations`
  (changes only, None deletes) on `annotations_on` ("pod"|"node"|None), `pod_conditions`, `node_conditions`,
  `cordon` ("cordon"|"uncordon"|None), `events: tuple[EventSpec(reason, message, type, on), ...]`, `causes`,
  `recheck_at`, `automatic`, `acts`; `drift(slurm, pod, node, opts, now, *, slurm_fresh=True,
  scale_in_of=None, node_slurm=None) -> bool`. `node_slurm`: [(Slurm name, SlurmNode | None)] of every
  bound slurmd pod on `node` when it hosts several; the Node's conditions then come from all of them through
  `shared_node_conditions(members, facts, *, slurm_fresh) -> (drained, healthy) | None` (None: leave them).
  Event and condition reason names are constants in `plan` (EVENT_*, DRAINED, ...); `is_ours(reason, opts)`
  (a reason the syncer wrote).
- `valve.DrainValve(max_fraction=0.10, window_s=60.0, min_nodes=3)`: `admit(key, now, bound_nodes) -> bool`
  (automatic drains only), `tick(now, bound_nodes=None) -> bool` (lets it close while idle), `reset()`,
  `forget(key)` (drained explicitly meanwhile), `threshold(bound_nodes)` = max(min_nodes,
  floor(max_fraction x bound)), `holds(key)`, `is_open`, `opened_at`, `refused`, `refused_total`, `pending`.
- `drift.drift_rows(cache, slurm_nodes, opts, now, *, include_unbound=False) -> [Row]`: the one drift
  computation of `status` and the demo (a NodeSet member being removed is judged with its scale-in cause).

Beside the core, with I/O: `controller.SyncController` (a runtime controller: read -> causes -> shown ->
decide -> admit -> apply), `read.Reader` (the read step: one `Reading` per pass), `reports.Reports`
(conflicts, missing nodes), `admit.Admission` (the Slurm action's watch gap, valve and echo; on the fresh
read, the action decided again) and `apply.Applier` (the decision's writes, in order, behind the write
gate). See docs/architecture.md.
"""
