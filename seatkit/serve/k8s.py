"""Many identical seats on Kubernetes: k8s/<profile>/ rendered from the same LaunchSpec.

One seat per GPU node (a StatefulSet with pod anti-affinity, NVIDIA GPU Operator), a ClusterIP
Service for clients and a headless one that addresses each seat alone. The container's arguments and
environment are the script's and compose's (serve/effective.py); what differs is only where a pod
must differ: it binds every interface of its own network namespace (its Service reaches it there),
so it always takes the API key, from a Secret, and the variables the script passes through from
its shell come from an optional ConfigMap. The host settings take the cluster's own form: the P2P registry
keys and HMM-off go into the GPU Operator's kernel-module ConfigMap; the IOMMU stays a node boot
parameter (`seat host plan` prints the tokens for node provisioning).
"""

from __future__ import annotations

import math
import re

import yaml

from seatkit.errors import SeatError
from seatkit.seat import host_profiles, what_runs
from seatkit.seat.profiles import Docker, Kubernetes, Profile
from seatkit.serve import effective
from seatkit.serve.spec import LaunchSpec, resolve

POD_HOST = "0.0.0.0"  # a pod's own network namespace: its Services reach it on the pod address
API_KEY_ITEM = "api-key"  # the key inside the Secret
PROBE_PERIOD_S = 10
FILES = ("statefulset.yaml", "services.yaml", "gpu-operator-kernel-modules.yaml")


def section(profile: Profile) -> Kubernetes:
    """The profile's kubernetes section; only a profile that has one renders k8s/<profile>/."""
    if profile.kubernetes is None:
        raise SeatError(f"{profile.name} has no kubernetes section", "add one to render k8s/ manifests")
    return profile.kubernetes


def workload_name(profile: Profile) -> str:
    """The kubernetes section's name, else the profile's made DNS-safe."""
    named = section(profile).name
    if named:
        return named
    made = re.sub(r"[^a-z0-9-]+", "-", profile.name).strip("-")[:42].rstrip("-")
    if not made[:1].isalpha():  # a Service name is a DNS-1035 label
        raise SeatError(
            f"{profile.name}: the workload name {made!r} starts with a digit, which "
            "Kubernetes refuses for a Service",
            "set kubernetes.name (a letter first)",
        )
    return made


def _kubelet_escape(text: str) -> str:
    """The kubelet expands $(VAR) in args and env values; $$ is its escape for a literal $."""
    return text.replace("$", "$$")


def launch(spec: LaunchSpec) -> effective.Launch:
    """The container's launch as the script and compose have it, bound to every pod address."""
    return effective.container(spec, bound=POD_HOST)


def _values(spec: LaunchSpec) -> dict[str, str]:
    """The knobs' values in a pod: the profile's, and the pod's bind address."""
    return {**spec.values({}), "SEAT_HOST": POD_HOST}


def container_args(spec: LaunchSpec) -> list[str]:
    """The container argv the script and compose run (the profile's knob values), bound to the pod."""
    values = _values(spec)
    return [resolve(w, values) for w in launch(spec).argv()]


def _env_entry(spec: LaunchSpec, variable: effective.Variable) -> dict[str, object]:
    """One variable of the pod: a value, the key from its Secret, or a pass-through from the
    optional ConfigMap (a key absent there leaves the variable unset, as an unset shell does)."""
    name, source = variable.name, variable.source
    if source is effective.Source.KEY:
        return {
            "name": name,
            "valueFrom": {
                "secretKeyRef": {"name": section(spec.profile).api_key_secret, "key": API_KEY_ITEM}
            },
        }
    if source is effective.Source.LAUNCHER:
        ref = {"name": pass_env_config(spec.profile), "key": name, "optional": True}
        return {"name": name, "valueFrom": {"configMapKeyRef": ref}}
    return {"name": name, "value": _kubelet_escape(resolve(variable.value, _values(spec)))}


def pass_env_config(profile: Profile) -> str:
    """The ConfigMap (the operator's, optional) that sets the profile's pass-through variables."""
    return f"{workload_name(profile)}-pass-env"


def module_options(profile: Profile) -> dict[str, str]:
    """The GPU Operator's <module>.conf files: one key=value a line, as its driver container reads them."""
    kube = section(profile)
    host = host_profiles.load(kube.host_profile)
    keys = host_profiles.registry_keys()
    rule = host_profiles.rule_for(kube.driver, keys)
    if rule is None or host.registry in rule.refuse:
        why = " ".join(rule.why.split()) if rule else "no rule in host/registry-keys.yaml covers it"
        raise SeatError(
            f"{profile.name}: kubernetes.driver {kube.driver} does not take the "
            f"{host.registry} registry form of host profile {host.name}: {why}",
            "name the driver the nodes run, or a host profile whose form suits it",
        )
    # A plain module option value (host_profiles.Form): no whitespace to split it in two.
    files = {"nvidia.conf": f"NVreg_RegistryDwords={keys.forms[host.registry].dwords}\n"}
    if host.hmm_disabled:
        files["nvidia-uvm.conf"] = "uvm_disable_hmm=1\n"
    return files


def _labels(profile: Profile) -> dict[str, str]:
    return {"app.kubernetes.io/name": workload_name(profile), "app.kubernetes.io/part-of": "seatkit"}


def _metadata(profile: Profile, **fields) -> dict:
    """An object's metadata: an experiment's seat says so where a cluster's tools show it, as its
    run record does for a seat of `seat up` (what the pod runs is not checked by the kit)."""
    why = what_runs.mark({"differs": what_runs.differs(profile)})
    marks = {"annotations": {f"seatkit.io/{what_runs.MARK.lower()}": why}} if why else {}
    return {**fields, "labels": _labels(profile), **marks}


def _volumes(spec: LaunchSpec, docker: Docker) -> tuple[list[dict], list[dict]]:
    """Pod volumes and the container's mounts: the launch's (models read-only from the host or a
    claim, the JIT cache, extra mounts), then /dev/shm when the pod does not share the host's."""
    p = spec.profile
    kube = section(p)
    values = spec.values({})
    models = {model.mount: key for key, model in p.models.items()}
    volumes, mounts = [], []
    for n, mount in enumerate(launch(spec).mounts, 1):
        key = models.get(mount.target)
        if key is not None:
            name, kind = f"model-{key.replace('_', '-')}", "Directory"
        elif docker.cache and mount.target == docker.cache.mount:
            name, kind = "jit-cache", "DirectoryOrCreate"
        else:
            name, kind = f"extra-{n}", ""  # a file or a folder: the kubelet checks nothing
        if key is not None and kube.models_volume == "pvc":
            source = {"persistentVolumeClaim": {"claimName": kube.model_claims[key], "readOnly": True}}
        else:
            source = {"hostPath": {"path": resolve(mount.source, values), "type": kind}}
        volumes.append({"name": name, **source})
        mounts.append(
            {"name": name, "mountPath": mount.target, **({"readOnly": True} if mount.read_only else {})}
        )
    if docker.ipc != "host":
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return volumes, mounts


def _probe(failures: int) -> dict:
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _container(spec: LaunchSpec, mounts: list[dict]) -> dict:
    """The seat's container: the script's argv and environment, the key from its Secret, probes."""
    p = spec.profile
    kube = section(p)
    return {
        "name": "seat",
        "image": kube.image or spec.values({})["SEAT_IMAGE"],
        "args": [_kubelet_escape(a) for a in container_args(spec)],
        "env": [_env_entry(spec, v) for v in launch(spec).env],
        "ports": [{"name": "http", "containerPort": p.server.port}],
        "resources": {"limits": {"nvidia.com/gpu": p.gpus.count}},
        "volumeMounts": mounts,
        # A cold JIT cache takes the profile's health timeout before /health answers.
        "startupProbe": _probe(math.ceil(p.server.health_timeout_s / PROBE_PERIOD_S)),
        "readinessProbe": _probe(3),
        "livenessProbe": _probe(6),
        "securityContext": {"privileged": False, "allowPrivilegeEscalation": False},
    }


def statefulset(spec: LaunchSpec) -> dict:
    p = spec.profile
    kube, docker = section(p), p.docker
    assert docker is not None  # a native profile has no kubernetes section (profiles.NativeProfile)
    name, labels = workload_name(p), _labels(p)
    volumes, mounts = _volumes(spec, docker)
    pod = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": list(kube.gpu_products),
                                }
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
                ]
            },
        },
        "hostIPC": docker.ipc == "host",
        "terminationGracePeriodSeconds": docker.stop_grace_s,
        "containers": [_container(spec, mounts)],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(p, name=name, namespace=kube.namespace),
        "spec": {
            "serviceName": f"{name}-seats",
            "replicas": kube.replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {"metadata": _metadata(p), "spec": pod},
        },
    }


def services(profile: Profile) -> list[dict]:
    """A ClusterIP Service for clients, and a headless one: one address per seat, for the fleet bench."""
    kube, name, labels = section(profile), workload_name(profile), _labels(profile)
    port = [{"name": "http", "port": profile.server.port, "targetPort": "http"}]
    meta = _metadata(profile, namespace=kube.namespace)
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, **meta},
            "spec": {"type": "ClusterIP", "selector": labels, "ports": port},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{name}-seats", **meta},
            "spec": {"clusterIP": "None", "selector": labels, "ports": port},
        },
    ]


def kernel_module_config(profile: Profile) -> dict:
    kube = section(profile)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{workload_name(profile)}-kernel-modules",
            "namespace": kube.gpu_operator_namespace,
            "labels": _labels(profile),
        },
        "data": module_options(profile),
    }


def manifests(spec: LaunchSpec) -> dict[str, list[dict]]:
    """Each file of k8s/<profile>/ and the objects it holds."""
    p = spec.profile
    return dict(zip(FILES, ([statefulset(spec)], services(p), [kernel_module_config(p)]), strict=True))


def _header(spec: LaunchSpec, file: str) -> str:
    profile = spec.profile
    kube = section(profile)
    lines = [
        f"# {profile.name}: rendered by `seat render` from profiles/{profile.name}.yaml",
        f"# (profile sha256 {profile.sha256[:16]}). Do not edit. The same LaunchSpec as",
        "# serve/*.sh and docker-compose.yml; see docs/kubernetes.md.",
    ]
    why = what_runs.mark({"differs": what_runs.differs(profile)})
    if why:
        lines.append(f"# {what_runs.MARK}: an experiment ({why}); its pods are annotated so.")
    if file == "statefulset.yaml":
        lines += [
            f"# Needs Secret {kube.api_key_secret} (item {API_KEY_ITEM}) in namespace "
            f"{kube.namespace}, and nodes",
            f"# booted with the IOMMU tokens of host profile {kube.host_profile} "
            f"(`seat host plan {kube.host_profile}` prints them).",
            "# Not expressible in a pod: docker's --ulimit and --init (the runtime's defaults apply).",
        ]
        if spec.pass_env:
            lines += [
                f"# {', '.join(spec.pass_env)}: from ConfigMap {pass_env_config(profile)} where it has",
                "# the key (optional), as the script passes them from its shell only when set.",
            ]
    if file == "gpu-operator-kernel-modules.yaml":
        lines += [
            "# Install the GPU Operator with driver.kernelModuleConfig.name set to this ConfigMap's name."
        ]
    return "\n".join(lines) + "\n"


class _Plain(yaml.SafeDumper):
    """Written out in full: no &anchors for the label mapping used in several places."""

    def ignore_aliases(self, data):
        return True

    def represent_str(self, data):
        style = "|" if "\n" in data else None
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Plain.add_representer(str, _Plain.represent_str)


def render(spec: LaunchSpec) -> dict[str, str]:
    """File name -> text, for a profile with a kubernetes section."""
    return {
        file: _header(spec, file)
        + yaml.dump_all(objects, Dumper=_Plain, sort_keys=False, width=100, allow_unicode=True)
        for file, objects in manifests(spec).items()
    }
