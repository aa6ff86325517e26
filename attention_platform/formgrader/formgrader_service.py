"""The course's formgrader as an external JupyterHub service.

The grader is a JupyterLab (``jupyterhub-singleuser``) of the course's grader
account, served under ``/services/<course>/``, with nbgrader's formgrader inside.
The hub only routes to it and checks who may use it; this module starts it with
the environment a hub-managed service would get. The Docker grader container runs
``python -m attention_platform.formgrader.formgrader_service`` and the native launcher runs
the same function, so both deployments start the formgrader one way.

Environment:
  FORMGRADER_API_TOKEN  the service's token (the hub has the same one)
  HUB_API_URL           where the hub's REST API answers (e.g. http://hub:8081/hub/api)
  NBGRADER_COURSE_ID    course id = service name
  FORMGRADER_IP / FORMGRADER_PORT   where this server listens
  COURSE_DIR            the nbgrader course directory (the server's root)
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

from attention_platform.settings import settings, settings_or_exit

HUB_DIR = Path(__file__).resolve().parents[2] / "jupyter_config"
# How long the formgrader waits for the hub's API: a hub's first start creates its database and an
# upgrade migrates it, and jupyterhub-singleuser itself gives a hub that does not answer only five tries.
HUB_API_WAIT_SECONDS = 600


def service_env(*, course: str, api_token: str, hub_api_url: str, ip: str, port: int,
                base_url: str = "/") -> dict[str, str]:
    prefix = f"{base_url}services/{course}/"
    access = json.dumps([f"access:services!service={course}"])
    return {
        "JUPYTERHUB_SERVICE_NAME": course,
        "JUPYTERHUB_API_TOKEN": api_token,
        "JUPYTERHUB_CLIENT_ID": f"service-{course}",
        "JUPYTERHUB_API_URL": hub_api_url,
        "JUPYTERHUB_BASE_URL": base_url,
        "JUPYTERHUB_SERVICE_PREFIX": prefix,
        "JUPYTERHUB_SERVICE_URL": f"http://{ip}:{port}",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": prefix + "oauth_callback",
        "JUPYTERHUB_OAUTH_ACCESS_SCOPES": access,
        "JUPYTERHUB_OAUTH_SCOPES": access,
        # Ask the hub for the user's groups too: the gate decides TA or instructor from them.
        "JUPYTERHUB_OAUTH_CLIENT_ALLOWED_SCOPES": json.dumps(["read:users:groups!user"]),
        "JUPYTERHUB_DEFAULT_URL": "/formgrader",
        # Grader-side nbgrader and server settings (jupyter_config/grader/), incl. the exchange plug-in.
        "JUPYTER_CONFIG_PATH": str(settings().grader_config_dir or HUB_DIR / "grader"),
    }


def command(course_dir: str, ip: str, port: int) -> list[str]:
    return [str(Path(sys.executable).parent / "jupyterhub-singleuser"), f"--ServerApp.ip={ip}",
            f"--port={port}", f"--ServerApp.root_dir={course_dir}"] + (["--allow-root"] if os.geteuid() == 0 else [])


def wait_for_hub_api(url: str, timeout: float = HUB_API_WAIT_SECONDS) -> None:
    """Return once the hub's API answers at ``url``: the container or pod that runs the formgrader starts
    beside the hub rather than after it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP error: the hub answered
                return
        if time.monotonic() >= deadline:
            raise SystemExit(f"formgrader service: the hub's API at {url} did not answer within {timeout:.0f} s")
        time.sleep(0.5)


def main() -> None:
    configured = settings_or_exit("formgrader service")
    if not configured.formgrader_api_token:
        raise SystemExit("formgrader service: FORMGRADER_API_TOKEN is not set (the hub's token for this service)")
    ip, port, course_dir = configured.formgrader_ip, configured.formgrader_port, str(configured.course_dir or "/srv/course")
    env = dict(os.environ, **service_env(
        course=configured.nbgrader_course_id, api_token=configured.formgrader_api_token,
        hub_api_url=configured.hub_api_url, ip=ip, port=port))
    wait_for_hub_api(configured.hub_api_url)
    os.chdir(course_dir)
    cmd = command(course_dir, ip, port)
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
