"""Runs the containers of rendered Kubernetes manifests as local processes (tests/deploy).

A pod becomes one process on its own loopback address: the container's command and args
with Kubernetes' $(VAR) expansion, its env and envFrom (ConfigMaps, Secrets, fieldRef
metadata.name), its volumes as directories (Secrets and ConfigMaps written out, emptyDirs
and PersistentVolumeClaims kept per pod name), and host names mapped to loopback addresses
the way cluster DNS would answer them: a pod's stable name (dlock-etcd-0.dlock-etcd) to its
address, a headless Service's name to all its pods' addresses (written out as a list, which
is what the DNS answer holds), 0.0.0.0 to the pod's own address. Probes are the manifest's
httpGet probes, sent to that address; `scheme: HTTPS` ones over TLS without verifying the
certificate, as the kubelet does.
"""
import base64
import ctypes
import http.client
import os
import re
import shutil
import signal
import ssl
import subprocess
import time


def die_with_parent():
    """A pod process gets SIGKILL when the test dies (e.g. killed by CTest's timeout)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def http_get(host, port, path, timeout=2.0, scheme="HTTP"):
    """Status of GET http(s)://host:port/path, or None when it cannot connect."""
    try:
        if scheme == "HTTPS":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # the kubelet's probes do not verify either
            connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        connection.request("GET", path)
        status = connection.getresponse().status
        connection.close()
        return status
    except OSError:  # ssl.SSLError included
        return None


class Cluster:
    """The rendered objects, and the name → address map of cluster DNS."""

    def __init__(self, docs, executables, secret_data=None):
        self.docs = docs
        self.executables = executables  # image command → local binary
        self.secret_data = secret_data or {}  # Secret name → {key: text}, replacing the render's
        self.addresses = {}  # DNS name → [addresses]

    def find(self, kind, name):
        return next(d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name)

    def register(self, name, address, service=None):
        self.addresses[name] = [address]
        if service:
            self.addresses[f"{name}.{service}"] = [address]
            self.addresses.setdefault(service, [])
            if address not in self.addresses[service]:
                self.addresses[service].append(address)

    def map_hosts(self, text, own_address):
        """Rewrites http://NAME:PORT URLs (and 0.0.0.0) as cluster DNS would resolve them."""
        text = text.replace("0.0.0.0", own_address)

        def url(match):
            scheme, host, port = match.group(1), match.group(2), match.group(3)
            short = re.sub(r"\.[a-z0-9-]+\.svc(\.cluster\.local)?$", "", host)
            if short not in self.addresses:
                return match.group(0)
            return ",".join(f"{scheme}{a}:{port}" for a in self.addresses[short])

        return re.sub(r"(https?://)([A-Za-z0-9.-]+):(\d+)", url, text)

    def config_data(self, kind, name):
        if kind == "Secret" and name in self.secret_data:
            return self.secret_data[name]
        obj = self.find(kind, name)
        if kind == "ConfigMap":
            return dict(obj.get("data", {}))
        data = {k: base64.b64decode(v).decode() for k, v in obj.get("data", {}).items()}
        data.update(obj.get("stringData", {}))
        return data


class Pod:
    """One pod of a workload: one container, run as a process on `address`."""

    started = []  # every pod process, for kill_all()

    @classmethod
    def kill_all(cls):
        for pod in cls.started:
            if pod.running():
                pod.process.kill()
                pod.process.wait()

    def __init__(self, cluster, workload, name, address, workdir):
        self.cluster = cluster
        self.workload = workload
        self.name = name
        self.address = address
        self.dir = os.path.join(os.path.abspath(workdir), name)
        self.process = None
        self.log = None
        spec = workload["spec"]["template"]["spec"]
        self.pod_spec = spec
        self.container = spec["containers"][0]
        self.ports = {p.get("name"): p["containerPort"] for p in self.container.get("ports", [])}

    def probe_port(self, probe):
        port = probe["httpGet"]["port"]
        return self.ports[port] if isinstance(port, str) else port

    def probe(self, kind):
        """The manifest's readinessProbe or livenessProbe, once: True when it answers 2xx/3xx."""
        probe = self.container[kind]
        status = http_get(self.address, self.probe_port(probe), probe["httpGet"]["path"],
                          probe.get("timeoutSeconds", 1), probe["httpGet"].get("scheme", "HTTP"))
        return status is not None and 200 <= status < 400

    def _volumes(self):
        """Each volume as a directory under the pod's; returns mountPath → local directory."""
        claims = {c["metadata"]["name"] for c in self.workload["spec"].get("volumeClaimTemplates", [])}
        mounts = {}
        for volume in self.pod_spec.get("volumes", []) + [{"name": c} for c in claims]:
            local = os.path.join(self.dir, "volumes", volume["name"])
            if "emptyDir" in volume and os.path.isdir(local):
                shutil.rmtree(local)  # an emptyDir starts empty in every new pod
            os.makedirs(local, exist_ok=True)
            for kind, field in (("Secret", "secret"), ("ConfigMap", "configMap")):
                if field in volume:
                    ref = volume[field].get("secretName", volume[field].get("name"))
                    for key, text in self.cluster.config_data(kind, ref).items():
                        with open(os.path.join(local, key), "w") as f:
                            f.write(text)
            for mount in self.container.get("volumeMounts", []):
                if mount["name"] == volume["name"]:
                    mounts[mount["mountPath"]] = local
        return mounts

    def _environment(self):
        env = {}
        for source in self.container.get("envFrom", []):
            if "configMapRef" in source:
                env.update(self.cluster.config_data("ConfigMap", source["configMapRef"]["name"]))
            if "secretRef" in source:
                env.update(self.cluster.config_data("Secret", source["secretRef"]["name"]))
        for item in self.container.get("env", []):
            ref = item.get("valueFrom", {})
            if "value" in item:
                env[item["name"]] = item["value"]
            elif ref.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[item["name"]] = self.name
            elif "configMapKeyRef" in ref:
                key = ref["configMapKeyRef"]
                env[item["name"]] = self.cluster.config_data("ConfigMap", key["name"])[key["key"]]
            elif "secretKeyRef" in ref:
                key = ref["secretKeyRef"]
                env[item["name"]] = self.cluster.config_data("Secret", key["name"])[key["key"]]
            else:
                raise ValueError(f"{self.name}: env {item['name']}: unsupported source {ref}")
        return env

    def command_line(self):
        """(argv, env) of the container as this pod would run it, mapped to this machine."""
        mounts = self._volumes()
        env = self._environment()

        def expand(text):
            text = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                          lambda m: env.get(m.group(1), m.group(0)), text)
            for path, local in sorted(mounts.items(), key=lambda item: -len(item[0])):
                # A value that is a path under the mount, or a --flag=path argument.
                pattern = r"(^|=)" + re.escape(path.rstrip("/")) + r"(?=/|$)"
                if re.search(pattern, text):
                    text = re.sub(pattern, lambda m: m.group(1) + local, text, count=1)
                    break
            return self.cluster.map_hosts(text, self.address)

        argv = [expand(a) for a in self.container.get("command", []) + self.container.get("args", [])]
        argv[0] = self.cluster.executables[argv[0]]
        env = {k: expand(v) for k, v in env.items()}
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        return argv, env

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        argv, env = self.command_line()
        self.log = open(os.path.join(self.dir, "output.log"), "ab")
        self.process = subprocess.Popen(argv, env=env, cwd=self.dir, stdout=self.log,
                                        stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        Pod.started.append(self)
        return argv, env

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: "
                                   f"see {self.dir}/output.log")
            if self.probe("readinessProbe"):
                return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready within {timeout} s")

    def kill(self):
        """kill -9 of the pod's process (a node or pod vanishing)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def terminate(self, grace_seconds):
        """SIGTERM, then SIGKILL after the grace period; the exit code (or None if killed)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        self.log.close()
        return code

    def running(self):
        return self.process is not None and self.process.poll() is None
