{{/* Names and labels. */}}
{{- define "loom.fullname" -}}
{{- if contains "loom" .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-loom" .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "loom.chart" -}}{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}{{- end -}}

{{/* Labels every object carries. */}}
{{- define "loom.labels" -}}
helm.sh/chart: {{ include "loom.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: loom
{{- end -}}

{{/* Selector of one Loom component's pods ($ = root, component = name). */}}
{{- define "loom.selector" -}}
app.kubernetes.io/name: loom
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* A plane's component name: the assistant plane runs as the assistant bridge. */}}
{{- define "loom.component" -}}{{ if eq . "assistant" }}assistant-bridge{{ else }}{{ . }}{{ end }}{{- end -}}

{{- define "loom.image" -}}{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}{{- end -}}

{{- define "loom.secretName" -}}{{ default (printf "%s-secrets" (include "loom.fullname" .)) .Values.existingSecret }}{{- end -}}

{{- define "loom.natsName" -}}
{{- if contains "nats" .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-nats" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "loom.natsUrl" -}}
{{- if .Values.nats.enabled -}}nats://{{ include "loom.natsName" . }}:4222{{- else -}}{{ required "bus.url is required when nats.enabled is false" .Values.bus.url }}{{- end -}}
{{- end -}}

{{/* matchLabels of the NATS chart's server pods: networkPolicy.natsPodLabels and the release. */}}
{{- define "loom.natsPodLabels" -}}
matchLabels:
  {{- toYaml (merge (dict "app.kubernetes.io/instance" .Release.Name) .Values.networkPolicy.natsPodLabels) | nindent 2 }}
{{- end -}}

{{- define "loom.gatewayUrl" -}}http://{{ include "loom.fullname" . }}-gateway:{{ .Values.gateway.service.port }}{{- end -}}

{{- define "loom.clickhouseHost" -}}{{ include "loom.fullname" . }}-clickhouse{{- end -}}

{{/* plane=host:port for every enabled plane, as the gateway dials them. */}}
{{- define "loom.planeAddresses" -}}
{{- $root := . -}}
{{- $pairs := list -}}
{{- range $name, $plane := .Values.planes -}}
{{- if $plane.enabled -}}
{{- $pairs = append $pairs (printf "%s=%s-%s:%v" $name (include "loom.fullname" $root) (include "loom.component" $name) $root.Values.grpcPort) -}}
{{- end -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* The pod spec parts every Loom pod shares. */}}
{{- define "loom.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
automountServiceAccountToken: false
enableServiceLinks: false
volumes:
  - name: tmp
    emptyDir: {}
  - name: data
    emptyDir: {}
{{- end -}}

{{- define "loom.containerCommon" -}}
image: {{ include "loom.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
envFrom:
  - configMapRef:
      name: {{ include "loom.fullname" . }}-settings
  - secretRef:
      name: {{ include "loom.secretName" . }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  - name: data
    mountPath: /var/lib/loom
{{- end -}}

{{/* Restart every Loom pod when its settings change. */}}
{{- define "loom.checksums" -}}
checksum/settings: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- end -}}

{{/* NetworkPolicy egress rules: the cluster's DNS; NATS and ClickHouse. */}}
{{- define "loom.np.dns" -}}
- to:
    - namespaceSelector:
        {{- toYaml .Values.networkPolicy.dns.namespaceSelector | nindent 8 }}
      podSelector:
        {{- toYaml .Values.networkPolicy.dns.podSelector | nindent 8 }}
  ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}
{{- end }}
{{- define "loom.np.backends" -}}
{{- $rel := .Release.Name }}
{{- if .Values.nats.enabled }}
- to:
    - podSelector:
        {{- include "loom.natsPodLabels" . | nindent 8 }}
  ports:
    - {protocol: TCP, port: 4222}
{{- else }}
- ports:
    - {protocol: TCP, port: 4222}
{{- end }}
{{- if .Values.clickhouse.dev.enabled }}
- to:
    - podSelector:
        matchLabels: {app.kubernetes.io/name: clickhouse, app.kubernetes.io/instance: {{ $rel }}}
  ports:
    - {protocol: TCP, port: 9000}
{{- else }}
- ports:
    {{- range .Values.clickhouse.externalPorts }}
    - {protocol: TCP, port: {{ . }}}
    {{- end }}
{{- end }}
{{- end }}
