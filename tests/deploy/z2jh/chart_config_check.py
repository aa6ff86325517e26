"""The chart's own hub configuration, then ours, as the hub pod runs them: an optional, offline check.

    python tests/deploy/z2jh/chart_config_check.py /path/to/zero-to-jupyterhub-k8s 4.4.0

Needs a checkout of jupyterhub/zero-to-jupyterhub-k8s (nothing of it is kept in this repository). From the
tag it reads ``jupyterhub/files/hub/jupyterhub_config.py`` and ``z2jh.py`` into a scratch directory, with
their /usr/local/etc/jupyterhub/ paths pointed there, and lays out what the chart mounts into the hub pod:
the merged values (chart defaults + deploy/kubernetes/values.yaml) as the Secret's values.yaml, generated
secrets, the names ConfigMap. Then, in this process: the chart's config runs (and with it our
hub.extraConfig, loading jupyter_config/jupyterhub_config.py from this checkout), KubeSpawner renders a student's pod
(validated as in tests/deploy/test_kubernetes.py), and JupyterHub initialises fully (database, users, roles, groups,
services, spawners) without starting anything or opening a connection.

The chart's config selects tornado's curl HTTP client, whose module needs pycurl (in the chart's image, not
here); a stand-in module with the two names tornado's module reads at import time is put first on sys.path.
No HTTP request is made. Prints one JSON line with what it found; exits non-zero on any failure.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def main(checkout: str, tag: str, scratch: Path) -> None:
    etc = scratch / "etc"
    for sub in ("secret", "config"):
        (etc / sub).mkdir(parents=True)
    for name in ("jupyterhub_config.py", "z2jh.py"):
        text = subprocess.run(["git", "-C", checkout, "show", f"{tag}:jupyterhub/files/hub/{name}"], check=True,
                              capture_output=True, text=True).stdout
        (etc / name).write_text(text.replace("/usr/local/etc/jupyterhub/", f"{etc}/"))
    stubs = scratch / "stubs"
    stubs.mkdir()
    (stubs / "pycurl.py").write_text("class Curl:\n    pass\n\n\nclass CurlMulti:\n    pass\n")
    sys.path.insert(0, str(stubs))

    spec = importlib.util.spec_from_file_location("k8s_tests", REPO / "tests" / "deploy" / "test_kubernetes.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)

    values = tests.chart_values(tests.VALUES)
    values["Chart"] = {"Name": "jupyterhub", "Version": tag}
    values["Release"] = {"Name": tests.COURSE, "Namespace": tests.COURSE, "Service": "Helm"}
    installed = "/srv/hub/jupyterhub_config.py"  # hub.Dockerfile's COPY destination
    values["hub"]["extraConfig"] = {k: v.replace(installed, str(REPO / "jupyter_config" / "jupyterhub_config.py"))
                                    for k, v in values["hub"]["extraConfig"].items()}
    (etc / "secret" / "values.yaml").write_text(yaml.safe_dump(values))
    for key in ("hub.config.JupyterHub.cookie_secret", "hub.config.CryptKeeper.keys",
                "hub.config.ConfigurableHTTPProxy.auth_token"):
        (etc / "secret" / key).write_text(secrets.token_hex(32))
    for name in ("hub", "proxy-api", "proxy-public", "user-scheduler", "priority", "image-pull-secret", "singleuser"):
        (etc / "config" / name).write_text(name)
    kubeconfig = scratch / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "offline",
        "clusters": [{"name": "offline", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "offline", "user": {"token": "unused"}}],
        "contexts": [{"name": "offline", "context": {"cluster": "offline", "user": "offline"}}],
    }))
    env = {k: v if isinstance(v, str) else tests.secret_value(v) for k, v in tests.VALUES["hub"]["extraEnv"].items()}
    env.update(HUB_STATE_DIR=str(scratch / "state"), EXCHANGE_ROOT=str(scratch / "exchange"),
               POD_NAMESPACE=tests.COURSE, HUB_SERVICE_HOST=tests.HUB_IP, HUB_SERVICE_PORT="8081",
               PROXY_API_SERVICE_PORT="8001", CONFIGPROXY_AUTH_TOKEN=secrets.token_hex(32), KUBECONFIG=str(kubeconfig))
    os.environ.update(env)
    (scratch / "state").mkdir()
    os.chdir(scratch / "state")

    config = tests.load_config(etc, "jupyterhub_config.py")
    pod = asyncio.run(tests.render_users(config, [tests.STUDENTS[0]], scratch))[tests.STUDENTS[0]]["pod"]
    for version in tests.K8S_VERSIONS:
        tests.validate(pod, version)
    assert not pod["spec"].get("initContainers"), pod["spec"]["initContainers"]
    assert tests.selects(tests.policy("dl-attention-user-servers")["spec"]["podSelector"], pod["metadata"]["labels"])

    from jupyterhub.app import JupyterHub

    async def initialise():
        app = JupyterHub(config=config)
        await app.initialize([])
        return app

    app = asyncio.run(initialise())
    print(json.dumps({
        "chart": tag, "authenticator": type(app.authenticator).__name__, "spawner": app.spawner_class.__name__,
        "services": sorted(app._service_map), "hub_connect_url": app.hub_connect_url,
        "proxy_api": app.proxy.api_url, "cleanup_servers": app.cleanup_servers,
        "pod_labels": pod["metadata"]["labels"], "scheduler": pod["spec"].get("schedulerName"),
    }))


if __name__ == "__main__":
    scratch = Path(tempfile.mkdtemp(prefix="z2jh-check-"))
    try:
        main(sys.argv[1], sys.argv[2], scratch)
    finally:
        os.chdir("/")
        shutil.rmtree(scratch, ignore_errors=True)
