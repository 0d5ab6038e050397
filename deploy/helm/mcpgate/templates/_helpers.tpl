{{/* Names, labels and the choices several templates share. */}}

{{- define "mcpgate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcpgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcpgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "mcpgate.postgresql.fullname" -}}
{{- printf "%s-postgresql" (include "mcpgate.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcpgate.postgresql.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: postgresql
{{- end -}}

{{- define "mcpgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mcpgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The bundled PostgreSQL runs only when no external database is named. */}}
{{- define "mcpgate.bundledPostgres" -}}
{{- if and .Values.postgresql.enabled (not .Values.externalDatabase.url) (not .Values.externalDatabase.existingSecret) -}}
true
{{- end -}}
{{- end -}}

{{/* The Secret holding ENCRYPTION_KEY and JWT_SECRET. */}}
{{- define "mcpgate.secretName" -}}
{{- default (include "mcpgate.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The Secret holding DATABASE_URL, and its key. */}}
{{- define "mcpgate.databaseSecretName" -}}
{{- default (printf "%s-database" (include "mcpgate.fullname" .)) .Values.externalDatabase.existingSecret -}}
{{- end -}}
{{- define "mcpgate.databaseSecretKey" -}}
{{- if .Values.externalDatabase.existingSecret -}}{{ .Values.externalDatabase.existingSecretKey }}{{- else -}}DATABASE_URL{{- end -}}
{{- end -}}

{{/* publicURL is required; its host is the ingress host by default. */}}
{{- define "mcpgate.publicURL" -}}
{{- required "set publicURL: the https:// address people and MCP clients reach the gateway at" .Values.publicURL -}}
{{- end -}}
{{- define "mcpgate.ingressHost" -}}
{{- default (urlParse (include "mcpgate.publicURL" .)).hostname .Values.ingress.host -}}
{{- end -}}

{{/* A value kept from the Secret already in the cluster (so that generated
     secrets are made once), or a new one. lookup finds nothing in helm
     template and dry runs, which then show fresh values. */}}
{{- define "mcpgate.keep" -}}
{{- $ctx := index . 0 -}}{{- $secret := index . 1 -}}{{- $key := index . 2 -}}{{- $new := index . 3 -}}
{{- $found := lookup "v1" "Secret" $ctx.Release.Namespace $secret -}}
{{- if and $found $found.data (hasKey $found.data $key) -}}
{{- index $found.data $key | b64dec -}}
{{- else -}}
{{- $new -}}
{{- end -}}
{{- end -}}
