{{/*
Named templates of the walc chart. The walc.sidecar.* ones (and walc.podLabels,
walc.serviceAccountName) are meant for the pod spec of your own PostgreSQL StatefulSet (see
docs/DEPLOY.md); they read only .Values, .Release.Name, .Chart.Name and, when image.tag is
empty, .Chart.AppVersion, so a parent chart passes
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

{{/*
Settings that make no sense together, refused at render time with one line naming them (walc
would refuse them too, but only once a pod runs). Included by the ConfigMap, which every
release renders.
*/}}
{{- define "walc.validate" -}}
{{- $st := .Values.storage }}
{{- $stores := list }}
{{- if $st.s3Prefix }}{{ $stores = append $stores "storage.s3Prefix" }}{{ end }}
{{- if $st.gcs.prefix }}{{ $stores = append $stores "storage.gcs.prefix" }}{{ end }}
{{- if $st.azure.prefix }}{{ $stores = append $stores "storage.azure.prefix" }}{{ end }}
{{- if gt (len $stores) 1 }}
{{- fail (printf "storage: one store only, got %s" (join " and " $stores)) }}
{{- end }}
{{- if and $st.azure.prefix (not $st.azure.storageAccount) }}
{{- fail "storage.azure.storageAccount: required with storage.azure.prefix" }}
{{- end }}
{{- if and $st.azure.credentials.existingSecret $st.azure.credentials.accessKeyKey $st.azure.credentials.sasTokenKey }}
{{- fail "storage.azure.credentials: accessKeyKey or sasTokenKey, not both" }}
{{- end }}
{{- if and .Values.encryption.libsodium.existingSecret .Values.encryption.pgp.existingSecret }}
{{- fail "encryption: libsodium or pgp, not both (walc refuses two encryption keys)" }}
{{- end }}
{{- if and .Values.sidecar.daemon.enabled (not .Values.sidecar.archive) }}
{{- fail "sidecar.daemon.enabled: the daemon archives for PostgreSQL, which sidecar.archive false turns off" }}
{{- end }}
{{- if and .Values.restore.enabled (not .Values.restore.claimName) }}
{{- fail "restore.claimName: required with restore.enabled (the claim to restore into)" }}
{{- end }}
{{- end }}

{{/*
Files mounted into every container running walc, from Secrets (keys) or a ConfigMap (the CA
bundle), as a YAML list of {volume, secret | configMap, key, file, mountPath, variable}: the file
is <mountPath>/<file>, and the ConfigMap's <variable> names it.
*/}}
{{- define "walc.secretFiles" -}}
{{- with .Values.encryption.libsodium }}
{{- if .existingSecret }}
- {volume: walc-libsodium-key, secret: {{ .existingSecret | quote }}, key: {{ .secretKey | quote }}, file: key, mountPath: {{ .mountPath | quote }}, variable: WALG_LIBSODIUM_KEY_PATH}
{{- end }}
{{- end }}
{{- with .Values.encryption.pgp }}
{{- if .existingSecret }}
- {volume: walc-pgp-key, secret: {{ .existingSecret | quote }}, key: {{ .secretKey | quote }}, file: key.asc, mountPath: {{ .mountPath | quote }}, variable: WALG_PGP_KEY_PATH}
{{- end }}
{{- end }}
{{- with .Values.storage.gcs.credentials }}
{{- if .existingSecret }}
- {volume: walc-gcs-credentials, secret: {{ .existingSecret | quote }}, key: {{ .secretKey | quote }}, file: key.json, mountPath: {{ .mountPath | quote }}, variable: GOOGLE_APPLICATION_CREDENTIALS}
{{- end }}
{{- end }}
{{- with .Values.caBundle }}
{{- if .configMap }}
- {volume: walc-ca-bundle, configMap: {{ .configMap | quote }}, key: {{ .key | quote }}, file: ca.crt, mountPath: {{ .mountPath | quote }}, variable: SSL_CERT_FILE}
{{- end }}
{{- end }}
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

{{/* secretKeyRef NAME SECRET KEY, as an EnvVar. */}}
{{- define "walc.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 }}
      key: {{ index . 2 }}
{{- end }}

{{- define "walc.envItems" -}}
{{- with .Values.storage.credentials }}
{{- if .existingSecret }}
{{ include "walc.secretEnv" (list "AWS_ACCESS_KEY_ID" .existingSecret .accessKeyIdKey) }}
{{ include "walc.secretEnv" (list "AWS_SECRET_ACCESS_KEY" .existingSecret .secretAccessKeyKey) }}
{{- end }}
{{- end }}
{{- with .Values.storage.azure.credentials }}
{{- if and .existingSecret .accessKeyKey }}
{{ include "walc.secretEnv" (list "AZURE_STORAGE_ACCESS_KEY" .existingSecret .accessKeyKey) }}
{{- end }}
{{- if and .existingSecret .sasTokenKey }}
{{ include "walc.secretEnv" (list "AZURE_STORAGE_SAS_TOKEN" .existingSecret .sasTokenKey) }}
{{- end }}
{{- end }}
{{- with .Values.encryption.pgp }}
{{- if and .existingSecret .passphraseKey }}
{{ include "walc.secretEnv" (list "WALG_PGP_KEY_PASSPHRASE" .existingSecret .passphraseKey) }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The files as volumes (keys readable by the pod's fsGroup only). */}}
{{- define "walc.keyVolume" -}}
{{- include "walc.keyVolumeItems" . | trim }}
{{- end }}

{{- define "walc.keyVolumeItems" -}}
{{- range (include "walc.secretFiles" . | fromYamlArray) }}
- name: {{ .volume }}
  {{- if .secret }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 288 # 0440
  {{- else }}
  configMap:
    name: {{ .configMap }}
  {{- end }}
    items:
      - key: {{ .key }}
        path: {{ .file }}
{{- end }}
{{- end }}

{{- define "walc.keyVolumeMount" -}}
{{- include "walc.keyVolumeMountItems" . | trim }}
{{- end }}

{{- define "walc.keyVolumeMountItems" -}}
{{- range (include "walc.secretFiles" . | fromYamlArray) }}
- name: {{ .volume }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{/*
Labels of every pod running walc: AKS's webhook injects the workload identity only into pods
labelled so. A parent chart adds them to its PostgreSQL pod's labels.
*/}}
{{- define "walc.podLabels" -}}
{{- if .Values.storage.azure.workloadIdentityClientId -}}
azure.workload.identity/use: "true"
{{- end }}
{{- end }}

{{/*
libpq settings of a replication connection: (dict "root" . "host" H "port" P "sslMode" M),
as postgresql.user with postgresql.passwordSecret.
*/}}
{{- define "walc.pgEnv" -}}
{{- include "walc.pgEnvItems" . | trim }}
{{- end }}

{{- define "walc.pgEnvItems" -}}
{{- $pg := .root.Values.postgresql }}
- name: PGHOST
  value: {{ .host | quote }}
- name: PGPORT
  value: {{ .port | int64 | quote }}
- name: PGUSER
  value: {{ $pg.user | quote }}
{{- if $pg.passwordSecret.name }}
{{ include "walc.secretEnv" (list "PGPASSWORD" $pg.passwordSecret.name $pg.passwordSecret.key) }}
{{- end }}
{{- if .sslMode }}
- name: PGSSLMODE
  value: {{ .sslMode | quote }}
{{- end }}
{{- end }}

{{/*
What every container of the CronJob and the restore Job shares after its name, command, args
and env: (dict "root" . "resources" R ["mounts" VOLUME-MOUNTS]).
*/}}
{{- define "walc.jobContainerCommon" -}}
{{- $v := .root.Values -}}
image: {{ include "walc.image" .root }}
imagePullPolicy: {{ $v.image.pullPolicy }}
envFrom:
  {{- include "walc.envFrom" .root | nindent 2 }}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
{{- with .resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  {{- with (include "walc.keyVolumeMount" .root) }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with .mounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
Sidecar: the PostgreSQL container's settings, as `postgres -c` arguments (the official image
passes its arguments to postgres). With archive: archive_mode on, and archive_library with the
daemon, archive_command otherwise; restore_command whenever the binary is copied;
summarize_wal for remote deltas.
*/}}
{{- define "walc.sidecar.postgresArgs" -}}
{{- include "walc.sidecar.postgresArgItems" . | trim }}
{{- end }}

{{- define "walc.sidecar.postgresArgItems" -}}
{{- if .Values.sidecar.archive }}
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
{{- end }}
{{- if .Values.sidecar.copyBinary.enabled }}
- -c
- {{ include "walc.restoreCommand" . | printf "restore_command=%s" }}
{{- end }}
{{- if .Values.sidecar.summarizeWal }}
- -c
- summarize_wal=on
{{- end }}
{{- end }}

{{/* The copied binary's restore_command. */}}
{{- define "walc.restoreCommand" -}}
{{- printf "%s/walc wal-fetch %%f %%p" .Values.sidecar.copyBinary.binDir }}
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
{{- end }}
{{- if or .Values.sidecar.daemon.enabled .Values.sidecar.walReceive.enabled }}
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

{{/*
Sidecar: containers, the daemon (sharing PGDATA at the same path and the socket) and
wal-receive (a replication connection to the pod's PostgreSQL), each when enabled.
*/}}
{{- define "walc.sidecar.containers" -}}
{{- include "walc.sidecar.containerItems" . | trim }}
{{- end }}

{{- define "walc.sidecar.containerItems" -}}
{{- if .Values.sidecar.daemon.enabled }}
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
{{- with .Values.sidecar.walReceive }}
{{- if .enabled }}
- name: walc-wal-receive
  image: {{ include "walc.image" $ }}
  imagePullPolicy: {{ $.Values.image.pullPolicy }}
  command:
    - {{ include "walc.binary" $ }}
  args:
    - wal-receive
  envFrom:
    {{- include "walc.envFrom" $ | nindent 4 }}
  env:
    - name: HOME
      value: /tmp
    - name: WALG_SLOTNAME
      value: {{ .slotName | quote }}
    - name: PGDATABASE
      value: {{ .database | quote }}
    {{- include "walc.pgEnv" (dict "root" $ "host" .host "port" .port "sslMode" .sslMode) | nindent 4 }}
    {{- with (include "walc.env" $) }}
    {{- . | nindent 4 }}
    {{- end }}
  securityContext:
    {{- include "walc.sidecar.securityContext" $ | nindent 4 }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: walc-tmp
      mountPath: /tmp
    {{- with (include "walc.keyVolumeMount" $) }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end }}
{{- end }}
