{{/* What decides the ServiceAccount's rights (syncer/app/permissions.py says the same in Python). */}}

{{- define "slurm-syncer.leaseName" -}}
{{- default (include "slurm-syncer.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The Lease's namespace, which is also where Events about Nodes and the syncer go. */}}
{{- define "slurm-syncer.leaseNamespace" -}}
{{- default .Release.Namespace (index .Values.config "lease-namespace") }}
{{- end }}

{{/* "true" when the NodeSet reconciler runs (its option defaults to on). */}}
{{- define "slurm-syncer.nodesetEnabled" -}}
{{- $on := index .Values.config "nodeset-enabled" }}
{{- if kindIs "invalid" $on }}true{{ else }}{{ $on | toString }}{{ end }}
{{- end }}

{{/* "true" when unlabelled NodeSets and SlurmPartitions are taken (config.adopt-unlabelled, default on). */}}
{{- define "slurm-syncer.adoptsUnlabelled" -}}
{{- $on := index .Values.config "adopt-unlabelled" }}
{{- if kindIs "invalid" $on }}true{{ else }}{{ $on | toString }}{{ end }}
{{- end }}

{{/* The rights on slurmd pods, their Events and the NodeSets, cluster-wide or in one namespace. */}}
{{- define "slurm-syncer.workloadRules" -}}
# slurmd pods: informer, fresh read after a conflict; NodeSet pods: scale-out, scale-in, labels
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch{{ if eq (include "slurm-syncer.nodesetEnabled" .) "true" }}, create, delete, patch{{ end }}]
# Slurm state (conditions and annotations) on slurmd pods, one patch on /status
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
# Events about pods, NodeSets, SlurmPartitions and Slinky's NodeSets and Controllers, aggregated when repeated
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- if eq (include "slurm-syncer.nodesetEnabled" .) "true" }}
# NodeSet reconciler: its informer and status; with config.adopt-unlabelled, the label it writes on a
# NodeSet no release has taken yet (read first)
- apiGroups: [slurm-syncer.dev]
  resources: [nodesets]
  verbs: [list, watch{{ if eq (include "slurm-syncer.adoptsUnlabelled" .) "true" }}, get, patch{{ end }}]
- apiGroups: [slurm-syncer.dev]
  resources: [nodesets/status]
  verbs: [patch]
# a NodeSet's PodDisruptionBudget for busy slurmd pods (created once, never changed)
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create]
{{- end }}
{{- end }}

{{/* Options that decide the rights must be chart values, not extraArgs, or the RBAC would not follow. */}}
{{- define "slurm-syncer.validateRbac" -}}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" (toString .) "" }}
{{- range $option := list "namespace" "lease-namespace" "nodeset-enabled" "partitions-enabled" "slinky-partitions" "topology-kueue" "lease-name" "leader-election" "scheduler-name" "scheduler-namespaces" }}
{{- if or (eq $flag (printf "--%s" $option)) (eq $flag (printf "--no-%s" $option)) }}
{{- fail (printf "extraArgs: %s decides the chart's RBAC; set it as a value instead (config.%s, leaderElection.* for the Lease, scheduler.* for the scheduler)" $flag $option) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The scheduler's rights in each namespace it serves (scheduler.namespaces). */}}
{{- define "slurm-syncer.schedulerRules" -}}
# its pods (spec.schedulerName): informer, a fresh read before a bind or delete; deleted when their Slurm
# job ends (or a gang member goes)
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete]
# binding a pod to the Node of the Slurm node its job was allocated
- apiGroups: [""]
  resources: [pods/binding]
  verbs: [create]
# PodScheduled=False with Slurm's reason while the job waits
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
# Events on its pods (job submitted, bound, torn down), aggregated when repeated
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
# a batch/v1 Job owning pods: its parallelism and completions make the gang
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get]
{{- end }}
