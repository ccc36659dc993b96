"""The one-pool scheduler (issue 44): pods with `schedulerName: slurm-syncer` become Slurm jobs and run on the
Kubernetes Node of the Slurm node Slurm allocated. This package holds its pure core (docs/scheduler.md):
`values` (the plain inputs), `quantity` and `slurmtime` (exact parsing), `settings` (the annotations),
`request` (pod -> job request), `marker` (the job names its pods), `gang` (pods -> gangs), `placement`
(what kube-scheduler would check) and `plan` (gang + world -> actions)."""
