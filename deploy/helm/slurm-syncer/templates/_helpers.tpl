{{/* Names and labels shared by every object of the chart. */}}

{{- define "slurm-syncer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-syncer.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "slurm-syncer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-syncer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slurm-syncer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "slurm-syncer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: syncer
app.kubernetes.io/part-of: slurm-syncer
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "slurm-syncer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "slurm-syncer.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when image.digest is set (the digest alone picks the image). */}}
{{- define "slurm-syncer.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret key and the file the syncer reads for the chosen auth type. */}}
{{- define "slurm-syncer.authKey" -}}
{{- $auth := .Values.slurm.auth }}
{{- if $auth.secretKey }}{{ $auth.secretKey }}
{{- else if eq $auth.type "jwtKey" }}jwt_hs256.key
{{- else }}token
{{- end }}
{{- end }}

{{- define "slurm-syncer.authFile" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.slurm.auth.mountPath) (include "slurm-syncer.authKey" .) }}
{{- end }}

{{/* The port of slurm.url: the one it names, else 443 for https and 80 for http. */}}
{{- define "slurm-syncer.slurmrestdPort" -}}
{{- if .Values.networkPolicy.slurmrestd.port }}
{{- .Values.networkPolicy.slurmrestd.port }}
{{- else }}
{{- $url := urlParse .Values.slurm.url }}
{{- $hostPort := splitList ":" $url.host }}
{{- if gt (len $hostPort) 1 }}
{{- last $hostPort }}
{{- else if eq $url.scheme "https" }}443
{{- else }}80
{{- end }}
{{- end }}
{{- end }}

{{/* slurmctld's metrics port(s) for the hint (--slurm-metrics-url), comma-separated; empty when it is off:
networkPolicy.slurmctld.ports, else the port of the URL given, else config.slurm-metrics-port for auto. */}}
{{- define "slurm-syncer.slurmctldPorts" -}}
{{- $hint := toString (index .Values.config "slurm-metrics-url" | default "auto") }}
{{- if not (has $hint (list "off" "")) }}
{{- if .Values.networkPolicy.slurmctld.ports }}
{{- join "," .Values.networkPolicy.slurmctld.ports }}
{{- else if eq $hint "auto" }}
{{- index .Values.config "slurm-metrics-port" | default 6817 | int64 }}
{{- else }}
{{- $url := urlParse $hint }}
{{- $hostPort := splitList ":" $url.host }}
{{- if gt (len $hostPort) 1 }}{{ last $hostPort }}{{- else if eq $url.scheme "https" }}443{{- else }}80{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Refuse combinations that would not work, with a message saying why. */}}
{{- define "slurm-syncer.validate" -}}
{{- if not .Values.slurm.url }}
{{- fail "slurm.url is required: the slurmrestd URL, e.g. http://slurmrestd.slurm.svc:6820" }}
{{- end }}
{{- if not (has .Values.slurm.auth.type (list "token" "jwtKey" "none")) }}
{{- fail (printf "slurm.auth.type must be token, jwtKey or none, not %q" .Values.slurm.auth.type) }}
{{- end }}
{{- if and (ne .Values.slurm.auth.type "none") (not .Values.slurm.auth.secretName) }}
{{- fail "slurm.auth.secretName is required for slurm.auth.type token or jwtKey" }}
{{- end }}
{{- if not (has .Values.bindings.mode (list "podLabel" "nodeName")) }}
{{- fail (printf "bindings.mode must be podLabel or nodeName, not %q" .Values.bindings.mode) }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled: without it every replica writes" }}
{{- end }}
{{- if not (index .Values.config "pod-selector") }}
{{- fail "config.pod-selector is empty: every pod of the cluster would be listed and watched, on every replica. Set it to the label of your slurmd pods: slurm-syncer.dev/node-name (pods labelled for slurm-syncer, its NodeSets' pods), app.kubernetes.io/name=slurmd (Slinky's NodeSet pods), or your own" }}
{{- end }}
{{- if and .Values.scheduler.enabled (not .Values.scheduler.namespaces) }}
{{- fail "scheduler.enabled needs scheduler.namespaces: the namespaces whose pods it schedules (a Role is granted in each; the chart does not grant binding pods in every namespace)" }}
{{- end }}
{{- if and .Values.monitoring.serviceMonitor.enabled .Values.monitoring.podMonitor.enabled }}
{{- fail "enable monitoring.serviceMonitor or monitoring.podMonitor, not both: each series would be scraped twice" }}
{{- end }}
{{- end }}
