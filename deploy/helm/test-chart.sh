#!/usr/bin/env bash
# test-chart.sh HELM — lint and render the otelcol-tt chart with the given helm
# binary (v4) and check what it produces:
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
#   - every documented option renders, all at once, and lints;
#   - every base image of Dockerfile.otelcol-tt is pinned by @sha256 digest.
# Nothing talks to a cluster. Needs python3 with PyYAML (Debian: python3-yaml).
set -euo pipefail

fail() {
	echo "test-chart: FAIL: $*" >&2
	exit 1
}
pass() { echo "test-chart: ok   $*"; }

[[ $# -eq 1 ]] || fail "usage: $0 /path/to/helm"
helm=$1
[[ -x $helm ]] || fail "helm binary $helm is not executable"
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

# check CHECK FILE [ARGS...] runs one of the Python checks below on a rendered
# file; a failing check prints why and exits non-zero.
check() {
	"$python" - "$@" <<'PY'
import sys
import yaml

check, path, args = sys.argv[1], sys.argv[2], sys.argv[3:]


def fail(msg):
    print(f"test-chart: FAIL: {check} {path}: {msg}", file=sys.stderr)
    sys.exit(1)


def docs():
    with open(path) as f:
        try:
            return [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            fail(f"does not parse as YAML: {e}")


def only(kind):
    found = [d for d in docs() if d.get("kind") == kind]
    if len(found) != 1:
        fail(f"want exactly one {kind}, got {len(found)}")
    return found[0]


def container():
    spec = only("DaemonSet")["spec"]["template"]["spec"]
    cs = [c for c in spec["containers"] if c["name"] == "otelcol-tt"]
    if not cs:
        fail("no otelcol-tt container in the DaemonSet")
    return cs[0]


def env(c):
    return {e["name"]: e for e in c.get("env", [])}


def json_arg(a):
    import json
    return json.loads(a)


def collector_config():
    cm = only("ConfigMap")
    try:
        return yaml.safe_load(cm["data"]["config.yaml"])
    except (KeyError, yaml.YAMLError) as e:
        fail(f"ConfigMap data config.yaml is missing or not YAML: {e}")


if check == "parse":
    ds = docs()
    if not ds:
        fail("rendered nothing")
    for i, d in enumerate(ds):
        if not isinstance(d, dict):
            fail(f"document {i} is a {type(d).__name__}, not a mapping")
        name = (d.get("metadata") or {}).get("name")
        if not d.get("apiVersion") or not d.get("kind") or not name:
            fail(f"document {i} lacks apiVersion, kind or metadata.name: {d!r:.200}")
    print(" ".join(sorted(f"{d['kind']}/{d['metadata']['name']}" for d in ds)))

elif check == "hostpid":
    want = {"true": True, "false": False}[args[0]]
    spec = only("DaemonSet")["spec"]["template"]["spec"]
    if "hostPID" not in spec:
        fail("the pod spec has no hostPID field")
    if spec["hostPID"] is not want:
        fail(f"hostPID is {spec['hostPID']!r}, want {want!r}")

elif check == "privileged":
    want = {"true": True, "false": False}[args[0]]
    got = (container().get("securityContext") or {}).get("privileged", False)
    if got is not want:
        fail(f"securityContext.privileged is {got!r}, want {want!r}")

elif check == "env":
    c = container()
    e = env(c)
    host = e.get("OTELCOL_TT_HOSTNAME")
    if host is None:
        fail("no OTELCOL_TT_HOSTNAME in the container's env")
    field = ((host.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    if field != "spec.nodeName":
        fail(f"OTELCOL_TT_HOSTNAME is {host!r}, want valueFrom.fieldRef.fieldPath spec.nodeName")
    prom = (e.get("OTELCOL_TT_PROMETHEUS_ENDPOINT") or {}).get("value")
    if prom != "0.0.0.0:9464":
        fail(f"OTELCOL_TT_PROMETHEUS_ENDPOINT is {prom!r}, want '0.0.0.0:9464'")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if ports.get("metrics") != 9464:
        fail(f"container port metrics is {ports.get('metrics')!r}, want 9464")
    names = [x["name"] for x in c.get("env", [])]
    pod_ip = ((e.get("OTELCOL_TT_POD_IP") or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
    if pod_ip != "status.podIP":
        fail(f"OTELCOL_TT_POD_IP is {e.get('OTELCOL_TT_POD_IP')!r}, want it from status.podIP")
    health = (e.get("OTELCOL_TT_HEALTH_ENDPOINT") or {}).get("value", "")
    if health != f"$(OTELCOL_TT_POD_IP):{ports.get('health')}":
        fail(f"health_check listens on {health!r}, want the pod IP and the health port {ports.get('health')!r}")
    # The kubelet expands $(VAR) only from variables defined earlier.
    if names.index("OTELCOL_TT_POD_IP") > names.index("OTELCOL_TT_HEALTH_ENDPOINT"):
        fail(f"OTELCOL_TT_POD_IP comes after OTELCOL_TT_HEALTH_ENDPOINT in {names}")
    for probe in ("livenessProbe", "readinessProbe"):
        port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
        if port != "health":
            fail(f"{probe} calls port {port!r}, want the health port")

elif check == "security":
    # The unprivileged defaults (issue 23, point 1).
    pod = only("DaemonSet")["spec"]["template"]["spec"]
    sc = container().get("securityContext") or {}
    psc = pod.get("securityContext") or {}
    want = {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
    }
    for k, v in want.items():
        if sc.get(k) is not v:
            fail(f"container securityContext.{k} is {sc.get(k)!r}, want {v!r}")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        fail(f"capabilities are {caps!r}, want drop [ALL] and nothing added")
    if psc.get("runAsNonRoot") is not True:
        fail(f"pod securityContext.runAsNonRoot is {psc.get('runAsNonRoot')!r}, want True")
    uid = psc.get("runAsUser")
    # 65532 is distroless's "nonroot" and 65534 "nobody": shared by many images.
    if not isinstance(uid, int) or uid in (0, 65532, 65534) or uid != int(args[0]):
        fail(f"pod securityContext.runAsUser is {uid!r}, want the dedicated UID {args[0]}")
    if psc.get("runAsGroup") != uid:
        fail(f"pod securityContext.runAsGroup is {psc.get('runAsGroup')!r}, want {uid}")
    sp = (psc.get("seccompProfile") or {}).get("type")
    if sp != "RuntimeDefault":
        fail(f"pod seccompProfile is {sp!r}, want RuntimeDefault")
    if any("hostPath" in v for v in pod.get("volumes", [])):
        fail(f"a hostPath volume by default: {pod['volumes']!r}")

elif check == "hostproc":
    pod = only("DaemonSet")["spec"]["template"]["spec"]
    c = container()
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    hp = [n for n, v in vols.items() if (v.get("hostPath") or {}).get("path") == "/proc"]
    if len(hp) != 1:
        fail(f"want one hostPath volume of /proc, volumes are {vols!r}")
    mounts = [m for m in c.get("volumeMounts", []) if m["name"] == hp[0]]
    if len(mounts) != 1 or mounts[0].get("readOnly") is not True or mounts[0]["mountPath"] != args[0]:
        fail(f"the /proc hostPath is mounted as {mounts!r}, want read-only at {args[0]}")
    e = env(c)
    for name, want in (("OTELCOL_TT_PROC_PATH", args[0]), ("OTELCOL_TT_DRIVER_PATH", args[0] + "/driver/tenstorrent")):
        got = (e.get(name) or {}).get("value")
        if got != want:
            fail(f"{name} is {got!r}, want {want!r}")
    if pod.get("hostPID") is not True:
        fail("hostPID is off with the /proc hostPath; it does not replace hostPID")

elif check == "scheduling":
    ds = only("DaemonSet")["spec"]
    pod = ds["template"]["spec"]
    if pod.get("nodeSelector") != {"kubernetes.io/os": "linux"}:
        fail(f"nodeSelector is {pod.get('nodeSelector')!r}, want kubernetes.io/os: linux")
    if {"operator": "Exists", "effect": "NoSchedule"} not in (pod.get("tolerations") or []):
        fail(f"tolerations are {pod.get('tolerations')!r}, want every NoSchedule taint tolerated")
    if pod.get("priorityClassName") != "system-node-critical":
        fail(f"priorityClassName is {pod.get('priorityClassName')!r}, want system-node-critical")
    ru = (ds.get("updateStrategy") or {}).get("rollingUpdate") or {}
    if ru.get("maxSurge") != 0:
        fail(f"rollingUpdate.maxSurge is {ru.get('maxSurge')!r}, want 0")
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if args[0] == "tenstorrent":
        want = [
            [{"key": "tenstorrent.com/has-tt", "operator": "In", "values": ["true"]}],
            [{"key": "feature.node.kubernetes.io/pci-1e52.present", "operator": "In", "values": ["true"]}],
        ]
        got = [t.get("matchExpressions") for t in terms or []]
        if got != want:
            fail(f"node affinity terms are {got!r}, want either Tenstorrent label: {want!r}")
    elif args[0] == "any":
        if terms:
            fail(f"node affinity {terms!r} with tenstorrentNodeAffinity.enabled=false")
    else:
        # A JSON affinity the user set: it is used as given.
        import json
        if pod.get("affinity") != json.loads(args[0]):
            fail(f"affinity is {pod.get('affinity')!r}, want the one set: {args[0]}")

elif check == "netpol":
    # netpol PORT=PEERS_JSON...: exactly these ports admitted, each from these
    # peers; no rule admits every source.
    import json
    np = only("NetworkPolicy")
    spec = np["spec"]
    sel = only("DaemonSet")["spec"]["selector"]["matchLabels"]
    if spec.get("podSelector", {}).get("matchLabels") != sel:
        fail(f"podSelector is {spec.get('podSelector')!r}, want the DaemonSet's {sel!r}")
    if spec.get("policyTypes") != ["Ingress"]:
        fail(f"policyTypes are {spec.get('policyTypes')!r}, want [Ingress]")
    got = {}
    for rule in spec.get("ingress") or []:
        if not rule.get("from"):
            fail(f"rule {rule!r} admits every source")
        for p in rule.get("ports") or []:
            got[p["port"]] = rule["from"]
    want = {}
    for a in args:
        port, peers = a.split("=", 1)
        want[port] = json.loads(peers)
    if got != want:
        fail(f"ingress is {got!r}, want {want!r}")

elif check == "monitors":
    # Both monitors keep the exported job and instance labels and take the
    # target's instance from the node name.
    for kind, key in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        ep = only(kind)["spec"][key][0]
        if ep.get("honorLabels") is not True:
            fail(f"{kind} honorLabels is {ep.get('honorLabels')!r}, want True")
        rl = ep.get("relabelings") or []
        want = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance", "action": "replace"}
        if not rl or rl[0] != want:
            fail(f"{kind} relabelings are {rl!r}, want first {want!r}")
        if args and rl[-1] != json_arg(args[0]):
            fail(f"{kind} last relabeling is {rl[-1]!r}, want the one set: {args[0]}")

elif check == "image":
    got = container()["image"]
    if got != args[0]:
        fail(f"image is {got!r}, want {args[0]!r}")

elif check == "config":
    got = collector_config()
    with open(args[0]) as f:
        want = yaml.safe_load(f)
    if got != want:
        fail(f"the chart's collector config differs from {args[0]}:\n got: {got!r}\nwant: {want!r}")
    recv = got.get("receivers") or {}
    if "ttprocess" not in recv or "otlp" not in recv:
        fail(f"receivers are {sorted(recv)}, want ttprocess and otlp")
    if recv["ttprocess"].get("hostname") != "${env:OTELCOL_TT_HOSTNAME:-}":
        fail(f"ttprocess hostname is {recv['ttprocess'].get('hostname')!r}, want it from OTELCOL_TT_HOSTNAME")
    if "prometheus" not in (got.get("exporters") or {}):
        fail("no prometheus exporter")
    pipe = ((got.get("service") or {}).get("pipelines") or {}).get("metrics")
    want_pipe = {
        "receivers": ["ttprocess", "otlp"],
        "processors": ["memory_limiter", "batch"],
        "exporters": ["prometheus"],
    }
    if pipe != want_pipe:
        fail(f"metrics pipeline is {pipe!r}, want {want_pipe!r}")
    if "health_check" not in (got.get("service") or {}).get("extensions", []):
        fail("health_check is not in service.extensions")
    # The DaemonSet mounts the ConfigMap it renders.
    cm_name = only("ConfigMap")["metadata"]["name"]
    vols = only("DaemonSet")["spec"]["template"]["spec"]["volumes"]
    if not any((v.get("configMap") or {}).get("name") == cm_name for v in vols):
        fail(f"the DaemonSet does not mount ConfigMap {cm_name}")

elif check == "value":
    # value DOTTED.PATH WANT: a setting of the collector config.
    node = collector_config()
    for key in args[0].split("."):
        node = (node or {}).get(key)
    if str(node) != args[1]:
        fail(f"{args[0]} is {node!r}, want {args[1]!r}")

elif check == "checksum":
    ann = only("DaemonSet")["spec"]["template"]["metadata"].get("annotations") or {}
    sum_ = ann.get("checksum/config", "")
    if len(sum_) != 64:
        fail(f"checksum/config annotation is {sum_!r}, want a sha256")
    print(sum_)

elif check == "kinds":
    have = {d["kind"] for d in docs()}
    for k in args:
        if k.startswith("!"):
            if k[1:] in have:
                fail(f"{k[1:]} rendered, want none")
        elif k not in have:
            fail(f"no {k} rendered; have {sorted(have)}")

else:
    fail("unknown check")
PY
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
check kinds "$tmp/default.yaml" DaemonSet ConfigMap ServiceAccount Service NetworkPolicy '!ServiceMonitor' '!PodMonitor'
pass "no ServiceMonitor or PodMonitor by default"

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
	--set priorityClassName=node-agents --set fullnameOverride=tt-agent
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
