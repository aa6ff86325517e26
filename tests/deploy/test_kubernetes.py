"""The course on Kubernetes (Zero to JupyterHub + KubeSpawner), checked offline (marker ``kubernetes``).

No cluster and no network: KubeSpawner itself renders the pods and claims it would create for two students,
from jupyter_config/jupyterhub_config.py (HUB_MODE=kubernetes) with the environment deploy/kubernetes/values.yaml gives
the hub; its client is pointed at a kubeconfig for 127.0.0.1 that is never contacted. Every manifest (those
pods and claims, deploy/kubernetes/course.yaml) is validated with kubernetes-validate against Kubernetes'
own OpenAPI schemas of the pinned versions, strictly (unknown fields fail). The values file is merged onto
the chart's defaults and validated against the chart's values.schema.json, as `helm install` does
(golden files in tests/deploy/z2jh/, provenance in tests/deploy/z2jh/PROVENANCE.md). What the API server would
decide is checked with the rules it applies: Pod Security admission per namespace (the students' and the chart's
pods against `restricted`, the grader's against `baseline`), RBAC for the hub's service account, and which pods
each NetworkPolicy admits across the two namespaces.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from traitlets.config.loader import PyFileConfigLoader

pytestmark = pytest.mark.kubernetes

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
CHART = REPO / "tests" / "deploy" / "z2jh"
CHART_VERSION = "4.4.0"
# The oldest Kubernetes the deployment claims (README) and the newest kubernetes-validate 1.37.0 knows.
K8S_VERSIONS = ("1.33.0", "1.37.0")
COURSE = "dl-attention"
# The chart's release namespace: the hub, the proxy and the students' pods.
HUB_NAMESPACE = COURSE
# The grader's namespace: the sandbox broker's pod, the only privileged one.
GRADER_NAMESPACE = f"{COURSE}-grader"
STUDENTS = ("ana.lopez", "student2")  # "ana.lopez" is one KubeSpawner turns into a slug with a hash
POD_EXCHANGE = "/srv/nbgrader/exchange"
HUB_IP = "10.96.0.10"  # a Service cluster IP as Kubernetes gives it to the hub pod (never contacted)

VALUES = yaml.safe_load((DEPLOY / "values.yaml").read_text())
COURSE_DOCS = [doc for doc in yaml.safe_load_all((DEPLOY / "course.yaml").read_text()) if doc]

# Labels of the chart's hub and proxy pods (templates/hub/deployment.yaml and proxy/deployment.yaml at 4.4.0:
# jupyterhub.matchLabelsLegacyAndModern plus the network-access labels), release "dl-attention".
CHART_POD_LABELS = {
    "hub": {"component": "hub", "app": "jupyterhub", "release": COURSE,
            "app.kubernetes.io/component": "hub", "app.kubernetes.io/name": "jupyterhub",
            "app.kubernetes.io/instance": COURSE,
            "hub.jupyter.org/network-access-proxy-api": "true",
            "hub.jupyter.org/network-access-proxy-http": "true",
            "hub.jupyter.org/network-access-singleuser": "true"},
    "proxy": {"component": "proxy", "app": "jupyterhub", "release": COURSE,
              "app.kubernetes.io/component": "proxy", "app.kubernetes.io/name": "jupyterhub",
              "app.kubernetes.io/instance": COURSE,
              "hub.jupyter.org/network-access-hub": "true",
              "hub.jupyter.org/network-access-singleuser": "true"},
}


# --------------------------------------------------------------------------- helpers

# What the operator puts into the Secrets the values file and course.yaml name (README: "Running on Kubernetes").
SECRET_VALUES = {"formgrader-api-token": "t" * 64, "admin-password": "the admin's initial passphrase 7"}


def secret_value(ref: dict) -> str:
    """A secretKeyRef's value as the operator's Secret holds it; an unknown key fails the test."""
    return SECRET_VALUES[ref["valueFrom"]["secretKeyRef"]["key"]]


def hub_environment(tmp: Path) -> dict[str, str]:
    """The hub pod's environment from values.yaml's hub.extraEnv (a Secret's key becomes its test value),
    plus what Kubernetes and the chart add, and scratch paths for the hub's state and the exchange."""
    env = {}
    for name, value in VALUES["hub"]["extraEnv"].items():
        env[name] = value if isinstance(value, str) else secret_value(value)
    env.update(HUB_STATE_DIR=str(tmp / "hub-state"), EXCHANGE_ROOT=str(tmp / "exchange"),
               HUB_SERVICE_HOST=HUB_IP, HUB_SERVICE_PORT="8081", PROXY_API_SERVICE_PORT="8001")
    return env


def load_config(directory: Path, filename: str):
    return PyFileConfigLoader(filename, str(directory)).load_config()


async def render_users(config, names, tmp: Path) -> dict[str, dict]:
    """What KubeSpawner would send to the API server when each user starts a server: its pod and the user's
    home claim, built by KubeSpawner's own manifest code for a real JupyterHub user object, after the hub's
    pre_spawn_hook (which creates the user's exchange folders)."""
    from jupyterhub import orm
    from jupyterhub.objects import Hub
    from jupyterhub.user import User
    from kubernetes_asyncio.client import ApiClient
    from kubespawner import KubeSpawner

    db = orm.new_session_factory("sqlite://")()
    hub = Hub(ip="0.0.0.0", port=8081, base_url="/hub/", connect_url=config.JupyterHub.hub_connect_url)
    settings = {"config": config, "spawner_class": KubeSpawner, "hub": hub, "domain": "", "base_url": "/"}
    out = {}
    async with ApiClient() as api:
        for name in names:
            orm_user = orm.User(name=name)
            db.add(orm_user)
            db.commit()
            spawner = User(orm_user, settings=settings, db=db).spawners[""]
            spawner.run_pre_spawn_hook()
            spawner.api_token = "u" * 32
            out[name] = {
                "pod": api.sanitize_for_serialization(await spawner.get_pod_manifest()),
                "pvc": api.sanitize_for_serialization(spawner.get_pvc_manifest()),
            }
    db.close()
    return out


@pytest.fixture(scope="module")
def offline_kubeconfig(tmp_path_factory):
    """KubeSpawner loads a client configuration when it is created; this one names 127.0.0.1 and is never used."""
    path = tmp_path_factory.mktemp("kube") / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "offline",
        "clusters": [{"name": "offline", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "offline", "user": {"token": "unused"}}],
        "contexts": [{"name": "offline", "context": {"cluster": "offline", "user": "offline"}}],
    }))
    return path


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, offline_kubeconfig):
    """The two students' pods and claims, rendered from the configuration the values file gives the hub."""
    tmp = tmp_path_factory.mktemp("k8s")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in hub_environment(tmp).items():
            mp.setenv(name, value)
        mp.setenv("KUBECONFIG", str(offline_kubeconfig))
        config = load_config(REPO / "jupyter_config", "jupyterhub_config.py")
        rendered = asyncio.run(render_users(config, STUDENTS, tmp))
    return {"config": config, "users": rendered, "exchange": tmp / "exchange"}


def container(pod: dict, name: str = "notebook") -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def selects(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a pod's labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def validate(manifest: dict, version: str) -> None:
    """Strict: fields Kubernetes does not know fail too. A kind without a schema is a failure, not a skip."""
    kubernetes_validate.validate(manifest, version, strict=True)


def course_doc(kind: str, name: str) -> dict:
    return next(d for d in COURSE_DOCS if d["kind"] == kind and d["metadata"]["name"] == name)


GRADER = course_doc("Deployment", "dl-attention-grader")
GRADER_POD = GRADER["spec"]["template"]


def exchange_mounts(pod: dict) -> dict[str, dict]:
    volume = {v["name"]: v for v in pod["spec"]["volumes"]}
    claim = VALUES["hub"]["extraEnv"]["EXCHANGE_PVC"]
    names = {n for n, v in volume.items() if v.get("persistentVolumeClaim", {}).get("claimName") == claim}
    return {m["mountPath"]: m for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
            for m in c.get("volumeMounts", []) if m["name"] in names}


# --------------------------------------------------------------------------- students' pods

@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_students_pods_and_claims_are_valid_kubernetes(deployment, version):
    for name, objects in deployment["users"].items():
        for kind in ("pod", "pvc"):
            validate(objects[kind], version)


def test_validation_can_fail(deployment):
    """The validator is strict enough to matter: a misspelt field and a wrong type are refused."""
    pod = copy.deepcopy(deployment["users"][STUDENTS[0]]["pod"])
    pod["spec"]["automountServiceAccountTokens"] = False
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod, K8S_VERSIONS[0])
    pod = copy.deepcopy(deployment["users"][STUDENTS[0]]["pod"])
    container(pod)["securityContext"]["runAsNonRoot"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod, K8S_VERSIONS[0])


def test_each_student_mounts_only_their_own_exchange_folders(deployment):
    users = deployment["users"]
    for name in STUDENTS:
        pod = users[name]["pod"]
        mounts = exchange_mounts(pod)
        base = f"{POD_EXCHANGE}/{COURSE}"
        assert set(mounts) == {f"{base}/outbound", f"{base}/inbound", f"{base}/feedback"}
        # The released files are shared and read-only; inbound and feedback are this student's folders alone,
        # named by the hub user name (what the hub created and what the grader's collect maps to the student).
        assert mounts[f"{base}/outbound"]["subPath"] == f"{COURSE}/outbound"
        assert mounts[f"{base}/outbound"]["readOnly"] is True
        assert mounts[f"{base}/inbound"]["subPath"] == f"{COURSE}/inbound/{name}"
        assert not mounts[f"{base}/inbound"].get("readOnly")
        assert mounts[f"{base}/feedback"]["subPath"] == f"{COURSE}/feedback/{name}"
        assert mounts[f"{base}/feedback"]["readOnly"] is True
        # Never the exchange's root or the shared inbound/feedback folders.
        assert all(m.get("subPath") for m in mounts.values())
        assert not any(m["subPath"].rstrip("/") in (COURSE, f"{COURSE}/inbound", f"{COURSE}/feedback")
                       for m in mounts.values())
        others = [other for other in STUDENTS if other != name]
        assert not any(m["subPath"].endswith("/" + other) for m in mounts.values() for other in others)
        env = {e["name"]: e.get("value") for e in container(pod)["env"]}
        assert env["NBGRADER_EXCHANGE_ROOT"] == POD_EXCHANGE and env["JUPYTERHUB_USER"] == name
    # Each student's home is a claim of their own.
    claims = {users[n]["pod"]["spec"]["volumes"][i]["persistentVolumeClaim"]["claimName"]
              for n in STUDENTS for i, v in enumerate(users[n]["pod"]["spec"]["volumes"]) if v["name"] == "home"}
    assert claims == {users[n]["pvc"]["metadata"]["name"] for n in STUDENTS} and len(claims) == 2
    for name in STUDENTS:
        assert users[name]["pvc"]["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert users[name]["pvc"]["spec"]["resources"]["requests"]["storage"] == VALUES["hub"]["extraEnv"]["STUDENT_HOME_SIZE"]


def test_the_hub_creates_exactly_the_folders_the_pods_mount(deployment):
    """kubelet would create a missing subPath folder as root (on NFS with root squash: as nobody, and then
    unwritable); the hub's pre_spawn_hook creates them first, as the hub's uid."""
    course = deployment["exchange"] / COURSE
    for name in STUDENTS:
        for mount in exchange_mounts(deployment["users"][name]["pod"]).values():
            assert (deployment["exchange"] / mount["subPath"]).is_dir(), mount["subPath"]
        assert (course / "inbound" / name).stat().st_mode & 0o7777 == 0o2770
        assert (course / "feedback" / name).stat().st_mode & 0o7777 == 0o2750
    assert sorted(p.name for p in (course / "inbound").iterdir()) == sorted(STUDENTS)


def test_students_pods_are_unprivileged(deployment):
    env = VALUES["hub"]["extraEnv"]
    for name in STUDENTS:
        pod = deployment["users"][name]["pod"]
        spec = pod["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in spec and "serviceAccount" not in spec
        assert not spec.get("initContainers") and len(spec["containers"]) == 1
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        assert not any("hostPath" in v for v in spec["volumes"])
        psc, csc = spec["securityContext"], container(pod)["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 1000 and psc["seccompProfile"]["type"] == "RuntimeDefault"
        assert csc["runAsNonRoot"] is True and csc["runAsUser"] != 0
        assert csc["allowPrivilegeEscalation"] is False and csc["privileged"] is False
        assert csc["capabilities"] == {"drop": ["ALL"]}
        assert container(pod)["image"] == env["STUDENT_IMAGE"]
        resources = container(pod)["resources"]
        assert resources["limits"]["memory"] == 1 << 30 and resources["requests"]["memory"] == 512 << 20
        assert float(resources["limits"]["cpu"]) == float(env["STUDENT_CPU_LIMIT"])
        assert float(resources["requests"]["cpu"]) == float(env["STUDENT_CPU_GUARANTEE"])


def test_students_reach_the_hub_by_ip_without_dns(deployment):
    for name in STUDENTS:
        env = {e["name"]: e.get("value") for e in container(deployment["users"][name]["pod"])["env"]}
        assert env["JUPYTERHUB_API_URL"] == f"http://{HUB_IP}:8081/hub/api"
        assert env["JUPYTERHUB_ACTIVITY_URL"].startswith(f"http://{HUB_IP}:8081/")


def test_an_ipv6_hub_address_is_bracketed(tmp_path, monkeypatch):
    for name, value in hub_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HUB_SERVICE_HOST", "fd00:10:96::a")
    config = load_config(REPO / "jupyter_config", "jupyterhub_config.py")
    assert config.JupyterHub.hub_connect_url == "http://[fd00:10:96::a]:8081"


@pytest.mark.parametrize("bad", ["..", "a/b", "../student2"])
def test_a_user_name_that_would_leave_its_folder_is_refused(tmp_path, monkeypatch, offline_kubeconfig, bad):
    for name, value in hub_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KUBECONFIG", str(offline_kubeconfig))
    config = load_config(REPO / "jupyter_config", "jupyterhub_config.py")
    with pytest.raises(ValueError, match="exchange folder"):
        asyncio.run(render_users(config, [bad], tmp_path))
    assert not (tmp_path / "exchange" / COURSE / "inbound").exists()


def test_the_course_config_has_the_last_word_over_the_charts(tmp_path, monkeypatch, offline_kubeconfig):
    """The values file's hub.extraConfig, run where the chart runs it: after the chart's own settings, in a
    namespace whose get_config is the chart's helper (not traitlets'). The chart's root init container, its
    1G guarantee and its culler must not survive; our pod must be the one the tests above checked."""
    for name, value in hub_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KUBECONFIG", str(offline_kubeconfig))
    snippet = VALUES["hub"]["extraConfig"]["10-dl-attention"]
    installed = re.search(r'load_subconfig\("([^"]+)"\)', snippet).group(1)
    chart_like = tmp_path / "chart_config.py"
    chart_like.write_text(
        "def get_config(key, default=None):  # the chart's z2jh helper shadows traitlets' get_config\n"
        "    return default\n"
        "c.JupyterHub.spawner_class = 'kubespawner.KubeSpawner'\n"
        "c.JupyterHub.cleanup_servers = False\n"
        "c.KubeSpawner.mem_guarantee = '1G'\n"
        "c.KubeSpawner.cmd = 'jupyterhub-singleuser'\n"
        "c.KubeSpawner.init_containers = [{'name': 'block-cloud-metadata', 'image': 'x',\n"
        "    'securityContext': {'privileged': True, 'runAsUser': 0, 'capabilities': {'add': ['NET_ADMIN']}}}]\n"
        "c.JupyterHub.services = [{'name': 'jupyterhub-idle-culler', 'command': ['python3', '-m', 'jupyterhub_idle_culler']}]\n"
        + snippet.replace(installed, str(REPO / "jupyter_config" / "jupyterhub_config.py"))
    )
    config = load_config(tmp_path, chart_like.name)
    pod = asyncio.run(render_users(config, [STUDENTS[0]], tmp_path))[STUDENTS[0]]["pod"]
    assert not pod["spec"].get("initContainers")
    assert container(pod)["resources"]["requests"]["memory"] == 512 << 20
    assert container(pod)["args"] == ["jupyterhub-singleuser"]
    services = {s["name"]: s for s in config.JupyterHub.services}
    assert set(services) == {COURSE, "idle-culler"}
    assert services[COURSE]["url"] == VALUES["hub"]["extraEnv"]["FORMGRADER_URL"]
    assert f"--timeout={VALUES['hub']['extraEnv']['CULL_IDLE_TIMEOUT']}" in services["idle-culler"]["command"]
    assert config.JupyterHub.cleanup_servers is False
    assert config.ConfigurableHTTPProxy.api_url == "http://proxy-api:8001"


# --------------------------------------------------------------------------- network policies

def policy(name: str) -> dict:
    return course_doc("NetworkPolicy", name)


def test_user_server_policy_selects_every_students_pod_and_nothing_else(deployment):
    spec = policy("dl-attention-user-servers")["spec"]
    for name in STUDENTS:
        assert selects(spec["podSelector"], deployment["users"][name]["pod"]["metadata"]["labels"])
    assert not selects(spec["podSelector"], GRADER_POD["metadata"]["labels"])
    assert not any(selects(spec["podSelector"], labels) for labels in CHART_POD_LABELS.values())


def test_students_reach_only_the_hub_and_the_proxy(deployment):
    spec = policy("dl-attention-user-servers")["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    reachable = set()
    for rule in spec["egress"]:
        assert rule.get("to"), "an egress rule without 'to' allows every destination"
        for peer in rule["to"]:
            assert set(peer) == {"podSelector"}, f"only pods of this namespace, not {peer}"
            hits = {name for name, labels in CHART_POD_LABELS.items() if selects(peer["podSelector"], labels)}
            assert hits and not selects(peer["podSelector"], GRADER_POD["metadata"]["labels"])
            assert not any(selects(peer["podSelector"], u["pod"]["metadata"]["labels"]) for u in deployment["users"].values())
            reachable |= hits
        assert rule.get("ports") and all(p["port"] in (8081, 8000) for p in rule["ports"])
    assert reachable == {"hub", "proxy"}
    # In: only from the pods the chart labels for it (its hub and proxy), only the server's port.
    for rule in spec["ingress"]:
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}
            assert {n for n, labels in CHART_POD_LABELS.items() if selects(peer["podSelector"], labels)} == {"hub", "proxy"}
            assert not any(selects(peer["podSelector"], u["pod"]["metadata"]["labels"]) for u in deployment["users"].values())
        assert [p["port"] for p in rule["ports"]] == [8888]
    # Policies add up: the chart's own policy for user servers (DNS, the internet) must be off.
    assert VALUES["singleuser"]["networkPolicy"]["enabled"] is False


# --------------------------------------------------------------------------- grader

@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_course_manifests_are_valid_kubernetes(version):
    kinds = [doc["kind"] for doc in COURSE_DOCS]
    assert sorted(kinds) == sorted(["Namespace", "Namespace", "PersistentVolume", "PersistentVolume",
                                    "PersistentVolumeClaim", "PersistentVolumeClaim", "PersistentVolumeClaim",
                                    "ServiceAccount", "Deployment", "Service",
                                    "NetworkPolicy", "NetworkPolicy", "NetworkPolicy"])
    for doc in COURSE_DOCS:
        validate(doc, version)


def test_the_exchange_is_one_shared_volume_and_the_course_volume_has_one_writer():
    exchange = course_doc("PersistentVolumeClaim", VALUES["hub"]["extraEnv"]["EXCHANGE_PVC"])
    assert exchange["spec"]["accessModes"] == ["ReadWriteMany"]
    assert VALUES["hub"]["extraVolumes"][0]["persistentVolumeClaim"]["claimName"] == exchange["metadata"]["name"]
    assert VALUES["hub"]["extraVolumeMounts"][0]["mountPath"] == VALUES["hub"]["extraEnv"]["EXCHANGE_ROOT"]
    course = course_doc("PersistentVolumeClaim", "dl-attention-course")
    assert course["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert GRADER["spec"]["replicas"] == 1 and GRADER["spec"]["strategy"]["type"] == "Recreate"


def grader_container(name: str) -> dict:
    return next(c for c in GRADER_POD["spec"]["containers"] + GRADER_POD["spec"]["initContainers"] if c["name"] == name)


# What the sandbox broker needs, each for a reason given in course.yaml and the README; nothing else.
BROKER_CAPABILITIES = {"SYS_ADMIN", "SETUID", "SETGID", "KILL", "CHOWN"}


def test_only_the_broker_is_privileged_and_only_as_much_as_the_sandbox_needs():
    spec = GRADER_POD["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"))
    assert not any("hostPath" in v for v in spec["volumes"])
    for name in ("formgrader", "feedback-on-submit", "course-seed"):
        sc = grader_container(name)["securityContext"]
        assert sc["runAsUser"] == 1000 and sc["runAsNonRoot"] is True
        assert sc["allowPrivilegeEscalation"] is False and sc.get("privileged") is not True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert "seccompProfile" not in sc and "appArmorProfile" not in sc  # the pod's RuntimeDefault applies
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    broker = grader_container("sandbox-broker")["securityContext"]
    assert broker.get("privileged") is False
    assert broker["capabilities"]["drop"] == ["ALL"] and set(broker["capabilities"]["add"]) == BROKER_CAPABILITIES
    # mount and pivot_root: the runtime's default seccomp and AppArmor profiles refuse them.
    assert broker["seccompProfile"]["type"] == "Unconfined" and broker["appArmorProfile"]["type"] == "Unconfined"
    # The API server refuses allowPrivilegeEscalation=false together with CAP_SYS_ADMIN (not in the schema).
    assert broker.get("allowPrivilegeEscalation") is not False


def test_the_broker_sees_neither_the_course_nor_the_exchange():
    broker = grader_container("sandbox-broker")
    assert [m["name"] for m in broker["volumeMounts"]] == ["sandbox-socket"]
    assert "FORMGRADER_API_TOKEN" not in {e["name"] for e in broker.get("env", [])}


def test_formgrader_and_broker_share_the_socket_and_agree_on_the_caller():
    formgrader, broker = grader_container("formgrader"), grader_container("sandbox-broker")
    env = {e["name"]: e for e in formgrader["env"]}
    socket = env["ATTENTION_SANDBOX_SOCKET"]["value"]
    socket_dir = str(Path(socket).parent)
    volume = lambda c: next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == socket_dir)  # noqa: E731
    assert volume(formgrader) == volume(broker)
    shared = next(v for v in GRADER_POD["spec"]["volumes"] if v["name"] == volume(broker))
    assert "emptyDir" in shared
    script = broker["args"][0]
    assert f"--socket {socket}" in script
    assert f"--allow-uid {formgrader['securityContext']['runAsUser']}" in script
    assert f"--allow-gid {formgrader['securityContext']['runAsGroup']}" in script
    # cgroup v2: a writable subtree of its own, the broker in a leaf, memory and pids delegated.
    assert "mount -o remount,rw /sys/fs/cgroup" in script and "+memory +pids" in script
    assert script.strip().splitlines()[-1].startswith("exec python -m attention_platform.grading.sandbox.broker")


def test_the_grader_is_the_hubs_course_service():
    formgrader = grader_container("formgrader")
    env = {e["name"]: e for e in formgrader["env"]}
    # The same key of a Secret of the same name, one in each namespace (the operator gives both one value).
    token = env["FORMGRADER_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == VALUES["hub"]["extraEnv"]["FORMGRADER_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert "services" not in VALUES["hub"]  # the chart would make a token nobody reads
    service = course_doc("Service", "dl-attention-grader")
    assert selects({"matchLabels": service["spec"]["selector"]}, GRADER_POD["metadata"]["labels"])
    port = service["spec"]["ports"][0]
    assert int(env["FORMGRADER_PORT"]["value"]) == next(p["containerPort"] for p in formgrader["ports"]
                                                       if p["name"] == port["targetPort"])
    assert env["NBGRADER_COURSE_ID"]["value"] == VALUES["hub"]["extraEnv"]["NBGRADER_COURSE_ID"] == COURSE
    assert formgrader["readinessProbe"]["httpGet"]["path"] == f"/services/{COURSE}/api"


# --------------------------------------------------------------------------- values file and hub image

def coalesce(defaults, overrides):
    """Helm's merge of a values file onto the chart's defaults: maps merge key by key, anything else replaces,
    and a null removes the key (the chart's own nulls too: the hub's config then gets its defaults)."""
    if not (isinstance(defaults, dict) and isinstance(overrides, dict)):
        return drop_nulls(copy.deepcopy(overrides))
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = coalesce(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return drop_nulls(merged)


def drop_nulls(value):
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    return value


def chart_validator():
    schema = json.loads((CHART / "values.schema.json").read_text())
    return jsonschema.Draft7Validator(schema)


def chart_values(values: dict) -> dict:
    return coalesce(json.loads((CHART / "values.defaults.json").read_text()), values)


def test_values_satisfy_the_charts_schema():
    errors = sorted(chart_validator().iter_errors(chart_values(VALUES)), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)


@pytest.mark.parametrize("path, value", [
    (("singleuser", "netwrkPolicy"), {"enabled": False}),  # misspelt key
    (("hub", "extraEnvs"), {"HUB_MODE": "kubernetes"}),  # misspelt key
    (("singleuser", "storage", "type"), "nfs"),  # not one of the chart's storage types
    (("cull", "enabled"), "no"),  # not a boolean
])
def test_the_schema_check_can_fail(path, value):
    values = copy.deepcopy(VALUES)
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    assert list(chart_validator().iter_errors(chart_values(values)))


def test_values_agree_with_the_course_config(deployment):
    env = VALUES["hub"]["extraEnv"]
    # The chart turns a string into a variable and a map into an env entry; anything else fails to render.
    assert all(isinstance(v, str) or (isinstance(v, dict) and set(v) == {"valueFrom"}) for v in env.values())
    assert env["HUB_MODE"] == "kubernetes"
    image = VALUES["singleuser"]["image"]
    assert f"{image['name']}:{image['tag']}" == env["STUDENT_IMAGE"]
    su = VALUES["singleuser"]
    assert (su["memory"]["guarantee"], su["memory"]["limit"]) == (env["STUDENT_MEM_GUARANTEE"], env["STUDENT_MEM_LIMIT"])
    assert (float(su["cpu"]["guarantee"]), float(su["cpu"]["limit"])) == (
        float(env["STUDENT_CPU_GUARANTEE"]), float(env["STUDENT_CPU_LIMIT"]))
    assert su["cloudMetadata"]["blockWithIptables"] is False  # a root NET_ADMIN init container otherwise
    assert su["storage"]["type"] == "none"
    assert VALUES["cull"]["enabled"] is False  # the course config's culler runs instead
    culler = next(s for s in deployment["config"].JupyterHub.services if s["name"] == "idle-culler")
    assert f"--timeout={env['CULL_IDLE_TIMEOUT']}" in culler["command"]
    assert VALUES["hub"]["podSecurityContext"]["fsGroup"] == GRADER_POD["spec"]["securityContext"]["fsGroup"] == \
        deployment["config"].KubeSpawner.fs_gid


def test_hub_image_carries_the_config_where_extra_config_loads_it():
    dockerfile = (DEPLOY / "hub.Dockerfile").read_text()
    snippet = VALUES["hub"]["extraConfig"]["10-dl-attention"]
    installed = re.search(r'load_subconfig\("([^"]+)"\)', snippet).group(1)
    assert re.search(rf"^COPY jupyter_config/jupyterhub_config\.py {re.escape(installed)}$", dockerfile, re.M)
    assert re.search(rf"^FROM quay\.io/jupyterhub/k8s-hub:{re.escape(CHART_VERSION)}$", dockerfile, re.M)
    assert f"--version {CHART_VERSION}" in (DEPLOY / "values.yaml").read_text()
    assert re.search(r"^USER 1000$", dockerfile, re.M)
    pins = dict(re.findall(r"^\s+([a-z0-9-]+)==([0-9.]+)", dockerfile, re.M))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = dict(spec.split("==") for spec in project["dependencies"] + project["optional-dependencies"]["kubernetes"])
    assert pins and all(wanted.get(name) == version for name, version in pins.items()), (pins, wanted)
    assert pins["jupyterhub-kubespawner"] == wanted["jupyterhub-kubespawner"]


def test_every_kubernetes_setting_has_its_comment():
    lines = (REPO / "jupyter_config" / "jupyterhub_config.py").read_text().splitlines()
    section = lines[next(i for i, line in enumerate(lines) if line.startswith('if MODE == "kubernetes"')):]
    settings = [i for i, line in enumerate(section) if re.match(r"^\s+K8S_[A-Z_]+ = ", line)]
    assert len(settings) >= 6
    for i in settings:
        assert section[i - 1].strip().startswith("#"), f"no comment above {section[i]!r}"


@pytest.mark.skipif(not os.environ.get("Z2JH_CHECKOUT"), reason="set Z2JH_CHECKOUT to a clone of "
                    "jupyterhub/zero-to-jupyterhub-k8s to run the chart's own hub config before ours")
def test_the_charts_hub_config_then_ours_initialise_a_hub():
    """tests/deploy/z2jh/chart_config_check.py, in a process of its own (it puts a pycurl stand-in on sys.path)."""
    result = subprocess.run([sys.executable, str(CHART / "chart_config_check.py"), os.environ["Z2JH_CHECKOUT"],
                             CHART_VERSION], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["spawner"] == "KubeSpawner" and found["services"] == sorted([COURSE, "idle-culler"])
    assert found["hub_connect_url"].startswith(f"http://{HUB_IP}:8081") and found["cleanup_servers"] is False
    assert found["pod_labels"]["release"] == COURSE and found["scheduler"] == "user-scheduler"


def test_the_brokers_first_uses_are_set_in_its_environment_to_a_value_it_accepts():
    from attention_platform.grading.sandbox.broker import FIRST_USES_ENV, _first_uses

    broker = grader_container("sandbox-broker")
    value = {e["name"]: e.get("value") for e in broker.get("env", [])}[FIRST_USES_ENV]
    assert _first_uses(value) == ("figures", "optimizers")  # this course's experiments notebook trains and draws
    assert "--first-uses" not in broker["args"][0]  # a flag would override the setting


# --------------------------------------------------------------------------- namespaces, Pod Security, RBAC

# Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards/, as enforced by the
# API server's PodSecurity admission at the versions above), for what the course's pods set.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
VOLUME_META = {"name"}


def pod_security_violations(spec: dict, level: str) -> list[str]:
    """What in a pod spec the level ("baseline" or "restricted") refuses; empty when the pod passes."""
    found = []
    pod_sc = spec.get("securityContext") or {}
    containers = spec.get("containers", []) + spec.get("initContainers", []) + spec.get("ephemeralContainers", [])
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            found.append(key)
    for volume in spec.get("volumes", []):
        kinds = set(volume) - VOLUME_META
        if "hostPath" in kinds:
            found.append(f"hostPath volume {volume['name']}")
        if level == "restricted" and not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']} of type {sorted(kinds)}")
    contexts = [("pod", pod_sc)] + [(c["name"], c.get("securityContext") or {}) for c in containers]
    for where, sc in contexts:
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{where}: seccomp Unconfined")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            found.append(f"{where}: AppArmor Unconfined")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{where}: hostProcess")
        if level == "restricted" and sc.get("runAsUser") == 0:
            found.append(f"{where}: runAsUser 0")
    for container in containers:
        sc, name = container.get("securityContext") or {}, container["name"]
        caps = sc.get("capabilities") or {}
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if any(p.get("hostPort") for p in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if sc.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        allowed = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPABILITIES
        if set(caps.get("add", [])) - allowed:
            found.append(f"{name}: adds {sorted(set(caps.get('add', [])) - allowed)}")
        if level != "restricted":
            continue
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        if "ALL" not in caps.get("drop", []):
            found.append(f"{name}: does not drop ALL capabilities")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot not true")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccomp {seccomp}")
    return found


def chart_pods(values: dict) -> dict[str, dict]:
    """The security-relevant part of the pods the chart creates in its namespace, as its templates at 4.4.0
    build them from these values (hub/deployment.yaml, proxy/deployment.yaml, proxy/autohttps/deployment.yaml,
    scheduling/user-scheduler/deployment.yaml, scheduling/user-placeholder/statefulset.yaml,
    image-puller/_helpers-daemonset.tpl and job.yaml): which values key becomes which securityContext."""
    v = chart_values(values)
    sc = lambda *path: functools.reduce(lambda node, key: node[key], path, v)  # noqa: E731
    chart_volumes = [{"name": "config", "configMap": {}}, {"name": "secret", "secret": {}},
                     {"name": "pvc", "persistentVolumeClaim": {}}]
    return {
        "hub": {"securityContext": sc("hub", "podSecurityContext"),
                "containers": [{"name": "hub", "securityContext": sc("hub", "containerSecurityContext")}]
                + v["hub"].get("extraContainers", []),
                "initContainers": v["hub"].get("initContainers", []),
                "volumes": chart_volumes + v["hub"].get("extraVolumes", [])},
        "proxy": {"containers": [{"name": "chp", "securityContext": sc("proxy", "chp", "containerSecurityContext")}]},
        "autohttps": {"initContainers": [{"name": "load-acme",
                                          "securityContext": sc("proxy", "secretSync", "containerSecurityContext")}],
                      "containers": [{"name": "traefik", "securityContext": sc("proxy", "traefik", "containerSecurityContext")},
                                     {"name": "secret-sync",
                                      "securityContext": sc("proxy", "secretSync", "containerSecurityContext")}]},
        "user-scheduler": {"containers": [{"name": "kube-scheduler", "securityContext":
                                           sc("scheduling", "userScheduler", "containerSecurityContext")}]},
        "user-placeholder": {"containers": [{"name": "pause", "securityContext":
                                             sc("scheduling", "userPlaceholder", "containerSecurityContext")}]},
        "image-puller": {"initContainers": [{"name": n, "securityContext": sc("prePuller", "containerSecurityContext")}
                                            for n in ("image-pull-metadata-block", "image-pull-singleuser")],
                         "containers": [{"name": "pause",
                                         "securityContext": sc("prePuller", "pause", "containerSecurityContext")}]},
        "hook-image-awaiter": {"containers": [{"name": "hook-image-awaiter", "securityContext":
                                               sc("prePuller", "hook", "containerSecurityContext")}]},
    }


def namespaces() -> dict[str, dict]:
    return {d["metadata"]["name"]: d["metadata"].get("labels", {}) for d in COURSE_DOCS if d["kind"] == "Namespace"}


def namespace_of(doc: dict) -> str:
    """Where an object of course.yaml lands: its own namespace, else the one `kubectl apply` was given
    (the chart's, as the README's command said before the grader had a namespace of its own)."""
    return doc["metadata"].get("namespace", HUB_NAMESPACE)


def test_the_pod_security_check_can_fail(deployment):
    student = deployment["users"][STUDENTS[0]]["pod"]["spec"]
    assert pod_security_violations(student, "restricted") == []
    for change, level in ((lambda s: container({"spec": s})["securityContext"].update(runAsNonRoot=False), "restricted"),
                          (lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}), "baseline"),
                          (lambda s: container({"spec": s})["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
                           "baseline"),
                          (lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "baseline"),
                          (lambda s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}), "restricted")):
        spec = copy.deepcopy(student)
        change(spec)
        assert pod_security_violations(spec, level)


def test_only_the_brokers_namespace_is_privileged(deployment):
    """PodSecurity admission works per namespace: the broker's pod (SYS_ADMIN, no seccomp, no AppArmor) needs
    `privileged`, so it has a namespace of its own; everything the hub spawns is held to `restricted`."""
    labels = namespaces()
    enforce = {name: lab.get("pod-security.kubernetes.io/enforce") for name, lab in labels.items()}
    assert enforce == {HUB_NAMESPACE: "restricted", GRADER_NAMESPACE: "privileged"}
    assert all(lab.get("pod-security.kubernetes.io/enforce-version") for lab in labels.values())
    assert namespace_of(GRADER) == GRADER_NAMESPACE
    assert pod_security_violations(GRADER_POD["spec"], "baseline"), "the broker does need a privileged namespace"
    # Every other pod of the course meets restricted in the hub's namespace: the students' ...
    for name in STUDENTS:
        assert pod_security_violations(deployment["users"][name]["pod"]["spec"], "restricted") == []
    # ... and the chart's own, with the values this file gives them.
    for component, spec in chart_pods(VALUES).items():
        assert pod_security_violations(spec, "restricted") == [], component
    # Every namespaced object of course.yaml says where it goes.
    for doc in COURSE_DOCS:
        if doc["kind"] not in ("Namespace", "PersistentVolume"):
            assert doc["metadata"].get("namespace") in (HUB_NAMESPACE, GRADER_NAMESPACE), doc["metadata"]["name"]


# The chart's RBAC for its hub (templates/hub/rbac.yaml at 4.4.0, release dl-attention): the only
# permissions of the hub's service account; no ClusterRole of the chart binds it.
CHART_HUB_RBAC = [
    {"kind": "Role", "metadata": {"name": "hub", "namespace": HUB_NAMESPACE},
     "rules": [{"apiGroups": [""], "resources": ["pods", "persistentvolumeclaims", "secrets", "services"],
                "verbs": ["get", "watch", "list", "create", "delete"]},
               {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "watch", "list"]}]},
    {"kind": "RoleBinding", "metadata": {"name": "hub", "namespace": HUB_NAMESPACE},
     "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": HUB_NAMESPACE}],
     "roleRef": {"kind": "Role", "name": "hub", "apiGroup": "rbac.authorization.k8s.io"}},
]
HUB_ACCOUNT = {"kind": "ServiceAccount", "name": "hub", "namespace": HUB_NAMESPACE}
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def allowed(account: dict, verb: str, resource: str, namespace: str, rbac: list[dict]) -> bool:
    """Kubernetes' RBAC decision for a service account (its own name and the groups every service account is in)."""
    groups = {"system:serviceaccounts", f"system:serviceaccounts:{account['namespace']}", "system:authenticated"}

    def names_account(subject):
        if subject["kind"] == "ServiceAccount":
            return subject["name"] == account["name"] and subject.get("namespace") == account["namespace"]
        return subject["kind"] == "Group" and subject["name"] in groups

    def role(ref, binding_namespace):
        kind = ref["kind"]
        return next((r for r in rbac if r["kind"] == kind and r["metadata"]["name"] == ref["name"]
                     and (kind == "ClusterRole" or r["metadata"].get("namespace") == binding_namespace)), None)

    for binding in rbac:
        if binding["kind"] == "RoleBinding" and binding["metadata"].get("namespace") != namespace:
            continue
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(names_account(s) for s in binding.get("subjects", [])):
            continue
        granted = role(binding["roleRef"], binding["metadata"].get("namespace"))
        for rule in (granted or {}).get("rules", []):
            if ({"", "*"} & set(rule.get("apiGroups", []))) and ({resource, "*"} & set(rule.get("resources", []))) \
                    and ({verb, "*"} & set(rule.get("verbs", []))):
                return True
    return False


def test_the_hubs_service_account_cannot_create_pods_where_the_broker_runs():
    rbac = CHART_HUB_RBAC + [d for d in COURSE_DOCS if d["kind"] in RBAC_KINDS]
    assert allowed(HUB_ACCOUNT, "create", "pods", HUB_NAMESPACE, rbac), "it spawns the students' pods"
    assert not allowed(HUB_ACCOUNT, "create", "pods", namespace_of(GRADER), rbac)
    for verb, resource in (("get", "secrets"), ("create", "persistentvolumeclaims"), ("delete", "pods")):
        assert not allowed(HUB_ACCOUNT, verb, resource, namespace_of(GRADER), rbac)
    # The grader's pod has an account of its own with no permissions and no token.
    account = GRADER_POD["spec"].get("serviceAccountName")
    assert account and account != "default" and GRADER_POD["spec"]["automountServiceAccountToken"] is False
    grader_account = {"kind": "ServiceAccount", "name": account, "namespace": GRADER_NAMESPACE}
    assert course_doc("ServiceAccount", account)["metadata"]["namespace"] == GRADER_NAMESPACE
    assert not any(allowed(grader_account, verb, res, ns, rbac) for verb in ("get", "create", "list")
                   for res in ("pods", "secrets") for ns in (HUB_NAMESPACE, GRADER_NAMESPACE))


def test_the_allowed_check_can_say_yes_and_no():
    binding = {"kind": "RoleBinding", "metadata": {"name": "x", "namespace": GRADER_NAMESPACE},
               "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}],
               "roleRef": {"kind": "ClusterRole", "name": "edit"}}
    edit = {"kind": "ClusterRole", "metadata": {"name": "edit"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    assert allowed(HUB_ACCOUNT, "create", "pods", GRADER_NAMESPACE, CHART_HUB_RBAC + [binding, edit])
    assert not allowed(HUB_ACCOUNT, "create", "pods", GRADER_NAMESPACE, CHART_HUB_RBAC + [edit])
    assert not allowed(HUB_ACCOUNT, "create", "deployments", HUB_NAMESPACE, CHART_HUB_RBAC)


def peer_admits(peer: dict, policy_namespace: str, namespace: str, labels: dict) -> bool:
    """Whether a NetworkPolicy peer (from/to) selects a pod with ``labels`` in ``namespace``: a podSelector
    alone means the policy's own namespace; with a namespaceSelector, the namespaces it selects."""
    if "ipBlock" in peer:
        return True  # an address range can be any pod: the tests refuse them
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace}):
            return False
    elif namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector", {}), labels)


def test_the_grader_is_reached_across_namespaces_by_the_hub_and_the_proxy_only(deployment):
    """The grader's policy, in the grader's namespace, names the chart's hub and proxy in theirs; the chart's
    hub policy (hub.networkPolicy.ingress) lets the grader's pod ask the hub about tokens, and nothing else."""
    grader_policy = course_doc("NetworkPolicy", "dl-attention-grader")
    where = namespace_of(grader_policy)
    assert where == namespace_of(GRADER) == GRADER_NAMESPACE
    spec = grader_policy["spec"]
    assert selects(spec["podSelector"], GRADER_POD["metadata"]["labels"])
    pods = {name: (HUB_NAMESPACE, labels) for name, labels in CHART_POD_LABELS.items()}
    pods.update({name: (HUB_NAMESPACE, u["pod"]["metadata"]["labels"]) for name, u in deployment["users"].items()})
    pods["a pod of the grader's namespace"] = (GRADER_NAMESPACE, {"app": "other"})
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    sources = {name for rule in spec["ingress"] for peer in rule["from"]
               for name, (ns, labels) in pods.items() if peer_admits(peer, where, ns, labels)}
    assert sources == {"hub", "proxy"}
    assert [p["port"] for rule in spec["ingress"] for p in rule["ports"]] == [9999]
    for rule in spec["egress"]:
        assert rule.get("to") and not any("ipBlock" in peer for peer in rule["to"])
    targets = {name for rule in spec["egress"] for peer in rule["to"]
               for name, (ns, labels) in pods.items() if peer_admits(peer, where, ns, labels)}
    assert targets == {"hub"}
    # The rest of the grader's namespace: nothing in, nothing out.
    deny = [d for d in COURSE_DOCS if d["kind"] == "NetworkPolicy" and namespace_of(d) == GRADER_NAMESPACE
            and d["spec"]["podSelector"] == {}]
    assert deny and all(set(d["spec"]["policyTypes"]) == {"Ingress", "Egress"} and not d["spec"].get("ingress")
                        and not d["spec"].get("egress") for d in deny)
    # The hub's own policy (the chart's) admits the grader on the hub's port; podSelector alone would not.
    rules = VALUES["hub"]["networkPolicy"]["ingress"]
    admitted = {name for rule in rules for peer in rule["from"]
                for name, (ns, labels) in dict(pods, grader=(GRADER_NAMESPACE, GRADER_POD["metadata"]["labels"])).items()
                if peer_admits(peer, HUB_NAMESPACE, ns, labels)}
    assert admitted == {"grader"} and [p["port"] for rule in rules for p in rule["ports"]] == [8081]
    # Names across namespaces: the grader asks the hub's Service, the hub routes to the grader's.
    env = {e["name"]: e.get("value") for e in grader_container("formgrader")["env"]}
    assert env["HUB_API_URL"] == f"http://hub.{HUB_NAMESPACE}.svc:8081/hub/api"
    service = course_doc("Service", "dl-attention-grader")
    assert namespace_of(service) == GRADER_NAMESPACE
    assert VALUES["hub"]["extraEnv"]["FORMGRADER_URL"] == \
        f"http://{service['metadata']['name']}.{GRADER_NAMESPACE}.svc:{service['spec']['ports'][0]['port']}"


def test_the_exchange_is_one_share_claimed_in_both_namespaces():
    """A claim belongs to one namespace: the hub and the students mount the exchange in theirs, the grader in
    its own, so two PersistentVolumes point at the same ReadWriteMany share, each bound to one claim alone."""
    claim = VALUES["hub"]["extraEnv"]["EXCHANGE_PVC"]
    claims = {namespace_of(d): d for d in COURSE_DOCS
              if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == claim}
    assert set(claims) == {HUB_NAMESPACE, GRADER_NAMESPACE}
    volumes = {d["metadata"]["name"]: d for d in COURSE_DOCS if d["kind"] == "PersistentVolume"}
    shares = set()
    for ns, pvc in claims.items():
        assert pvc["spec"]["accessModes"] == ["ReadWriteMany"] and pvc["spec"]["storageClassName"] == ""
        pv = volumes[pvc["spec"]["volumeName"]]
        assert pv["spec"]["claimRef"] == {"namespace": ns, "name": claim}
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["storageClassName"] == ""
        source = {k: v for k, v in pv["spec"].items() if k not in (
            "claimRef", "persistentVolumeReclaimPolicy", "storageClassName", "accessModes", "capacity",
            "mountOptions")}
        shares.add(json.dumps(source, sort_keys=True))
    assert len(shares) == 1 and len({pvc["spec"]["volumeName"] for pvc in claims.values()}) == 2
    exchange = {v["name"] for v in GRADER_POD["spec"]["volumes"]
                if v.get("persistentVolumeClaim", {}).get("claimName") == claim}
    assert exchange == {"exchange"}


# --------------------------------------------------------------------------- feedback on submit

FOS_SETTINGS = ("NBGRADER_COURSE_ID", "NBGRADER_EXCHANGE_ROOT", "NBGRADER_CHECK_OWNER", "ATTENTION_SANDBOX_SOCKET")


def test_feedback_on_submit_runs_beside_the_formgrader_as_the_native_launcher_starts_it():
    """attention_platform/hub/native.py starts `attention-course feedback-on-submit --course C --exchange E` as
    the grader account; here it is a container of its own (its own memory limit, restarted alone)."""
    fos, formgrader = grader_container("feedback-on-submit"), grader_container("formgrader")
    argv = fos["command"] + fos.get("args", [])
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["attention-course"].split(":")[0] == argv[2] and argv[:2] == ["python", "-m"]
    assert argv[3] == "feedback-on-submit"
    options = dict(zip(argv[4::2], argv[5::2]))
    assert set(options) == {"--course", "--exchange"} and len(argv[4:]) == 4
    mounts = {m["mountPath"]: m for m in fos["volumeMounts"]}
    assert mounts[options["--course"]]["name"] == "course" and not mounts[options["--course"]].get("readOnly")
    assert mounts[options["--exchange"]]["name"] == "exchange"
    env, fg_env = ({e["name"]: e for e in c["env"]} for c in (fos, formgrader))
    assert {name: env[name] for name in FOS_SETTINGS} == {name: fg_env[name] for name in FOS_SETTINGS}
    assert options["--course"] == fg_env["COURSE_DIR"]["value"]
    assert options["--exchange"] == env["NBGRADER_EXCHANGE_ROOT"]["value"]
    # The grader's nbgrader settings (its sandboxed preprocessor), as the Docker grader's entrypoint gives them.
    assert env["JUPYTER_CONFIG_PATH"]["value"] == fg_env["GRADER_CONFIG_DIR"]["value"]
    assert "ATTENTION_FEEDBACK_ON_SUBMIT" in env  # the deployment's policies (README: feedback on submit)
    assert "FORMGRADER_API_TOKEN" not in env  # it never talks to the hub
    # The formgrader's account and none of the broker's powers; the broker's socket, through the same volume.
    assert fos["securityContext"] == formgrader["securityContext"]
    socket_dir = str(Path(env["ATTENTION_SANDBOX_SOCKET"]["value"]).parent)
    assert mounts[socket_dir]["name"] == "sandbox-socket"
    assert fos["resources"]["limits"]["memory"] and fos["resources"]["requests"]["memory"]
    # Its scratch space is its own, not the formgrader's.
    fg_mounts = {m["mountPath"]: m["name"] for m in formgrader["volumeMounts"]}
    assert mounts["/tmp"]["name"] != fg_mounts["/tmp"]


# --------------------------------------------------------------------------- the admin's login

def test_the_admin_logs_in_with_the_password_from_the_secret(deployment):
    """values.yaml gives the hub the admin's initial password from a Secret: the admin's login exists before
    the hub serves anything (sign-up refuses admin names), and it opens with that password only."""
    from nativeauthenticator.orm import Base
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    config = deployment["config"]
    env = VALUES["hub"]["extraEnv"]
    assert env["HUB_AUTHENTICATOR"] == "native"
    admin = env["HUB_ADMIN_USERS"]
    password = secret_value(env["HUB_ADMIN_INITIAL_PASSWORD"])
    assert env["HUB_ADMIN_INITIAL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == \
        env["FORMGRADER_API_TOKEN"]["valueFrom"]["secretKeyRef"]["name"]  # one Secret for the operator to make
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as db:
        auth = config.JupyterHub.authenticator_class(config=config, db=db)
        assert auth.admin_users == {admin}
        from hub_helpers import login_request_from

        login = login_request_from("198.51.100.7")
        assert asyncio.run(auth.authenticate(login, {"username": admin, "password": password})) == admin
        assert asyncio.run(auth.authenticate(login, {"username": admin, "password": password + "x"})) is None
        assert auth.create_user(admin, "an attacker's passphrase 9") is None
