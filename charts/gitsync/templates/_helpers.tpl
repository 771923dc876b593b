{{/* The release's full name: "gitsync" for a release named gitsync, as deploy/ names things. */}}
{{- define "gitsync.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gitsync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gitsync.serviceAccountName" -}}
{{- default (include "gitsync.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Selector labels: the same as deploy/'s, so either can take over from the other. */}}
{{- define "gitsync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitsync.name" . }}
{{- end -}}

{{/* deploy/'s labels, plus Helm's own. */}}
{{- define "gitsync.labels" -}}
{{ include "gitsync.selectorLabels" . }}
app.kubernetes.io/part-of: gitsync
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
