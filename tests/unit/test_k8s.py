"""k8s/<profile>/: schema-valid manifests (their argv and environment against the other forms:
test_launch_forms)."""

import copy
import json
import os
import subprocess

import kubernetes_validate
import pytest
import yaml
from conftest import BIN

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.seat import host_profiles, profiles
from seatkit.serve import k8s, render
from seatkit.serve import spec as specs

K8S_VERSION = "1.35.0"
DEFAULT = profiles.DEFAULT_PROFILE
FOLDER = paths.REPO / "k8s" / DEFAULT


def committed() -> list[dict]:
    return [doc for file in k8s.FILES for doc in yaml.safe_load_all((FOLDER / file).read_text())]


def seat_container(objects: list[dict]) -> dict:
    workload = next(o for o in objects if o["kind"] == "StatefulSet")
    return workload["spec"]["template"]["spec"]["containers"][0]


def test_every_committed_manifest_is_valid_against_the_kubernetes_schema_strictly():
    objects = committed()
    assert {o["kind"] for o in objects} == {"StatefulSet", "Service", "ConfigMap"}
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_the_validator_rejects_what_kubernetes_would():
    broken = copy.deepcopy(seat_container(committed()))
    broken["readinesProbe"] = broken.pop("readinessProbe")  # a typo strict validation must catch
    workload = next(o for o in committed() if o["kind"] == "StatefulSet")
    workload["spec"]["template"]["spec"]["containers"] = [broken]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(workload, K8S_VERSION, strict=True)


def test_render_check_covers_the_manifests(tmp_path):
    for path in render.rendered(paths.REPO):
        target = tmp_path / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    edited = tmp_path / "k8s" / DEFAULT / "statefulset.yaml"
    edited.write_text(edited.read_text().replace("replicas: 2", "replicas: 3"))
    stale = tmp_path / "k8s" / "gone-profile" / "services.yaml"
    stale.parent.mkdir()
    stale.write_text("kind: Service\n")
    found = render.drift(tmp_path)
    assert set(found) == {edited, stale}
    assert "-  replicas: 3" in found[edited] and "+  replicas: 2" in found[edited]
    render.write(tmp_path)
    assert not stale.parent.exists() and render.drift(tmp_path) == {}


def test_render_keeps_the_users_own_files_beside_the_manifests(tmp_path):
    """A kustomization or a Secret next to the rendered manifests is the user's: render leaves it."""
    for path in render.rendered(paths.REPO):
        target = tmp_path / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    beside = tmp_path / "k8s" / DEFAULT / "kustomization.yaml"
    beside.write_text("kind: Kustomization\n")
    own = tmp_path / "k8s" / "prod" / "secret.yaml"
    own.parent.mkdir()
    own.write_text("kind: Secret\n")
    assert render.drift(tmp_path) == {}
    render.write(tmp_path)
    assert beside.read_text() == "kind: Kustomization\n" and own.read_text() == "kind: Secret\n"


def test_the_workload_places_one_seat_per_gpu_node():
    pod = next(o for o in committed() if o["kind"] == "StatefulSet")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "nvidia.com/gpu.product"
    assert pod["hostIPC"] is True
    assert all(m["readOnly"] for m in container["volumeMounts"] if m["name"].startswith("model-"))
    assert {"name": "jit-cache", "mountPath": "/cache"} in container["volumeMounts"]
    # A cold start takes the profile's health timeout (2,400 s) before /health answers.
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 2400
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert pod["terminationGracePeriodSeconds"] == 120


def test_services_address_the_fleet_and_each_seat():
    services = {o["metadata"]["name"]: o for o in committed() if o["kind"] == "Service"}
    assert services[DEFAULT]["spec"]["type"] == "ClusterIP"
    assert services[f"{DEFAULT}-seats"]["spec"]["clusterIP"] == "None"
    workload = next(o for o in committed() if o["kind"] == "StatefulSet")
    assert workload["spec"]["serviceName"] == f"{DEFAULT}-seats"


def test_kernel_module_config_carries_the_host_profiles_keys():
    config = next(o for o in committed() if o["kind"] == "ConfigMap")
    dwords = host_profiles.registry_keys().forms["five-key"].dwords
    assert config["metadata"]["namespace"] == "gpu-operator"
    assert config["data"] == {
        "nvidia.conf": f"NVreg_RegistryDwords={dwords}\n",
        "nvidia-uvm.conf": "uvm_disable_hmm=1\n",
    }


def test_a_driver_the_registry_form_does_not_suit_is_refused():
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    data["kubernetes"] = {**data["kubernetes"], "driver": "580.167.08"}
    seat = profiles.parse({**data, "name": DEFAULT})
    with pytest.raises(SeatError, match="580.167.08 does not take the five-key"):
        k8s.render(specs.build(seat))


@pytest.mark.parametrize(
    "field, value",
    [
        ("namespace", "Seats"),
        ("api_key_secret", "a_b"),
        ("gpu_products", ["x y"]),
        ("image", "-v /:/host"),
        ("name", "9seat"),
    ],
)
def test_kubernetes_fields_are_validated(field, value):
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    data["kubernetes"] = {**data["kubernetes"], field: value}
    with pytest.raises(Exception, match=f"kubernetes.{field}"):
        profiles.parse({**data, "name": DEFAULT})


def test_a_workload_name_that_no_service_can_take_is_refused():
    """A Service name is a DNS-1035 label (a letter first): the API server refuses "4gpu" and
    "4gpu-seats", which the offline schema lets through."""
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    seat = profiles.parse({**data, "name": "4gpu"})
    with pytest.raises(SeatError, match="4gpu.*starts with a digit") as raised:
        k8s.render(specs.build(seat))
    assert "kubernetes.name" in raised.value.hint


def test_pvc_models_need_a_claim_for_each_model():
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    data["kubernetes"] = {**data["kubernetes"], "models_volume": "pvc", "model_claims": {"base": "b"}}
    with pytest.raises(Exception, match="model_claims must name a claim"):
        profiles.parse({**data, "name": DEFAULT})
    data["kubernetes"]["model_claims"] = {"base": "base-weights", "draft": "draft-weights"}
    seat = profiles.parse({**data, "name": DEFAULT})
    workload = k8s.statefulset(specs.build(seat))
    claims = [
        v["persistentVolumeClaim"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == [
        {"claimName": "base-weights", "readOnly": True},
        {"claimName": "draft-weights", "readOnly": True},
    ]
    kubernetes_validate.validate(workload, K8S_VERSION, strict=True)


def test_host_plan_prints_the_iommu_tokens_node_provisioning_must_set():
    """Inside a cluster the kit cannot edit a node's boot line; plan names what provisioning sets."""
    seat = str(BIN / "seat")
    text = subprocess.run(
        [seat, "host", "plan", "paper"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    )
    assert (
        "for node provisioning: amd: iommu=off amd_iommu=off; intel: iommu=off intel_iommu=off" in text.stdout
    )
    as_json = subprocess.run([seat, "host", "plan", "paper", "--json"], capture_output=True, text=True)
    assert json.loads(as_json.stdout)["iommu_tokens"] == host_profiles.load("paper").iommu.tokens


def test_an_api_key_in_the_profiles_env_is_refused():
    """A key in env would sit in the committed profile, the script and the manifest (beside the
    Secret's, which then silently wins in a pod): the key comes only from the key file or Secret."""
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    data["env"] = {**data.get("env", {}), "VLLM_API_KEY": "baked-in"}
    with pytest.raises(Exception, match="VLLM_API_KEY comes only from"):
        profiles.parse({**data, "name": DEFAULT})


def test_an_experiments_manifests_carry_its_mark_and_a_verified_seats_none():
    """The pods of an experiment say UNVERIFIED where kubectl shows them (the kit checks nothing a
    cluster runs); the objects stay valid against the schema."""
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    reason = "a patched scheduler: test"
    data.update(name="exp", experiment={"unverified": True, "reason": reason})
    rendered = k8s.render(specs.build(profiles.parse(data)))
    objects = [doc for text in rendered.values() for doc in yaml.safe_load_all(text)]
    workload = next(o for o in objects if o["kind"] == "StatefulSet")
    mark = {"seatkit.io/unverified": reason}
    assert (
        workload["metadata"]["annotations"] == mark == workload["spec"]["template"]["metadata"]["annotations"]
    )
    assert all(o["metadata"]["annotations"] == mark for o in objects if o["kind"] == "Service")
    assert all(f"# UNVERIFIED: an experiment ({reason})" in text for text in rendered.values())
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert all("annotations" not in o["metadata"] for o in committed())
    assert "UNVERIFIED" not in "".join((FOLDER / file).read_text() for file in k8s.FILES)


def test_an_extra_mount_reaches_the_pod_as_it_reaches_the_script(tmp_path):
    """The pod mounts what the launch mounts: docker.extra_mounts too, from the node's path."""
    data = profiles._raw(profiles.profile_path(DEFAULT))[0]
    data["docker"] = {**data["docker"], "extra_mounts": [{"source": str(tmp_path), "target": "/extra"}]}
    spec = specs.build(profiles.parse({**data, "name": DEFAULT}))
    pod = k8s.statefulset(spec)["spec"]["template"]["spec"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == "/extra"]
    assert mounts == [{"name": mounts[0]["name"], "mountPath": "/extra", "readOnly": True}]
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[0]["name"])
    assert volume["hostPath"]["path"] == str(tmp_path)
    assert f"--volume {tmp_path}:/extra:ro" in render.render_script(spec)
    kubernetes_validate.validate(k8s.statefulset(spec), K8S_VERSION, strict=True)
