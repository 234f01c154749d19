#!/usr/bin/python3
"""Checks kubectl-rendered dlock manifests (deploy/k8s) against what docs/deploy.md promises.

    validate_k8s.py RENDERED.yaml [--overlay dev|prod]

Every container: resource requests (cpu, memory) and a memory limit; readiness and liveness
probes on a declared port; non-root, no privilege escalation, read-only root, ALL capabilities
dropped, seccomp RuntimeDefault; an image pinned by tag (not latest) or digest. Every selector
(workload, Service, PodDisruptionBudget, NetworkPolicy) matches the pods it is meant for, and
every ConfigMap/Secret a pod names is in the render. dlock-etcd: headless Service, parallel
start, anti-affinity, PVCs, a member list of exactly its replicas, a PDB that keeps a quorum;
and probes on etcd's /health; dlockd: >= 2 replicas, a rolling update that never has fewer
ready pods, a grace period longer than preStop + the drain (read from src/server/daemon.cc, as
packaging/check-deb does), etcd endpoints = the members, NetworkPolicies as documented, and
HTTPS with a tokens file (ADR-0017, C6): DLOCK_TLS_CERT_FILE/KEY_FILE in a mounted
kubernetes.io/tls Secret, HTTPS probes, no DLOCK_SERVER_INSECURE.
Prints one line per failed check and exits 1 if any failed.
"""
import os
import re
import sys

import yaml

DAEMON_CC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../src/server/daemon.cc")
failures = []


def drain_seconds():
    """The drain dlockd gives in-flight requests after SIGTERM, as src/server/daemon.cc sets it."""
    with open(DAEMON_CC) as f:
        found = re.findall(r"deadline_ = .*std::chrono::seconds\((\d+)\)", f.read())
    if len(found) != 1:
        raise SystemExit(f"validate_k8s: cannot read the drain from {DAEMON_CC} ({found})")
    return int(found[0])


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, name):
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    check(len(found) == 1, f"{kind}/{name}: expected exactly one, found {len(found)}")
    return found[0] if found else None


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def workloads(docs):
    return by_kind(docs, "Deployment") + by_kind(docs, "StatefulSet")


def check_container(where, container, pod_security, ports):
    name = f"{where}/{container['name']}"
    resources = container.get("resources", {})
    requests = resources.get("requests", {})
    check("cpu" in requests and "memory" in requests, f"{name}: requests need cpu and memory")
    check("memory" in resources.get("limits", {}), f"{name}: no memory limit")
    for probe_name in ("readinessProbe", "livenessProbe"):
        probe = container.get(probe_name)
        if check(probe is not None, f"{name}: no {probe_name}"):
            port = probe.get("httpGet", {}).get("port")
            check(port in ports, f"{name}: {probe_name} port {port!r} is not a container port")
    security = container.get("securityContext", {})
    non_root = security.get("runAsNonRoot", pod_security.get("runAsNonRoot"))
    user = security.get("runAsUser", pod_security.get("runAsUser"))
    check(non_root is True, f"{name}: runAsNonRoot is not true")
    check(isinstance(user, int) and user > 0, f"{name}: no numeric non-root runAsUser")
    check(security.get("allowPrivilegeEscalation") is False,
          f"{name}: allowPrivilegeEscalation is not false")
    check(security.get("readOnlyRootFilesystem") is True,
          f"{name}: readOnlyRootFilesystem is not true")
    check(security.get("privileged", False) is False, f"{name}: privileged")
    check("ALL" in security.get("capabilities", {}).get("drop", []),
          f"{name}: capabilities do not drop ALL")
    check(not security.get("capabilities", {}).get("add"), f"{name}: adds capabilities")
    seccomp = security.get("seccompProfile", pod_security.get("seccompProfile", {}))
    check(seccomp.get("type") == "RuntimeDefault", f"{name}: seccomp is not RuntimeDefault")
    image = container.get("image", "")
    digest = re.search(r"@sha256:[0-9a-f]{64}$", image)
    tag = re.search(r":([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$", image.split("@")[0].split("/")[-1])
    check(digest or (tag and tag.group(1) != "latest"),
          f"{name}: image {image!r} is not pinned (tag or digest)")


def check_pods(docs):
    known = {kind: {d["metadata"]["name"] for d in by_kind(docs, kind)}
             for kind in ("ConfigMap", "Secret")}
    for workload in workloads(docs):
        where = f"{workload['kind']}/{workload['metadata']['name']}"
        spec = workload["spec"]
        template = spec["template"]
        labels = template["metadata"].get("labels", {})
        check(matches(spec["selector"].get("matchLabels"), labels),
              f"{where}: selector does not match its pod template labels")
        pod = template["spec"]
        check(pod.get("automountServiceAccountToken") is False,
              f"{where}: mounts a service account token it does not use")
        for container in pod.get("initContainers", []) + pod["containers"]:
            ports = {p.get("name") for p in container.get("ports", [])} | {
                p["containerPort"] for p in container.get("ports", [])}
            check_container(where, container, pod.get("securityContext", {}), ports)
            # (what names it, kind, name) of every ConfigMap / Secret the container uses.
            refs = [("envFrom", "ConfigMap", source["configMapRef"]["name"])
                    for source in container.get("envFrom", []) if "configMapRef" in source]
            for env in container.get("env", []):
                ref = env.get("valueFrom", {})
                for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                    if field in ref:
                        refs.append((f"env {env['name']}", kind, ref[field]["name"]))
            for what, kind, name in refs:
                check(name in known[kind], f"{where}: {what} names a missing {kind} {name}")
        for volume in pod.get("volumes", []):
            for field, kind, key in (("configMap", "ConfigMap", "name"),
                                     ("secret", "Secret", "secretName")):
                if field in volume:
                    check(volume[field][key] in known[kind],
                          f"{where}: volume {volume['name']} names a missing {kind}")


def pods_selected(docs, selector):
    return [w["metadata"]["name"] for w in workloads(docs)
            if matches(selector, w["spec"]["template"]["metadata"].get("labels", {}))]


def check_selectors(docs):
    for service in by_kind(docs, "Service"):
        name = service["metadata"]["name"]
        check(pods_selected(docs, service["spec"].get("selector")) == [name],
              f"Service/{name}: selects {pods_selected(docs, service['spec'].get('selector'))}")
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        name = pdb["metadata"]["name"]
        selected = pods_selected(docs, pdb["spec"]["selector"].get("matchLabels"))
        check(selected == [name], f"PodDisruptionBudget/{name}: selects {selected}")
    for policy in by_kind(docs, "NetworkPolicy"):
        name = policy["metadata"]["name"]
        selected = pods_selected(docs, policy["spec"]["podSelector"].get("matchLabels"))
        check(selected == [name], f"NetworkPolicy/{name}: selects {selected}")


def etcd_checks(docs, overlay):
    etcd = one(docs, "StatefulSet", "dlock-etcd")
    service = one(docs, "Service", "dlock-etcd")
    if not etcd or not service:
        return []
    spec = etcd["spec"]
    replicas = spec["replicas"]
    check(replicas == (1 if overlay == "dev" else 3), f"dlock-etcd: {replicas} members")
    check(spec.get("serviceName") == "dlock-etcd", "dlock-etcd: serviceName")
    check(service["spec"].get("clusterIP") == "None", "Service/dlock-etcd is not headless")
    check(service["spec"].get("publishNotReadyAddresses") is True,
          "Service/dlock-etcd: members cannot find each other before a quorum")
    check(spec.get("podManagementPolicy") == "Parallel",
          "dlock-etcd: ordered start-up never gets past member 0")
    check(spec.get("volumeClaimTemplates"), "dlock-etcd: no PersistentVolumeClaims")
    anti = spec["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
    check(anti.get("requiredDuringSchedulingIgnoredDuringExecution"),
          "dlock-etcd: no required pod anti-affinity")
    container = spec["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        check(container.get(probe, {}).get("httpGet", {}).get("path") == "/health",
              f"dlock-etcd: {probe} is not GET /health")
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    members = [m.split("=")[0] for m in env.get("INITIAL_CLUSTER", "").split(",") if m]
    check(members == [f"dlock-etcd-{i}" for i in range(replicas)],
          f"dlock-etcd: INITIAL_CLUSTER names {members}, not the {replicas} pods")
    pdb = one(docs, "PodDisruptionBudget", "dlock-etcd")
    if pdb:
        unavailable = pdb["spec"].get("maxUnavailable")
        check(unavailable == 1, "PodDisruptionBudget/dlock-etcd: maxUnavailable is not 1")
        if replicas > 1:
            check(replicas - unavailable >= replicas // 2 + 1,
                  "PodDisruptionBudget/dlock-etcd: a permitted disruption loses the quorum")
    return members


def dlockd_checks(docs, members):
    dlockd = one(docs, "Deployment", "dlockd")
    config = one(docs, "ConfigMap", "dlockd-config")
    if not dlockd or not config:
        return
    spec = dlockd["spec"]
    check(spec["replicas"] >= 2, "dlockd: fewer than 2 replicas")
    rolling = spec.get("strategy", {}).get("rollingUpdate", {})
    check(spec.get("strategy", {}).get("type") == "RollingUpdate"
          and rolling.get("maxUnavailable") == 0 and rolling.get("maxSurge", 0) >= 1,
          "dlockd: a rolling update may leave fewer ready pods (maxUnavailable must be 0)")
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        check(container.get(probe, {}).get("httpGet", {}).get("path") == path,
              f"dlockd: {probe} is not GET {path}")
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    if check(pre_stop and pre_stop[0].endswith("sleep"), "dlockd: no preStop sleep"):
        check(pod.get("terminationGracePeriodSeconds", 30) > int(pre_stop[1]) + drain_seconds(),
              "dlockd: terminationGracePeriodSeconds not longer than preStop + drain")
    data = config["data"]
    check(data.get("DLOCK_LOCK_BACKEND") == "etcd", "dlockd-config: backend is not etcd")
    # The headless Service's name: it resolves to every member and is resolved again when a
    # member's pod IP changes (a list of names is resolved once at start-up).
    check(data.get("DLOCK_ETCD_ENDPOINTS") == "http://dlock-etcd:2379",
          "dlockd-config: etcd endpoints are not the headless Service dlock-etcd")
    check(len(members) >= 1, "dlock-etcd: no members")
    tls_checks(docs, pod, container, data)
    check(one(docs, "PodDisruptionBudget", "dlockd") is not None, "dlockd: no PDB")
    policy = one(docs, "NetworkPolicy", "dlockd")
    if policy:
        sources = [s for rule in policy["spec"]["ingress"] for s in rule.get("from", [])]
        check(all(s.get("podSelector", {}).get("matchLabels") == {"dlock.io/client": "true"}
                  or set(s) == {"namespaceSelector"} for s in sources) and sources,
              "NetworkPolicy/dlockd: admits pods other than labelled clients")
    policy = one(docs, "NetworkPolicy", "dlock-etcd")
    if policy:
        for rule in policy["spec"]["ingress"]:
            ports = {p["port"] for p in rule.get("ports", [])}
            for source in rule.get("from", []):
                labels = source.get("podSelector", {}).get("matchLabels")
                if 2379 in ports:
                    check(labels == {"app.kubernetes.io/name": "dlockd"},
                          "NetworkPolicy/dlock-etcd: clients other than dlockd")
                if 2380 in ports:
                    check(labels == {"app.kubernetes.io/name": "dlock-etcd"},
                          "NetworkPolicy/dlock-etcd: peers other than members")
            check(ports and not (ports - {2379, 2380, 2381}),
                  f"NetworkPolicy/dlock-etcd: rule without ports or ports {ports}")


def mounted_secret(docs, pod, container, path):
    """The Secret (object) mounted in `container` at the directory holding `path`, or None."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if os.path.dirname(path or "") == mount["mountPath"].rstrip("/"):
            name = volumes.get(mount["name"], {}).get("secret", {}).get("secretName")
            found = [d for d in by_kind(docs, "Secret") if d["metadata"]["name"] == name]
            return found[0] if found else None
    return None


def tls_checks(docs, pod, container, data):
    """dlockd serves HTTPS with bearer tokens, both from mounted Secrets (ADR-0017, C6)."""
    check(str(data.get("DLOCK_SERVER_INSECURE", "false")).lower() != "true",
          "dlockd-config: DLOCK_SERVER_INSECURE is set (plain HTTP or no tokens allowed)")
    cert, key = data.get("DLOCK_TLS_CERT_FILE"), data.get("DLOCK_TLS_KEY_FILE")
    if check(cert and key, "dlockd: no TLS (DLOCK_TLS_CERT_FILE and DLOCK_TLS_KEY_FILE)"):
        secret = mounted_secret(docs, pod, container, cert)
        if check(secret is not None and secret is mounted_secret(docs, pod, container, key),
                 "dlockd: the TLS certificate and key are not in one mounted Secret"):
            check(secret.get("type") == "kubernetes.io/tls",
                  f"Secret/{secret['metadata']['name']}: type is not kubernetes.io/tls")
            check(os.path.basename(cert) == "tls.crt" and os.path.basename(key) == "tls.key",
                  "dlockd: TLS files are not the Secret's tls.crt and tls.key")
    tokens = data.get("DLOCK_AUTH_TOKENS_FILE")
    check(tokens and mounted_secret(docs, pod, container, tokens) is not None,
          "dlockd: no tokens file from a mounted Secret (DLOCK_AUTH_TOKENS_FILE)")
    for probe in ("readinessProbe", "livenessProbe"):
        check(container.get(probe, {}).get("httpGet", {}).get("scheme") == "HTTPS",
              f"dlockd: {probe} is not HTTPS")


def validate(docs, overlay):
    check(len(docs) > 0, "nothing rendered")
    check_pods(docs)
    check_selectors(docs)
    members = etcd_checks(docs, overlay)
    dlockd_checks(docs, members)


def container_of(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)[
        "spec"]["template"]["spec"]["containers"][0]


def config(docs):
    return next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"][
        "name"] == "dlockd-config")["data"]


# Each breaks one promise; the validator must notice every one (--self-test).
MUTANTS = {
    "writable root": lambda d: container_of(d, "Deployment", "dlockd")["securityContext"].update(
        readOnlyRootFilesystem=False),
    "capabilities kept": lambda d: container_of(d, "StatefulSet", "dlock-etcd")[
        "securityContext"]["capabilities"].update(drop=[]),
    "no seccomp": lambda d: container_of(d, "Deployment", "dlockd")["securityContext"].pop(
        "seccompProfile") and next(x for x in d if x["kind"] == "Deployment")["spec"][
        "template"]["spec"]["securityContext"].pop("seccompProfile"),
    "no readiness probe": lambda d: container_of(d, "Deployment", "dlockd").pop("readinessProbe"),
    "no limits": lambda d: container_of(d, "StatefulSet", "dlock-etcd")["resources"].pop("limits"),
    "latest image": lambda d: container_of(d, "Deployment", "dlockd").update(image="dlock:latest"),
    "untagged image": lambda d: container_of(d, "StatefulSet", "dlock-etcd").update(
        image="quay.io/coreos/etcd"),
    "service selects nothing": lambda d: next(x for x in d if x["kind"] == "Service" and x[
        "metadata"]["name"] == "dlockd")["spec"].update(selector={"app": "dlockd"}),
    "etcd budget loses quorum": lambda d: next(x for x in d if x["kind"] ==
        "PodDisruptionBudget" and x["metadata"]["name"] == "dlock-etcd")["spec"].update(
        maxUnavailable=2),
    "one dlockd": lambda d: next(x for x in d if x["kind"] == "Deployment")["spec"].update(
        replicas=1),
    "surge-less update": lambda d: next(x for x in d if x["kind"] == "Deployment")["spec"][
        "strategy"]["rollingUpdate"].update(maxUnavailable=1),
    "short grace": lambda d: next(x for x in d if x["kind"] == "Deployment")["spec"][
        "template"]["spec"].update(terminationGracePeriodSeconds=12),
    "open etcd": lambda d: next(x for x in d if x["kind"] == "NetworkPolicy" and x["metadata"][
        "name"] == "dlock-etcd")["spec"]["ingress"][0]["from"][0].update(
        podSelector={"matchLabels": {}}),
    "TLS removed": lambda d: [config(d).pop(k) for k in ("DLOCK_TLS_CERT_FILE",
                                                          "DLOCK_TLS_KEY_FILE")],
    "TLS files not mounted": lambda d: container_of(d, "Deployment", "dlockd")[
        "volumeMounts"].pop(next(i for i, m in enumerate(container_of(
            d, "Deployment", "dlockd")["volumeMounts"]) if m["name"] == "tls")),
    "insecure allowed": lambda d: config(d).update(DLOCK_SERVER_INSECURE="true"),
    "no tokens file": lambda d: config(d).pop("DLOCK_AUTH_TOKENS_FILE"),
    "plain HTTP probe": lambda d: container_of(d, "Deployment", "dlockd")["livenessProbe"][
        "httpGet"].pop("scheme"),
    "etcd probe path": lambda d: container_of(d, "StatefulSet", "dlock-etcd")[
        "readinessProbe"]["httpGet"].update(path="/metrics"),
    "member list short": lambda d: container_of(d, "StatefulSet", "dlock-etcd")["env"].append(
        {"name": "INITIAL_CLUSTER", "value": "dlock-etcd-0=http://dlock-etcd-0.dlock-etcd:2380"}),
}


def self_test(path):
    """Every mutant of the prod render must fail validation."""
    global failures
    missed = []
    for name, mutate in MUTANTS.items():
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        mutate(docs)
        failures = []
        validate(docs, "prod")
        if not failures:
            missed.append(name)
    failures = [f"self-test: mutant '{name}' passed validation" for name in missed]
    print(f"validate_k8s: self-test: {len(MUTANTS) - len(missed)} of {len(MUTANTS)} mutants caught")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


def main():
    path = sys.argv[1]
    if sys.argv[2:] == ["--self-test"]:
        return self_test(path)
    overlay = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--overlay" else "prod"
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    validate(docs, overlay)
    for failure in failures:
        print(f"FAIL {path}: {failure}")
    containers = sum(len(w["spec"]["template"]["spec"]["containers"]) for w in workloads(docs))
    print(f"validate_k8s: {overlay}: {len(docs)} objects, {containers} containers, "
          f"{len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
