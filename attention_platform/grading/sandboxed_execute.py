"""``SandboxedExecute``: nbgrader's execute step, with student code in a sandbox.

Wired in ``nbgrader_config.py`` in place of ``nbgrader.preprocessors.Execute`` in
``c.Autograde.autograde_preprocessors``, so ``nbgrader autograde``, the
formgrader's autograde button and ``attention-course autograde-batch`` all grade
through ``attention_platform.grading.sandbox.grading.grade_notebook``: student cells and
probes run in a fresh confined process tree per submission, every check's verdict
is decided by a judge in this (trusted) process, and check cells get the same
output shapes the in-kernel ``grader_tests.kernel.grade`` produces, so
``SanitizeCheckOutputs``, ``SaveAutoGrades`` and feedback work unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Integer, Unicode, default

from attention_platform.grading.sandbox.client import SandboxLimits
from attention_platform.settings import settings


class SandboxedExecute(NbGraderPreprocessor):
    """Execute a submission in a sandbox and judge its hidden checks outside it."""

    cell_timeout = Float(
        help="Wall-clock seconds a student cell (or one check's probe) may run before the sandbox is killed.",
    ).tag(config=True)
    notebook_timeout = Float(
        help="Wall-clock seconds for a whole submission, all cells and probes together.",
    ).tag(config=True)
    cpu_seconds = Integer(120, help="RLIMIT_CPU (seconds of CPU) of every process in the sandbox.").tag(config=True)
    memory_mb = Integer(1024, help="Memory cgroup limit of the sandbox, in MB.").tag(config=True)
    address_space_mb = Integer(
        4096, help="RLIMIT_AS of sandbox processes, in MB (torch maps several hundred MB by itself).").tag(config=True)
    nproc = Integer(32, help="Most processes and threads a sandbox may have (pids cgroup and RLIMIT_NPROC).").tag(config=True)
    fsize_mb = Integer(16, help="Largest file a sandbox may write, in MB (RLIMIT_FSIZE).").tag(config=True)
    tmpfs_mb = Integer(32, help="Size of the sandbox's /tmp, /dev/shm and working directory, in MB each.").tag(config=True)
    output_chars = Integer(100_000, help="Most characters of output kept per cell; the rest is truncated.").tag(config=True)
    images_per_cell = Integer(8, help="Most matplotlib figures kept per cell, as PNG.").tag(config=True)
    image_bytes = Integer(500_000, help="Largest PNG figure kept, in bytes; a bigger one becomes a note.").tag(config=True)
    secret_seed = Unicode(
        help="If set, each check's inputs and weights are drawn from a seed derived from this secret instead of "
             "Check.default_seed() (grades then differ from the stock in-kernel path only by the inputs drawn).",
    ).tag(config=True)

    @default("cell_timeout")
    def _cell_timeout_from_settings(self):
        return float(settings().nbgrader_cell_timeout)

    @default("notebook_timeout")
    def _notebook_timeout_from_settings(self):
        return settings().attention_notebook_timeout

    @default("secret_seed")
    def _secret_seed_from_settings(self):
        return settings().attention_secret_seed

    def limits(self) -> SandboxLimits:
        return SandboxLimits(
            cell_timeout=self.cell_timeout, notebook_timeout=self.notebook_timeout, cpu_seconds=self.cpu_seconds,
            memory_mb=self.memory_mb, address_space_mb=self.address_space_mb, nproc=self.nproc,
            fsize_mb=self.fsize_mb, tmpfs_mb=self.tmpfs_mb, output_chars=self.output_chars,
            images_per_cell=self.images_per_cell, image_bytes=self.image_bytes,
        )

    def preprocess(self, nb, resources):
        from attention_platform.grading.sandbox.grading import grade_notebook, seed_function, submission_files

        from nbgrader.coursedir import CourseDirectory

        from attention_platform.course import variants
        from attention_platform.grading import progress

        metadata = resources.get("metadata", {})
        name = resources.get("unique_key") or metadata.get("name", "submission")
        who = resources.get("nbgrader", {})
        folder = metadata.get("path", "")
        total = len([f for f in os.listdir(folder) if f.endswith(".ipynb")]) if folder and os.path.isdir(folder) else 1
        assignment, student = str(who.get("assignment", "")), str(who.get("student", ""))
        progress.started(assignment, student, str(name), total)
        course = CourseDirectory(config=self.config).root
        variants.write_cells(nb, course, assignment, student, str(who.get("notebook", "")))
        seed_for = variants.seeds_for(course, assignment, student, seed_function(self.secret_seed))
        result = grade_notebook(nb, limits=self.limits(), seed_for=seed_for,
                                filename=os.path.basename(str(metadata.get("name", "submission"))) + ".ipynb",
                                extra_files=submission_files(metadata.get("path", ""), str(name)))
        progress.finished(assignment, student)
        passed = sum(1 for c in result.checks.values() if c.passed)
        self.log.info("Sandboxed grading of %s: %d/%d checks passed, %.2f s%s", name, passed, len(result.checks),
                      result.seconds, f" (stopped: {result.stopped})" if result.stopped else "")
        return nb, resources


def start_sandbox_early(assignment=None, **_hook_args) -> None:
    """Start the sandbox zygote (or reach the broker) without waiting for it, from
    ``Autograde.pre_convert_hook`` (run in the course's root): its warm-up (importing torch, and the
    first uses ``assignment``'s notebooks need: a first optimizer step, a first figure; seconds of
    CPU with both) then runs while nbgrader copies and sanitises the submission instead of after.
    A process that grades several assignments (the formgrader) asks for each one's first uses as
    it comes. A sandbox that cannot start is reported by the first notebook's grading."""
    from attention_platform.grading.sandbox import first_use
    from attention_platform.grading.sandbox.client import SandboxUnavailable, get_zygote

    needed = first_use.needed_by_assignment(Path.cwd(), str(assignment)) if assignment else first_use.ALL
    try:
        get_zygote(needed).warm(needed)
    except SandboxUnavailable:
        pass
