{{/*
The chart's name, overridable with nameOverride. Kubernetes names are limited
to 63 characters, so every name here is cut there.
*/}}
{{- define "otelcol-tt.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object of a release: the release name, with the chart name
appended unless the release name already holds it.
*/}}
{{- define "otelcol-tt.fullname" -}}
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

{{/*
The helm.sh/chart label value: chart name and version.
*/}}
{{- define "otelcol-tt.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object of the release.
*/}}
{{- define "otelcol-tt.labels" -}}
helm.sh/chart: {{ include "otelcol-tt.chart" . }}
{{ include "otelcol-tt.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that select the release's pods. They never change over the life of
a release, since a DaemonSet's selector is immutable.
*/}}
{{- define "otelcol-tt.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-tt.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The service account the pods run as.
*/}}
{{- define "otelcol-tt.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "otelcol-tt.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The container image; the tag defaults to the chart's appVersion.
*/}}
{{- define "otelcol-tt.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- with .Values.image.digest }}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .) }}
{{- fail (printf "image.digest %q is not sha256:<64 lowercase hex digits>" .) }}
{{- end }}
{{- $ref = printf "%s@%s" $ref . }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
The relabelings of a ServiceMonitor or PodMonitor endpoint: instance from the
node name when instanceFromNodeName is set, then the user's.
Call with the monitor's values.
*/}}
{{- define "otelcol-tt.relabelings" -}}
{{- $r := list }}
{{- if .instanceFromNodeName }}
{{- $r = append $r (dict "sourceLabels" (list "__meta_kubernetes_pod_node_name") "targetLabel" "instance" "action" "replace") }}
{{- end }}
{{- $r = concat $r (.relabelings | default list) }}
{{- with $r }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The address a port of the collector listens on inside the pod: every
interface when the port is exposed, loopback otherwise.
Call with (dict "port" .Values.ports.NAME).
*/}}
{{- define "otelcol-tt.listenAddress" -}}
{{- if .port.enabled }}
{{- printf "0.0.0.0:%d" (int .port.containerPort) }}
{{- else }}
{{- printf "127.0.0.1:%d" (int .port.containerPort) }}
{{- end }}
{{- end }}

{{/*
The pod's affinity: .Values.affinity, plus a required node affinity for the
nodes carrying one of tenstorrentNodeAffinity.nodeLabels, unless that is
disabled or .Values.affinity has a nodeAffinity of its own.
*/}}
{{- define "otelcol-tt.affinity" -}}
{{- $aff := deepCopy (.Values.affinity | default dict) }}
{{- if and .Values.tenstorrentNodeAffinity.enabled (not (hasKey $aff "nodeAffinity")) }}
{{- $terms := list }}
{{- range .Values.tenstorrentNodeAffinity.nodeLabels }}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" .key "operator" "In" "values" (list (toString .value))))) }}
{{- end }}
{{- with $terms }}
{{- $_ := set $aff "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" .)) }}
{{- end }}
{{- end }}
{{- toYaml $aff }}
{{- end }}

{{/*
The collector configuration: .Values.config, plus, with k8sAttributes.enabled,
the k8sattributes processor (unless config.processors.k8sattributes is set),
that processor in the metrics pipeline after memory_limiter, the receiver's
pod and container attribution switched on, and the Prometheus exporter
turning the attributes the processor adds into labels (unless
config.exporters.prometheus.resource_constant_labels is set).
*/}}
{{- define "otelcol-tt.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if .Values.k8sAttributes.enabled }}
{{- $processors := $cfg.processors | default dict }}
{{- if not (hasKey $processors "k8sattributes") }}
{{- $_ := set $processors "k8sattributes" (dict
      "auth_type" "serviceAccount"
      "passthrough" false
      "filter" (dict "node_from_env_var" "KUBE_NODE_NAME")
      "extract" (deepCopy .Values.k8sAttributes.extract)
      "pod_association" (list (dict "sources" (list (dict "from" "resource_attribute" "name" "k8s.pod.uid"))))) }}
{{- end }}
{{- $_ := set $cfg "processors" $processors }}
{{- $prometheus := $cfg.exporters.prometheus }}
{{- if not (hasKey $prometheus "resource_constant_labels") }}
{{- $_ := set $prometheus "resource_constant_labels" (dict "included" (deepCopy .Values.k8sAttributes.extract.metadata)) }}
{{- end }}
{{- $ttprocess := $cfg.receivers.ttprocess }}
{{- $attribution := $ttprocess.attribution | default dict }}
{{- $_ := set $attribution "k8s_pod_uid" true }}
{{- $_ := set $attribution "container_id" true }}
{{- $_ := set $ttprocess "attribution" $attribution }}
{{- $metrics := $cfg.service.pipelines.metrics }}
{{- if not (has "k8sattributes" $metrics.processors) }}
{{- $withK8s := list }}
{{- range $metrics.processors }}
{{- $withK8s = append $withK8s . }}
{{- if eq . "memory_limiter" }}
{{- $withK8s = append $withK8s "k8sattributes" }}
{{- end }}
{{- end }}
{{- if not (has "k8sattributes" $withK8s) }}
{{- $withK8s = prepend $withK8s "k8sattributes" }}
{{- end }}
{{- $_ := set $metrics "processors" $withK8s }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
