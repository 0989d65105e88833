#!/usr/bin/env bash
# test-chart.sh HELM [OTELCOL_TT] — lint and render the otelcol-tt chart with
# the given helm binary (v4) and check what it produces (and, given an
# otelcol-tt binary, that it validates the collector configs rendered):
#   - helm lint --strict passes, with and without the Prometheus-operator kinds;
#   - every rendered document parses as YAML and has apiVersion, kind and
#     metadata.name;
#   - the DaemonSet runs in the host PID namespace by default (hostPID: true)
#     and not when daemonset.hostPID=false;
#   - it is unprivileged by default: privileged and allowPrivilegeEscalation
#     false, every capability dropped, a read-only root filesystem, a
#     dedicated non-root UID and the RuntimeDefault seccomp profile; the
#     optional read-only hostPath /proc leaves hostPID on;
#   - it lands on Linux Tenstorrent nodes (node affinity, with an opt-out),
#     tolerates NoSchedule taints, is system-node-critical and never surges;
#   - OTELCOL_TT_HOSTNAME comes from spec.nodeName (downward API), the
#     Prometheus exporter listens on 0.0.0.0:9464, the health_check extension
#     on the pod IP (status.podIP) and the probes call its port;
#   - a NetworkPolicy admits only Prometheus to /metrics by default;
#   - the monitors honour the exported labels and take instance from the
#     node name; the image is pulled by digest when image.digest is set;
#   - the ConfigMap's collector config is deploy/otelcol-tt/config.yaml, with
#     the ttprocess receiver, the prometheus exporter and the metrics pipeline;
#     a config change changes the pod template's checksum/config;
#   - ServiceMonitor and PodMonitor are absent by default and present when
#     enabled;
#   - with k8sAttributes.enabled: a read-only ClusterRole for pods,
#     namespaces and replicasets bound to the service account, its token
#     mounted, KUBE_NODE_NAME from spec.nodeName, the k8sattributes processor
#     after memory_limiter associating by k8s.pod.uid, the receiver's pod
#     and container attribution on, and the exporter labelling the holder's
#     series with what the processor extracts;
#   - every documented option renders, all at once, and lints;
#   - every base image of Dockerfile.otelcol-tt is pinned by @sha256 digest.
# Nothing talks to a cluster. Needs python3 with PyYAML (Debian: python3-yaml).
set -euo pipefail

fail() {
	echo "test-chart: FAIL: $*" >&2
	exit 1
}
pass() { echo "test-chart: ok   $*"; }

[[ $# -eq 1 || $# -eq 2 ]] || fail "usage: $0 /path/to/helm [/path/to/otelcol-tt]"
helm=$1
[[ -x $helm ]] || fail "helm binary $helm is not executable"
otelcol=${2:-}
[[ -z $otelcol || -x $otelcol ]] || fail "otelcol-tt binary $otelcol is not executable"
# Debian's interpreter first: that is where the python3-yaml package installs.
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
"$python" -c 'import yaml' 2>/dev/null ||
	fail "$python with PyYAML is needed to parse the manifests (Debian package python3-yaml)"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
chart=$here/otelcol-tt
default_config=$here/../otelcol-tt/config.yaml
[[ -f $chart/Chart.yaml ]] || fail "no chart at $chart"
[[ -f $default_config ]] || fail "no default collector config at $default_config"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Keep helm away from the user's own configuration, cache and plugins.
export HELM_CONFIG_HOME=$tmp/helm/config HELM_CACHE_HOME=$tmp/helm/cache HELM_DATA_HOME=$tmp/helm/data

echo "test-chart: $("$helm" version --short 2>/dev/null || echo "helm (version unknown)")"

# render OUT [helm template flags...] renders the chart into OUT.
render() {
	local out=$1
	shift
	if ! "$helm" template tt "$chart" --namespace tt-monitoring "$@" >"$out" 2>"$tmp/render.err"; then
		cat "$tmp/render.err" >&2
		fail "helm template $*"
	fi
}

# check CHECK FILE [ARGS...] runs one of the checks in test-chart-checks.py on
# a rendered file; a failing check prints why and exits non-zero.
check() {
	"$python" "$here/test-chart-checks.py" "$@"
}

# Lint, with the defaults and with every optional object on.
if ! "$helm" lint --strict "$chart" >"$tmp/lint.out" 2>&1; then
	cat "$tmp/lint.out" >&2
	fail "helm lint --strict $chart"
fi
if ! "$helm" lint --strict "$chart" --set serviceMonitor.enabled=true,podMonitor.enabled=true >"$tmp/lint.out" 2>&1; then
	cat "$tmp/lint.out" >&2
	fail "helm lint --strict $chart with serviceMonitor and podMonitor"
fi
pass "helm lint --strict (defaults; serviceMonitor and podMonitor enabled)"

render "$tmp/default.yaml"
pass "defaults render: $(check parse "$tmp/default.yaml")"
check hostpid "$tmp/default.yaml" true
pass "hostPID: true by default"
check security "$tmp/default.yaml" 10464
pass "unprivileged by default: no privilege, no escalation, no capabilities, read-only root, UID 10464, RuntimeDefault seccomp"
check scheduling "$tmp/default.yaml" tenstorrent
pass "Linux nodes labelled tenstorrent.com/has-tt or NFD pci-1e52; every NoSchedule taint tolerated; system-node-critical; maxSurge 0"
prom='[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}}}]'
check netpol "$tmp/default.yaml" "metrics=$prom"
pass "a NetworkPolicy admits only Prometheus pods of namespace monitoring to /metrics"
check image "$tmp/default.yaml" otelcol-tt:0.1.0
check env "$tmp/default.yaml"
pass "OTELCOL_TT_HOSTNAME from spec.nodeName; prometheus on 0.0.0.0:9464; health_check on the pod IP; probes on its port"
check config "$tmp/default.yaml" "$default_config"
pass "collector config equals deploy/otelcol-tt/config.yaml: ttprocess+otlp -> memory_limiter,batch -> prometheus"
check kinds "$tmp/default.yaml" DaemonSet ConfigMap ServiceAccount Service NetworkPolicy '!ServiceMonitor' '!PodMonitor' '!ClusterRole' '!ClusterRoleBinding'
pass "no ServiceMonitor, PodMonitor or RBAC by default"
check value "$tmp/default.yaml" receivers.ttprocess.card_telemetry.enabled True
check value "$tmp/default.yaml" receivers.ttprocess.sysfs_path '${env:OTELCOL_TT_SYSFS_PATH:-/sys}'
pass "card telemetry on, from the container's /sys"

render "$tmp/k8sattributes.yaml" --set k8sAttributes.enabled=true
check parse "$tmp/k8sattributes.yaml" >/dev/null
check kinds "$tmp/k8sattributes.yaml" ClusterRole ClusterRoleBinding
check k8sattributes "$tmp/k8sattributes.yaml"
"$helm" lint --strict "$chart" --set k8sAttributes.enabled=true >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out" >&2; fail "helm lint --strict with k8sAttributes.enabled"; }
pass "k8sAttributes.enabled: read-only RBAC for pods, token mounted, k8sattributes after memory_limiter by k8s.pod.uid, pod and container attribution on; lints"

# validate FILE NAME checks, with the otelcol-tt binary, that the collector
# config FILE's ConfigMap renders is one otelcol-tt accepts.
validate() {
	[[ -n $otelcol ]] || return 0
	"$python" -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap":
        open(sys.argv[2], "w").write(d["data"]["config.yaml"])' "$1" "$tmp/$2-config.yaml"
	# The k8sattributes processor checks that the variable it reads the
	# node from is set; the DaemonSet sets it.
	if ! KUBE_NODE_NAME=validate-node "$otelcol" validate --config="$tmp/$2-config.yaml" >"$tmp/validate.out" 2>&1; then
		cat "$tmp/validate.out" >&2
		fail "otelcol-tt validate rejects the $2 config"
	fi
}
if [[ -n $otelcol ]]; then
	validate "$tmp/default.yaml" default
	validate "$tmp/k8sattributes.yaml" k8sattributes
	pass "otelcol-tt validate accepts the default and the k8sattributes configs"
fi

render "$tmp/nohostpid.yaml" --set daemonset.hostPID=false
check parse "$tmp/nohostpid.yaml" >/dev/null
check hostpid "$tmp/nohostpid.yaml" false
pass "hostPID: false with --set daemonset.hostPID=false"

render "$tmp/privileged.yaml" --set securityContext.privileged=true
check privileged "$tmp/privileged.yaml" true
pass "privileged: true only with --set securityContext.privileged=true"

hidepid=(--set podSecurityContext.runAsUser=0 --set podSecurityContext.runAsNonRoot=false --set 'securityContext.capabilities.add={SYS_PTRACE}')
render "$tmp/hidepid.yaml" "${hidepid[@]}"
check parse "$tmp/hidepid.yaml" >/dev/null
check privileged "$tmp/hidepid.yaml" false
"$helm" lint --strict "$chart" "${hidepid[@]}" >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out" >&2; fail "helm lint --strict with the hidepid variant"; }
pass "the hidepid variant (UID 0 with SYS_PTRACE alone) renders unprivileged and lints"

render "$tmp/hostproc.yaml" --set hostProc.enabled=true
check hostproc "$tmp/hostproc.yaml" /host/proc
pass "hostProc.enabled mounts the node's /proc read-only at /host/proc, and keeps hostPID"

render "$tmp/anynode.yaml" --set tenstorrentNodeAffinity.enabled=false
check scheduling "$tmp/anynode.yaml" any
aff='{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"example.com/card","operator":"Exists"}]}]}}}'
render "$tmp/ownaffinity.yaml" --set-json "affinity=$aff"
check scheduling "$tmp/ownaffinity.yaml" "$aff"
pass "tenstorrentNodeAffinity.enabled=false drops the node affinity; an affinity of one's own replaces it"

render "$tmp/nonetpol.yaml" --set networkPolicy.enabled=false
check kinds "$tmp/nonetpol.yaml" '!NetworkPolicy'
node='[{"ipBlock":{"cidr":"10.0.0.0/8"}}]'
render "$tmp/otlpnetpol.yaml" --set ports.otlp.enabled=true --set-json "networkPolicy.otlpFrom=$node"
check netpol "$tmp/otlpnetpol.yaml" "metrics=$prom" "otlp=$node"
render "$tmp/otlpclosed.yaml" --set ports.otlp.enabled=true
check netpol "$tmp/otlpclosed.yaml" "metrics=$prom"
pass "networkPolicy.enabled=false drops it; an enabled OTLP port is admitted only from networkPolicy.otlpFrom"

digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
render "$tmp/digest.yaml" --set image.digest=$digest
check image "$tmp/digest.yaml" "otelcol-tt:0.1.0@$digest"
if "$helm" template tt "$chart" --set image.digest=0123abc >"$tmp/bad.yaml" 2>"$tmp/bad.err"; then
	fail "image.digest=0123abc rendered"
fi
grep -q '0123abc' "$tmp/bad.err" || fail "the error for a bad image.digest does not name it: $(cat "$tmp/bad.err")"
pass "image.digest pins the image (repository:tag@digest); a malformed digest is refused by name"

render "$tmp/monitors.yaml" --set serviceMonitor.enabled=true,podMonitor.enabled=true
pass "monitors render: $(check parse "$tmp/monitors.yaml")"
check kinds "$tmp/monitors.yaml" ServiceMonitor PodMonitor
check monitors "$tmp/monitors.yaml"
pass "ServiceMonitor and PodMonitor when enabled; both honour labels and take instance from the node name"

# Every option values.yaml documents, at once: it renders, parses and lints.
all=(
	--set image.digest=$digest --set hostProc.enabled=true --set securityContext.privileged=false
	--set ports.otlp.enabled=true --set ports.otlp-http.enabled=true --set ports.otlp.hostPort=4317
	--set ports.metrics.hostPort=9464 --set-json "networkPolicy.otlpFrom=$node"
	--set-json 'networkPolicy.extraIngress=[{"ports":[{"port":"health"}],"from":[{"ipBlock":{"cidr":"10.1.0.0/16"}}]}]'
	--set serviceMonitor.enabled=true --set podMonitor.enabled=true
	--set-json 'serviceMonitor.relabelings=[{"targetLabel":"cluster","replacement":"c1"}]'
	--set-json 'podMonitor.relabelings=[{"targetLabel":"cluster","replacement":"c1"}]'
	--set-json 'extraEnv=[{"name":"GOMEMLIMIT","value":"150MiB"}]'
	--set-json 'extraVolumes=[{"name":"tls","secret":{"secretName":"otelcol-tt-tls"}}]'
	--set-json 'extraVolumeMounts=[{"name":"tls","mountPath":"/etc/otelcol-tt/tls","readOnly":true}]'
	--set-json 'extraContainers=[{"name":"kube-rbac-proxy","image":"registry.example/kube-rbac-proxy:v0.19.1"}]'
	--set extraArgs[0]=--feature-gates=-telemetry.useOtelForInternalMetrics
	--set-json 'imagePullSecrets=[{"name":"regcred"}]' --set podAnnotations.a=b --set podLabels.c=d
	--set service.annotations.e=f --set serviceAccount.annotations.g=h --set healthCheck.port=13134
	--set-string 'healthCheck.host=[$(OTELCOL_TT_POD_IP)]' --set daemonset.minReadySeconds=5
	--set priorityClassName=node-agents --set fullnameOverride=tt-agent --set k8sAttributes.enabled=true
)
render "$tmp/all.yaml" "${all[@]}"
pass "every option at once renders: $(check parse "$tmp/all.yaml")"
check monitors "$tmp/all.yaml" '{"targetLabel":"cluster","replacement":"c1"}'
check hostproc "$tmp/all.yaml" /host/proc
if ! "$helm" lint --strict "$chart" "${all[@]}" >"$tmp/lint.out" 2>&1; then
	cat "$tmp/lint.out" >&2
	fail "helm lint --strict with every option"
fi
pass "helm lint --strict with every option"

render "$tmp/interval.yaml" --set config.receivers.ttprocess.collection_interval=30s
check value "$tmp/interval.yaml" receivers.ttprocess.collection_interval 30s
check value "$tmp/interval.yaml" exporters.prometheus.endpoint '${env:OTELCOL_TT_PROMETHEUS_ENDPOINT:-127.0.0.1:9464}'
before=$(check checksum "$tmp/default.yaml")
after=$(check checksum "$tmp/interval.yaml")
[[ $before != "$after" ]] || fail "checksum/config did not change with the collector config"
pass "a config override merges key by key and changes checksum/config"

# Both base images are pinned by digest: a tag alone can move under the build.
dockerfile=$here/../../Dockerfile.otelcol-tt
unpinned=$("$python" - "$dockerfile" <<'PY'
import re
import sys

text = open(sys.argv[1]).read()
args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.M))
froms = re.findall(r"^FROM\s+(?:--\S+\s+)*(\S+)", text, re.M)
if not froms:
    print("no FROM line")
for ref in froms:
    name = re.fullmatch(r"\$\{?(\w+)\}?", ref)
    image = args.get(name.group(1), ref) if name else ref
    if not re.search(r"@sha256:[0-9a-f]{64}$", image):
        print(image)
PY
)
[[ -z $unpinned ]] || fail "Dockerfile.otelcol-tt base images not pinned by @sha256: $unpinned"
pass "every base image of Dockerfile.otelcol-tt is pinned by digest"

echo "test-chart: PASS"
