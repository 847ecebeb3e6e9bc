{{- define "kvpilot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kvpilot.labels" -}}
app.kubernetes.io/name: kvpilot
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kvpilot.selectorLabels" -}}
app.kubernetes.io/name: kvpilot
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kvpilot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvpilot.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The verbs kvpilot uses on objects in the namespaces it watches (tests/integration/test_helm.py audits
     them). Server-side apply is a PATCH, but creating an object that way also needs "create". */}}
{{- define "kvpilot.namespacedRules" -}}
- apiGroups: [kvpilot.io]
  resources: [llmdeployments]
  verbs: [get, list, watch, patch]
- apiGroups: [kvpilot.io]
  resources: [llmdeployments/status]
  verbs: [get, patch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, list, create, patch, delete]
{{- end -}}
