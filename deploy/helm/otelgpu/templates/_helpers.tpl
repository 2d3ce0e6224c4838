{{/* Names and labels shared by every object of the release. */}}

{{- define "otelgpu.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "otelgpu.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "otelgpu.labels" -}}
{{ include "otelgpu.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: otelgpu
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "otelgpu.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The pipeline file's text: the user's, or the repository's default for the mode. */}}
{{- define "otelgpu.pipeline" -}}
{{- if .Values.pipeline.config -}}
{{- .Values.pipeline.config -}}
{{- else if .Values.kubeletStats.enabled -}}
{{- .Files.Get "files/pipeline-kubelet-stats.yaml" -}}
{{- else -}}
{{- .Files.Get "files/pipeline.yaml" -}}
{{- end -}}
{{- end -}}

{{- define "otelgpu.pipelineConfigMap" -}}
{{- .Values.pipeline.existingConfigMap | default (printf "%s-pipeline" (include "otelgpu.fullname" .)) -}}
{{- end -}}
