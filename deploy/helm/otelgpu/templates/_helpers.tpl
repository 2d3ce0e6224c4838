{{/* Names and labels shared by every object of the release. */}}

{{- define "otelgpu.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "otelgpu.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "otelgpu.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "otelgpu.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{- define "otelgpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelgpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{/* part-of is what the ServiceMonitor takes the job name from: job="otelgpu" whatever the
release or nameOverride, as the rules (OtelgpuAgentDown) expect. */}}
{{- define "otelgpu.labels" -}}
{{ include "otelgpu.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: otelgpu
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "otelgpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "otelgpu.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "otelgpu.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the OTLP exporter runs: otlp.enabled when given, else whether an endpoint is. */}}
{{- define "otelgpu.otlpEnabled" -}}
{{- if hasKey .Values.otlp "enabled" -}}
{{- ternary "true" "" .Values.otlp.enabled -}}
{{- else -}}
{{- ternary "true" "" (ne .Values.otlp.endpoint "") -}}
{{- end -}}
{{- end -}}

{{/* The chart values that shape the chart's own pipeline; set away from their defaults, they
cannot go with a pipeline of the user's (pipeline.config, pipeline.existingConfigMap). */}}
{{- define "otelgpu.pipelineKnobs" -}}
{{- $set := list -}}
{{- if ne .Values.collectionInterval "10s" -}}{{- $set = append $set "collectionInterval" -}}{{- end -}}
{{- if .Values.metrics -}}{{- $set = append $set "metrics" -}}{{- end -}}
{{- if or (hasKey .Values.otlp "enabled") .Values.otlp.endpoint -}}{{- $set = append $set "otlp" -}}{{- end -}}
{{- range $key := list "env" "labels" "podLabels" "annotations" -}}
{{- if index $.Values.containerEnv $key -}}{{- $set = append $set (printf "containerEnv.%s" $key) -}}{{- end -}}
{{- end -}}
{{- join ", " $set -}}
{{- end -}}

{{/* The pipeline file's text: the user's as given, or the repository's pipeline for the mode
(files/pipeline.yaml is pipelines/k8s-daemonset.yaml, files/pipeline-kubelet-stats.yaml is
pipelines/k8s-node.yaml) with the chart's values applied to it. */}}
{{- define "otelgpu.pipeline" -}}
{{- $custom := or .Values.pipeline.config .Values.pipeline.existingConfigMap -}}
{{- $knobs := include "otelgpu.pipelineKnobs" . -}}
{{- if and $custom $knobs -}}
{{- fail (printf "%s: these values shape the chart's own pipeline; with pipeline.config or pipeline.existingConfigMap, set them in your pipeline instead" $knobs) -}}
{{- end -}}
{{- if .Values.pipeline.config -}}
{{- $given := .Values.pipeline.config | fromYaml -}}
{{- $naming := dig "exporters" "prometheus" "naming" "otel" $given -}}
{{- if and (hasKey (dig "exporters" dict $given) "prometheus") (ne $naming .Values.naming) -}}
{{- fail (printf "naming is %q but pipeline.config's prometheus exporter serves naming %q: set naming=%s so that the rules and the dashboard match" .Values.naming $naming $naming) -}}
{{- end -}}
{{- $nvml := dig "receivers" "nvml" dict $given | default dict -}}
{{- $set := get $nvml "metric_set" | default "default" -}}
{{- if and (hasKey (dig "receivers" dict $given) "nvml") (ne $set .Values.metricSet) -}}
{{- fail (printf "metricSet is %q but pipeline.config's nvml receiver has metric_set %q: set metricSet=%s so that the rules match" .Values.metricSet $set $set) -}}
{{- end -}}
{{- .Values.pipeline.config -}}
{{- else -}}
{{- $source := ternary "pipelines/k8s-node.yaml" "pipelines/k8s-daemonset.yaml" .Values.kubeletStats.enabled -}}
{{- $file := ternary "files/pipeline-kubelet-stats.yaml" "files/pipeline.yaml" .Values.kubeletStats.enabled -}}
{{- $p := .Files.Get $file | fromYaml -}}
{{- range $id, $receiver := $p.receivers -}}
{{- if hasKey $receiver "collection_interval" -}}
{{- $_ := set $receiver "collection_interval" $.Values.collectionInterval -}}
{{- end -}}
{{- if or (eq $id "nvml") (hasPrefix "nvml/" $id) -}}
{{- if include "otelgpu.counters" $ -}}
{{- $_ := unset $receiver "metric_set" -}}
{{- $_ := set $receiver "counters_csv" (include "otelgpu.countersPath" $) -}}
{{- else -}}
{{- $_ := set $receiver "metric_set" $.Values.metricSet -}}
{{- end -}}
{{- with $.Values.metrics -}}
{{- $_ := set $receiver "metrics" . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $env := index $p.processors "container_env" | default dict -}}
{{- range $key, $section := dict "env" "env" "labels" "labels" "podLabels" "pod_labels" "annotations" "annotations" -}}
{{- with index $.Values.containerEnv $key -}}
{{- $_ := set $env $section (dict "include" .) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $p.exporters.prometheus "naming" .Values.naming -}}
{{- if include "otelgpu.gpuStatusApart" . -}}
{{- include "otelgpu.splitGpuStatus" (list $p .Values.gpuStatus.port) -}}
{{- end -}}
{{- if .Values.telemetry.ownPort -}}
{{- /* the file's reader on telemetry.port, as the --set override gives it whatever runs */}}
{{- $prometheus := dict "host" "0.0.0.0" "port" (int .Values.telemetry.port) -}}
{{- $reader := dict "pull" (dict "exporter" (dict "prometheus" $prometheus)) -}}
{{- $metrics := dict "readers" (list $reader) -}}
{{- $_ := set $p.service "telemetry" (merge (dict "metrics" $metrics) (dig "telemetry" dict $p.service)) -}}
{{- else -}}
{{- /* the pipeline file's own reader goes: the agent's own metrics beside the GPU series */}}
{{- $telemetry := dig "telemetry" dict $p.service -}}
{{- $_ := unset (dig "metrics" dict $telemetry) "readers" -}}
{{- if not (dig "metrics" dict $telemetry) -}}{{- $_ := unset $telemetry "metrics" -}}{{- end -}}
{{- if not $telemetry -}}{{- $_ := unset $p.service "telemetry" -}}{{- end -}}
{{- end -}}
{{- $otlp := (.Files.Get "files/pipeline.yaml" | fromYaml).exporters.otlp -}}
{{- if include "otelgpu.otlpEnabled" . -}}
{{- $exporter := index $p.exporters "otlp" | default $otlp -}}
{{- with .Values.otlp.endpoint -}}
{{- $_ := set $exporter "endpoint" . -}}
{{- end -}}
{{- $_ := set $p.exporters "otlp" $exporter -}}
{{- range $id, $pipeline := $p.service.pipelines -}}
{{- if not (has "otlp" $pipeline.exporters) -}}
{{- $_ := set $pipeline "exporters" (append $pipeline.exporters "otlp") -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $_ := unset $p.exporters "otlp" -}}
{{- range $id, $pipeline := $p.service.pipelines -}}
{{- $_ := set $pipeline "exporters" (without $pipeline.exporters "otlp") -}}
{{- end -}}
{{- end -}}
# The agent's pipeline: {{ $source }} with the chart's values
# (naming, metricSet or counters, metrics, collectionInterval, otlp, containerEnv, gpuStatus)
# applied by the otelgpu chart.
{{ toYaml $p }}
{{- end -}}
{{- end -}}

{{/* "true" when the chart's pipeline serves the GPU status (health and info) on a port of its
own (values.yaml, gpuStatus): its own pipeline (not pipeline.config or existingConfigMap,
which serve what they say), with a health metric on (nvidia.gpu.up, on with every metricSet;
with a counters CSV only when switched on under metrics, hw.status likewise). Without one,
nothing would carry the devices there, so hw_gpu_info stays on the GPU endpoint. */}}
{{- define "otelgpu.gpuStatusApart" -}}
{{- $custom := or .Values.pipeline.config .Values.pipeline.existingConfigMap -}}
{{- $up := dig "nvidia.gpu.up" "enabled" (not (include "otelgpu.counters" .)) .Values.metrics -}}
{{- $status := dig "hw.status" "enabled" false .Values.metrics -}}
{{- if .Values.gpuStatus.ownPort -}}
{{- $port := int .Values.gpuStatus.port -}}
{{- if has $port (list 9400 13133 (int .Values.telemetry.port)) -}}
{{- fail (printf "gpuStatus.port %d is taken (9400: /metrics, 13133: health, %d: telemetry.port): pick another" $port (int .Values.telemetry.port)) -}}
{{- end -}}
{{- end -}}
{{- ternary "true" "" (and .Values.gpuStatus.ownPort (not $custom) (or $up $status)) -}}
{{- end -}}

{{/* The GPU status apart, on the pipeline `p` (list p port): the health metrics
(nvidia.gpu.up, hw.status) leave every pipeline that feeds the prometheus exporter (filter
processor filter/not_gpu_status, first: what leaves is not enriched for nothing) and go, straight from the nvml receivers (filter/gpu_status,
no enrichment: a GPU's health is the device's, and its holders are on
nvidia_gpu_allocation_ratio), to a second prometheus exporter, prometheus/gpu_status, on the
port; it writes the devices' hw_gpu_info too, which the GPU endpoint then leaves out
(device_info: false). */}}
{{- define "otelgpu.splitGpuStatus" -}}
{{- $p := index . 0 -}}
{{- $health := list "nvidia.gpu.up" "hw.status" -}}
{{- $nvml := list -}}
{{- range $id, $_ := $p.receivers -}}
{{- if or (eq $id "nvml") (hasPrefix "nvml/" $id) -}}
{{- $nvml = append $nvml $id -}}
{{- end -}}
{{- end -}}
{{- $_ := set $p.processors "filter/gpu_status" (dict "metrics" (dict "include" $health)) -}}
{{- $_ := set $p.processors "filter/not_gpu_status" (dict "metrics" (dict "exclude" $health)) -}}
{{- $status := deepCopy $p.exporters.prometheus -}}
{{- $_ := set $status "endpoint" (printf "0.0.0.0:%d" (int (index . 1))) -}}
{{- $_ := set $p.exporters.prometheus "device_info" false -}}
{{- $_ := set $p.exporters "prometheus/gpu_status" $status -}}
{{- range $id, $pipeline := $p.service.pipelines -}}
{{- if has "prometheus" $pipeline.exporters -}}
{{- $_ := set $pipeline "processors" (prepend ($pipeline.processors | default list) "filter/not_gpu_status") -}}
{{- end -}}
{{- end -}}
{{- $_ := set $p.service.pipelines "metrics/gpu_status" (dict "receivers" $nvml "processors" (list "filter/gpu_status") "exporters" (list "prometheus/gpu_status")) -}}
{{- end -}}

{{/* "true" when a counters CSV is given (counters or countersConfigMap.name); both, or
either with metricSet away from its default, fail: each chooses the metrics. */}}
{{- define "otelgpu.counters" -}}
{{- $cm := .Values.countersConfigMap.name -}}
{{- if and .Values.counters $cm -}}
{{- fail "counters and countersConfigMap.name both give the counters CSV: give one" -}}
{{- end -}}
{{- if and (or .Values.counters $cm) (ne .Values.metricSet "default") -}}
{{- fail (printf "metricSet %q and a counters CSV both choose the metrics: give one (switch single metrics under metrics)" .Values.metricSet) -}}
{{- end -}}
{{- ternary "true" "" (or (ne .Values.counters "") (ne $cm "")) -}}
{{- end -}}

{{/* Where the counters CSV is mounted in the agent's container (the pipeline names it). */}}
{{- define "otelgpu.countersPath" -}}
/etc/otelgpu-counters/counters.csv
{{- end -}}

{{- define "otelgpu.countersConfigMap" -}}
{{- .Values.countersConfigMap.name | default (printf "%s-counters" (include "otelgpu.fullname" .)) -}}
{{- end -}}

{{- define "otelgpu.pipelineConfigMap" -}}
{{- .Values.pipeline.existingConfigMap | default (printf "%s-pipeline" (include "otelgpu.fullname" .)) -}}
{{- end -}}

{{/* The scrape scheme: serviceMonitor.scheme when set, else https exactly when /metrics is
served over TLS. */}}
{{- define "otelgpu.scheme" -}}
{{- .Values.serviceMonitor.scheme | default (ternary "https" "http" (ne .Values.prometheus.tls.secretName "")) -}}
{{- end -}}

{{/* The --set override that serves the agent's own metrics on telemetry.port
(service::telemetry::metrics::readers); the metrics and health ports are taken. */}}
{{- define "otelgpu.telemetryReader" -}}
{{- $port := int .Values.telemetry.port -}}
{{- if has $port (list 9400 13133) -}}
{{- fail (printf "telemetry.port %d is taken (9400: /metrics, 13133: health): pick another" $port) -}}
{{- end -}}
{{- printf "service.telemetry.metrics.readers=[{pull: {exporter: {prometheus: {host: \"0.0.0.0\", port: %d}}}}]" $port -}}
{{- end -}}

{{/* What both ServiceMonitor endpoints share: interval, honoured labels, relabelings. */}}
{{- define "otelgpu.scrapeSettings" -}}
interval: {{ .Values.serviceMonitor.interval }}
scrapeTimeout: {{ .Values.serviceMonitor.scrapeTimeout }}
# The agent's labels win: a GPU series names the pod holding the GPU, not the agent.
honorLabels: true
relabelings:
  # Every series carries its node under the name the GPU series use.
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: k8s_node_name
    action: replace
  # The agent pod's own identity would read as the workload's on idle GPUs.
  - action: labeldrop
    regex: (pod|container|namespace|service|endpoint)
  {{- with .Values.serviceMonitor.relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.serviceMonitor.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* With a counters CSV given as text (counters): the rules of the naming's default and detail
files whose every GPU series the CSV selects, as {groups: [...], leftOut: [ALERT...]}.
files/rule-metrics.yaml says what each rule reads (tests/deploy/rule_metrics.py): a need is
met when its metric is switched on under metrics, or when the CSV lists one of its fields and
metrics does not switch the metric off. Rules on the allocation series, the agent's own
metrics and kube-state-metrics need no field. Groups left empty go; so does a recording rule
that reads what the CSV leaves out, and what reads it. */}}
{{- define "otelgpu.csvRules" -}}
{{- $dcgm := eq .Values.naming "dcgm" -}}
{{- $index := .Files.Get "files/rule-metrics.yaml" | fromYaml -}}
{{- $listed := dict -}}
{{- range $line := splitList "\n" .Values.counters -}}
{{- $line = trim $line -}}
{{- if and $line (not (hasPrefix "#" $line)) -}}
{{- $name := trim (first (splitList "," $line)) -}}
{{- $_ := set $listed (get $index.legacy $name | default $name) true -}}
{{- end -}}
{{- end -}}
{{- $needs := get $index.rules .Values.naming -}}
{{- $files := list "files/otelgpu-rules.yaml" "files/otelgpu-rules-detail.yaml" -}}
{{- if $dcgm -}}
{{- $files = list "files/otelgpu-rules-dcgm.yaml" "files/otelgpu-rules-detail-dcgm.yaml" -}}
{{- end -}}
{{- $groups := list -}}
{{- $left := list -}}
{{- range $file := $files -}}
{{- range $group := ($.Files.Get $file | fromYaml).groups -}}
{{- $kept := list -}}
{{- range $rule := $group.rules -}}
{{- $id := printf "%s/%s" $group.name ($rule.alert | default $rule.record) -}}
{{- if not (hasKey $needs $id) -}}
{{- fail (printf "files/rule-metrics.yaml has no rule %s: run python -m tests.deploy.sync --write" $id) -}}
{{- end -}}
{{- $met := true -}}
{{- range $need := get $needs $id -}}
{{- $switch := toString (dig $need.metric "enabled" "" $.Values.metrics) -}}
{{- $chosen := eq $switch "true" -}}
{{- range $field := $need.fields -}}
{{- if hasKey $listed $field -}}{{- $chosen = true -}}{{- end -}}
{{- end -}}
{{- if or (eq $switch "false") (not $chosen) -}}{{- $met = false -}}{{- end -}}
{{- end -}}
{{- if $met -}}
{{- $kept = append $kept $rule -}}
{{- else if and $rule.alert (eq $file (first $files)) -}}
{{- $left = append $left $rule.alert -}}
{{- end -}}
{{- end -}}
{{- if $kept -}}
{{- $groups = append $groups (set (omit $group "rules") "rules" $kept) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "groups" $groups "leftOut" $left) -}}
{{- end -}}
