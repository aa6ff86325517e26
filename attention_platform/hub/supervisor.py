"""The native launcher's services: a memory cap each, and started again when one exits.

The sandbox broker, the validate service, the formgrader and the feedback-on-submit grader read
what students send (notebooks, probe replies, Validate requests). Whatever one student makes such
a service allocate must cost that service, never the machine, the hub or the other services;
and a service that dies must come back without stopping the hub and every student's server.

* :class:`ServiceCgroups`: each service in ``attention-services-<hub>/<service>`` (memory and pids
  cgroups beside the users' servers' ``attention-servers-<hub>``, the sandboxes' code in
  attention_platform/grading/sandbox/cgroups.py), its cap ``HUB_<SERVICE>_MEMORY_MB``. The
  broker's cgroup holds its sandboxes too (theirs are nested in it), so its cap bounds them all.
* :class:`Supervisor`: polled by the launcher's loop; a service that exited is started again,
  after a pause that doubles while it keeps dying within a minute of its start.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from attention_platform.grading.sandbox import cgroups
from attention_platform.settings import Settings, settings

PARENT = "attention-services"
# Each service's default cap is its HUB_<SERVICE>_MEMORY_MB setting's (attention_platform/settings.py).
# The broker's cap is its sandboxes' too (each capped by its own limits): three quarters of the
# machine's memory, the rest kept for the hub and users' servers.
BROKER_SHARE_OF_MEMORY = 0.75
PIDS_MAX = 65536  # the broker's sandboxes have caps of their own; this only stops a runaway fork
STABLE_SECONDS = 60.0  # a service that ran this long before it exited is started again at once
MAX_PAUSE_SECONDS = 30.0


SERVICES = ("broker", "validate", "formgrader", "feedback-on-submit", "lms-sync")  # the launcher's, by cgroup


def memory_mb(service: str, environ=None) -> int:
    """The memory cap of ``service``: ``HUB_<SERVICE>_MEMORY_MB`` (``-`` as ``_``) or its default;
    SettingsError (a ValueError) naming the variable if it is no whole number of at least 64."""
    configured = settings() if environ is None else Settings.from_environ(environ)
    return configured.memory_mb(service) or int(_machine_mb() * BROKER_SHARE_OF_MEMORY)


def _machine_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        return int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) >> 10


def services_parent(state_dir: str | os.PathLike) -> str:
    """``attention-services-<hub>``: this hub's services' folder (cgroups.of_hub says why one per hub)."""
    return cgroups.of_hub(PARENT, state_dir)


class ServiceCgroups:
    """Moves each service's process into its own capped cgroup (as root; elsewhere nothing is capped)."""

    def __init__(self, log=print, environ=None, parent: str = PARENT):
        self.log = log
        self.environ = environ
        self.groups: cgroups.Cgroups | None = None
        if os.geteuid() != 0:
            return
        try:
            configured = settings() if environ is None else Settings.from_environ(environ)
            self.groups = cgroups.setup(str(configured.attention_cgroup_root), parent=parent)
        except cgroups.CgroupUnavailable as exc:
            log(f"the hub's services run without a memory cap of their own: {exc}")

    def contain(self, service: str, process: subprocess.Popen) -> None:
        """Put ``process`` (just started: it has not forked yet) into the cgroup of ``service``."""
        if self.groups is None:
            return
        try:
            self.groups.create(service, memory_mb(service, self.environ) << 20, PIDS_MAX)
            self.empty(service)
            self.groups.join(service, process.pid)
        except ProcessLookupError:
            pass  # it exited at once: the supervisor sees it
        except OSError as exc:
            self.log(f"the {service} runs without its memory cap: its cgroup cannot be set ({exc.strerror})")

    def empty(self, service: str) -> None:
        """Kill what an earlier process of ``service`` left in its cgroup (a killed grader's page
        workers, a dead broker's sandboxes): nothing outlives the process it belonged to, nor counts
        against the cap of the one started next."""
        if self.groups is None:
            return
        for _ in range(100):
            if not self.groups.kill(service):
                return
            time.sleep(0.02)

    def folders(self, service: str) -> list[str]:
        return self.groups.dirs(service) if self.groups else []


@dataclass
class Supervised:
    name: str
    process: Callable[[], subprocess.Popen | None]  # the service's current process
    start: Callable[[], subprocess.Popen]  # starts it again (and records the new process)
    started_at: float = field(default_factory=time.monotonic)
    pause: float = 0.0
    restart_at: float | None = None


class Supervisor:
    """Starts again every service that exited; :meth:`poll` is called by the launcher's loop."""

    def __init__(self, services: list[Supervised], log=print):
        self.services = services
        self.log = log
        self.restarts = 0

    def poll(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for service in self.services:
            process = service.process()
            if service.restart_at is None:
                if process is None or process.poll() is None:
                    continue
                lived = now - service.started_at
                service.pause = 0.0 if lived >= STABLE_SECONDS else min(MAX_PAUSE_SECONDS, max(1.0, 2 * service.pause))
                service.restart_at = now + service.pause
                self.log(f"the {service.name} exited with status {process.returncode} after {lived:.0f} s; "
                         f"it starts again in {service.pause:.0f} s (the hub and every other service carry on)")
            if now >= service.restart_at:
                service.restart_at = None
                service.started_at = now
                try:
                    service.start()
                except Exception as exc:  # noqa: BLE001 - tried again after a pause, like a crash
                    service.pause = min(MAX_PAUSE_SECONDS, max(1.0, 2 * service.pause))
                    service.restart_at = now + service.pause
                    self.log(f"the {service.name} could not be started again ({exc}); next try in {service.pause:.0f} s")
                    continue
                self.restarts += 1
                self.log(f"the {service.name} started again")
