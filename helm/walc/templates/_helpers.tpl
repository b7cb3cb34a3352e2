{{/*
Named templates of the walc chart. The walc.sidecar.* ones are meant for the pod spec of your
own PostgreSQL StatefulSet (see docs/DEPLOY.md); they read only .Values, .Release.Name,
.Chart.Name and, when image.tag is empty, .Chart.AppVersion, so a parent chart passes
  (dict "Values" .Values.walc "Release" .Release "Chart" (dict "Name" "walc"))
with walc.image.tag set in its values, to use them with this chart's values as a subchart.
*/}}

{{- define "walc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "walc.fullname" -}}
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

{{/* A CronJob's name leaves 11 characters for the Job's suffix. */}}
{{- define "walc.cronjobName" -}}
{{- include "walc.fullname" . | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "walc.configMapName" -}}
{{- printf "%s-env" (include "walc.fullname" . | trunc 59 | trimSuffix "-") }}
{{- end }}

{{- define "walc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "walc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "walc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "walc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "walc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "walc.labels" -}}
helm.sh/chart: {{ include "walc.chart" . }}
{{ include "walc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image; without image.tag, the chart's appVersion (a parent chart passes it in .Chart). */}}
{{- define "walc.image" -}}
{{- if .Values.image.tag }}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* The binary's path in the image (the Dockerfile's ENTRYPOINT). */}}
{{- define "walc.binary" -}}
/usr/local/bin/walc
{{- end }}

{{/*
A value as an environment variable's string: strings quoted as they are; numbers through JSON,
as helm reads them as float64 (104857600 would print as 1.048576e+08); booleans as true/false.
*/}}
{{- define "walc.envValue" -}}
{{- if kindIs "string" . }}
{{- . | quote }}
{{- else }}
{{- toJson . | quote }}
{{- end }}
{{- end }}

{{- define "walc.keyFile" -}}
{{- printf "%s/key" .Values.encryption.libsodium.mountPath }}
{{- end }}

{{/* envFrom of every container running walc: the ConfigMap of non-secret settings. */}}
{{- define "walc.envFrom" -}}
- configMapRef:
    name: {{ include "walc.configMapName" . }}
{{- end }}

{{/* env of every container running walc: secrets as secretKeyRef, then extraEnv. */}}
{{- define "walc.env" -}}
{{- include "walc.envItems" . | trim }}
{{- end }}

{{- define "walc.envItems" -}}
{{- if .Values.storage.credentials.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.storage.credentials.existingSecret }}
      key: {{ .Values.storage.credentials.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.storage.credentials.existingSecret }}
      key: {{ .Values.storage.credentials.secretAccessKeyKey }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The libsodium key Secret as a volume (files readable by the pod's fsGroup only). */}}
{{- define "walc.keyVolume" -}}
{{- if .Values.encryption.libsodium.existingSecret -}}
- name: walc-libsodium-key
  secret:
    secretName: {{ .Values.encryption.libsodium.existingSecret }}
    defaultMode: 288 # 0440
    items:
      - key: {{ .Values.encryption.libsodium.secretKey }}
        path: key
{{- end }}
{{- end }}

{{- define "walc.keyVolumeMount" -}}
{{- if .Values.encryption.libsodium.existingSecret -}}
- name: walc-libsodium-key
  mountPath: {{ .Values.encryption.libsodium.mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The backup CronJob's libpq settings: remote mode over a replication connection. */}}
{{- define "walc.pgEnv" -}}
- name: PGHOST
  value: {{ .Values.postgresql.host | quote }}
- name: PGPORT
  value: {{ .Values.postgresql.port | int64 | quote }}
- name: PGUSER
  value: {{ .Values.postgresql.user | quote }}
{{- if .Values.postgresql.passwordSecret.name }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.postgresql.passwordSecret.name }}
      key: {{ .Values.postgresql.passwordSecret.key }}
{{- end }}
{{- if .Values.postgresql.sslMode }}
- name: PGSSLMODE
  value: {{ .Values.postgresql.sslMode | quote }}
{{- end }}
{{- end }}

{{/* What every CronJob container shares after its name, command and args. */}}
{{- define "walc.jobContainerCommon" -}}
image: {{ include "walc.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
envFrom:
  {{- include "walc.envFrom" . | nindent 2 }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- with .Values.backup.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  {{- with (include "walc.keyVolumeMount" .) }}
  {{- . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
Sidecar: the PostgreSQL container's settings, as `postgres -c` arguments (the official image
passes its arguments to postgres). archive_library with the daemon, archive_command otherwise;
restore_command whenever the binary is copied.
*/}}
{{- define "walc.sidecar.postgresArgs" -}}
- -c
- archive_mode=on
{{- if .Values.sidecar.daemon.enabled }}
- -c
- archive_library=walc_archive
- -c
- {{ printf "walc_archive.socket=%s/walc.sock" .Values.sidecar.daemon.socketDir }}
{{- else if .Values.sidecar.copyBinary.enabled }}
- -c
- {{ printf "archive_command=%s/walc wal-push %%p" .Values.sidecar.copyBinary.binDir }}
{{- end }}
{{- if .Values.sidecar.copyBinary.enabled }}
- -c
- {{ printf "restore_command=%s/walc wal-fetch %%f %%p" .Values.sidecar.copyBinary.binDir }}
{{- end }}
{{- end }}

{{/* Sidecar: volumes to add to the PostgreSQL pod. */}}
{{- define "walc.sidecar.volumes" -}}
{{- include "walc.sidecar.volumeItems" . | trim }}
{{- end }}

{{- define "walc.sidecar.volumeItems" -}}
{{- if .Values.sidecar.copyBinary.enabled }}
- name: walc-bin
  emptyDir: {}
{{- end }}
{{- if .Values.sidecar.daemon.enabled }}
- name: walc-run
  emptyDir: {}
- name: walc-tmp
  emptyDir: {}
{{- end }}
{{- with (include "walc.keyVolume" .) }}
{{ . }}
{{- end }}
{{- end }}

{{/* Sidecar: volumeMounts to add to the PostgreSQL container. */}}
{{- define "walc.sidecar.postgresVolumeMounts" -}}
{{- include "walc.sidecar.postgresVolumeMountItems" . | trim }}
{{- end }}

{{- define "walc.sidecar.postgresVolumeMountItems" -}}
{{- if .Values.sidecar.copyBinary.enabled }}
- name: walc-bin
  mountPath: {{ .Values.sidecar.copyBinary.binDir }}
  readOnly: true
{{- end }}
{{- if .Values.sidecar.daemon.enabled }}
- name: walc-run
  mountPath: {{ .Values.sidecar.daemon.socketDir }}
{{- end }}
{{- if .Values.sidecar.copyBinary.enabled }}
{{- with (include "walc.keyVolumeMount" .) }}
{{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Sidecar: the container security context (the PostgreSQL container's user). */}}
{{- define "walc.sidecar.securityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.sidecar.runAsUser | int64 }}
runAsGroup: {{ .Values.sidecar.runAsGroup | int64 }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
{{- end }}

{{/*
Sidecar: initContainers. The walc image has no shell; its static busybox copies the binary
(mode 0755) into the emptyDir.
*/}}
{{- define "walc.sidecar.initContainers" -}}
{{- if .Values.sidecar.copyBinary.enabled -}}
- name: walc-install
  image: {{ include "walc.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - /usr/local/bin/busybox
    - cp
    - {{ include "walc.binary" . }}
    - {{ printf "%s/walc" .Values.sidecar.copyBinary.binDir }}
  securityContext:
    {{- include "walc.sidecar.securityContext" . | nindent 4 }}
  {{- with .Values.sidecar.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: walc-bin
      mountPath: {{ .Values.sidecar.copyBinary.binDir }}
{{- end }}
{{- end }}

{{/* Sidecar: containers (the daemon), sharing PGDATA at the same path and the socket. */}}
{{- define "walc.sidecar.containers" -}}
{{- if .Values.sidecar.daemon.enabled -}}
- name: walc-daemon
  image: {{ include "walc.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - {{ include "walc.binary" . }}
  args:
    - daemon
    - {{ printf "%s/walc.sock" .Values.sidecar.daemon.socketDir }}
  envFrom:
    {{- include "walc.envFrom" . | nindent 4 }}
  env:
    - name: PGDATA
      value: {{ .Values.sidecar.pgdata | quote }}
    - name: HOME
      value: /tmp
    {{- if .Values.sidecar.daemon.metricsPort }}
    - name: WALG_METRICS_ADDRESS
      value: {{ printf "0.0.0.0:%d" (.Values.sidecar.daemon.metricsPort | int64) | quote }}
    {{- end }}
    {{- with (include "walc.env" .) }}
    {{- . | nindent 4 }}
    {{- end }}
  {{- if .Values.sidecar.daemon.metricsPort }}
  ports:
    - name: walc-metrics
      containerPort: {{ .Values.sidecar.daemon.metricsPort | int64 }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: walc-metrics
    periodSeconds: 30
    failureThreshold: 3
  {{- end }}
  securityContext:
    {{- include "walc.sidecar.securityContext" . | nindent 4 }}
  {{- with .Values.sidecar.daemon.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: {{ .Values.sidecar.dataVolume }}
      mountPath: {{ .Values.sidecar.dataMountPath }}
    - name: walc-run
      mountPath: {{ .Values.sidecar.daemon.socketDir }}
    - name: walc-tmp
      mountPath: /tmp
    {{- with (include "walc.keyVolumeMount" .) }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end }}
