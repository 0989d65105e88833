#!/usr/bin/env bash
# test-chart.sh HELM — lint and render the otelcol-tt chart with the given helm
# binary (v4) and check what it produces:
#   - helm lint --strict passes, with and without the Prometheus-operator kinds;
#   - every rendered document parses as YAML and has apiVersion, kind and
#     metadata.name;
#   - the DaemonSet runs in the host PID namespace by default (hostPID: true)
#     and not when daemonset.hostPID=false, and stays privileged unless told;
#   - OTELCOL_TT_HOSTNAME comes from spec.nodeName (downward API), the
#     Prometheus exporter listens on 0.0.0.0:9464 and the probes call the
#     health_check port;
#   - the ConfigMap's collector config is deploy/otelcol-tt/config.yaml, with
#     the ttprocess receiver, the prometheus exporter and the metrics pipeline;
#     a config change changes the pod template's checksum/config;
#   - ServiceMonitor and PodMonitor are absent by default and present when
#     enabled.
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
    health = (e.get("OTELCOL_TT_HEALTH_ENDPOINT") or {}).get("value", "")
    if not health.startswith("0.0.0.0:") or ports.get("health") != int(health.rsplit(":", 1)[1]):
        fail(f"health_check listens on {health!r} but the health port is {ports.get('health')!r}")
    for probe in ("livenessProbe", "readinessProbe"):
        port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
        if port != "health":
            fail(f"{probe} calls port {port!r}, want the health port")

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
check privileged "$tmp/default.yaml" true
pass "privileged by default"
check env "$tmp/default.yaml"
pass "OTELCOL_TT_HOSTNAME from spec.nodeName; prometheus on 0.0.0.0:9464; probes on the health port"
check config "$tmp/default.yaml" "$default_config"
pass "collector config equals deploy/otelcol-tt/config.yaml: ttprocess+otlp -> memory_limiter,batch -> prometheus"
check kinds "$tmp/default.yaml" DaemonSet ConfigMap ServiceAccount Service '!ServiceMonitor' '!PodMonitor'
pass "no ServiceMonitor or PodMonitor by default"

render "$tmp/nohostpid.yaml" --set daemonset.hostPID=false
check parse "$tmp/nohostpid.yaml" >/dev/null
check hostpid "$tmp/nohostpid.yaml" false
pass "hostPID: false with --set daemonset.hostPID=false"

render "$tmp/unprivileged.yaml" --set securityContext.privileged=false
check privileged "$tmp/unprivileged.yaml" false
pass "privileged: false with --set securityContext.privileged=false"

render "$tmp/monitors.yaml" --set serviceMonitor.enabled=true,podMonitor.enabled=true
pass "monitors render: $(check parse "$tmp/monitors.yaml")"
check kinds "$tmp/monitors.yaml" ServiceMonitor PodMonitor
pass "ServiceMonitor and PodMonitor when enabled"

render "$tmp/interval.yaml" --set config.receivers.ttprocess.collection_interval=30s
check value "$tmp/interval.yaml" receivers.ttprocess.collection_interval 30s
check value "$tmp/interval.yaml" exporters.prometheus.endpoint '${env:OTELCOL_TT_PROMETHEUS_ENDPOINT:-127.0.0.1:9464}'
before=$(check checksum "$tmp/default.yaml")
after=$(check checksum "$tmp/interval.yaml")
[[ $before != "$after" ]] || fail "checksum/config did not change with the collector config"
pass "a config override merges key by key and changes checksum/config"

echo "test-chart: PASS"
