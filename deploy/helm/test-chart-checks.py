"""Checks of a rendered otelcol-tt chart, for test-chart.sh.

Usage: test-chart-checks.py CHECK FILE [ARGS...] runs one check on the
manifests helm rendered into FILE; a failing check prints why and exits 1.
"""
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

elif check == "k8sattributes":
    # k8sattributes: RBAC to read pods, the token mounted, the node filter,
    # the processor after memory_limiter, and pod attribution on.
    role = only("ClusterRole")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    want_rules = {(("",), ("pods", "namespaces")): {"get", "list", "watch"}, (("apps",), ("replicasets",)): {"get", "list", "watch"}}
    if rules != want_rules:
        fail(f"ClusterRole rules are {rules!r}, want {want_rules!r} (read-only)")
    binding = only("ClusterRoleBinding")
    sa = only("ServiceAccount")
    if binding["roleRef"] != {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]}:
        fail(f"ClusterRoleBinding roleRef {binding['roleRef']!r} is not the ClusterRole")
    if binding["subjects"] != [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}]:
        fail(f"ClusterRoleBinding subjects {binding['subjects']!r} are not the chart's service account")
    pod = only("DaemonSet")["spec"]["template"]["spec"]
    if pod.get("automountServiceAccountToken") is not True or sa.get("automountServiceAccountToken") is not True:
        fail("the service account token is not mounted; the processor needs it to call the API server")
    node = env(container()).get("KUBE_NODE_NAME", {})
    if node.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        fail(f"KUBE_NODE_NAME is {node!r}, want spec.nodeName")
    got = collector_config()
    proc = (got.get("processors") or {}).get("k8sattributes") or {}
    if proc.get("auth_type") != "serviceAccount" or proc.get("filter") != {"node_from_env_var": "KUBE_NODE_NAME"}:
        fail(f"k8sattributes processor is {proc!r}")
    assoc = [s for a in proc.get("pod_association", []) for s in a.get("sources", [])]
    if {"from": "resource_attribute", "name": "k8s.pod.uid"} not in assoc:
        fail(f"k8sattributes does not associate by k8s.pod.uid: {assoc!r}")
    for want in ("k8s.pod.name", "k8s.namespace.name", "k8s.container.name"):
        if want not in proc.get("extract", {}).get("metadata", []):
            fail(f"k8sattributes does not extract {want}")
    pipe = got["service"]["pipelines"]["metrics"]["processors"]
    if pipe != ["memory_limiter", "k8sattributes", "batch"]:
        fail(f"metrics pipeline processors are {pipe!r}, want k8sattributes after memory_limiter")
    labels = ((got.get("exporters") or {}).get("prometheus") or {}).get("resource_constant_labels") or {}
    if set(labels.get("included", [])) != set(proc.get("extract", {}).get("metadata", [])):
        fail(f"prometheus resource_constant_labels {labels!r} are not what k8sattributes extracts")
    if any(k in ("k8s.pod.uid", "container.id") or "*" in k for k in labels.get("included", [])):
        fail(f"resource_constant_labels {labels!r} would duplicate the k8s_pod_uid or container_id label")
    attr = got["receivers"]["ttprocess"].get("attribution") or {}
    if attr.get("k8s_pod_uid") is not True or attr.get("container_id") is not True:
        fail(f"receivers.ttprocess.attribution is {attr!r}, want k8s_pod_uid and container_id on")

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
