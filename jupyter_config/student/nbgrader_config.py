"""nbgrader settings of a student's (or TA's own) single-user server.

The hub points JUPYTER_CONFIG_PATH here. The student runs stock nbgrader against
their own view of the exchange: the released files (read-only) and an inbound and
a feedback folder that belong to them alone (see attention_platform/exchange/exchange.py).
"""

import os

from attention_platform.settings import settings_or_exit  # the student image carries it

c = get_config()  # noqa: F821
SETTINGS = settings_or_exit("student's nbgrader_config.py")  # a wrong setting stops the server, named

# The course this deployment serves; the hub sets it.
c.CourseDirectory.course_id = SETTINGS.nbgrader_course_id
# Who submits: the hub account name, not the Unix user (every container is jovyan).
c.CourseDirectory.student_id = os.environ.get("JUPYTERHUB_USER", "*")
# This student's view of the exchange (a bind mount in Docker, symlinks natively).
c.Exchange.root = str(SETTINGS.nbgrader_exchange_root)
# Fetched assignments go to ~/<assignment>, not ~/<course>/<assignment>.
c.Exchange.path_includes_course = False
# All-or-nothing submit, so a deadline rush loses nothing: a submission appears in the inbound complete or not at all,
# a retry of an identical submission files nothing new, and a full/read-only exchange says so.
# It also checks the course's limits (c.ExchangeLimits, attention_platform/exchange/submit.py)
# before copying and removes the student's own oldest submissions beyond the kept number.
c.ExchangeFactory.submit = "attention_platform.exchange.submit.AtomicSubmit"
# Natively the view is root's and read-only for the student (so that root never follows what a
# student can replace); stock nbgrader would refuse an exchange root it cannot write to.
c.ExchangeFactory.fetch_assignment = "attention_platform.exchange.submit.ViewFetchAssignment"
c.ExchangeFactory.fetch_feedback = "attention_platform.exchange.submit.ViewFetchFeedback"
c.ExchangeFactory.list = "attention_platform.exchange.submit.ViewList"
# Validate runs the notebook in a kernel. nbclient's default 4 s wait for a cell's last IOPub
# message failed half of a 50-student deadline rush on 2 cores ("Timeout waiting for IOPub
# output" on `import torch`); a loaded machine needs longer. Per-cell timeout as in grading.
c.Execute.iopub_timeout = 60
c.Execute.timeout = 120
# Validate's kernel talks to the server over Unix sockets, not TCP ports: in a 50-student rush two
# kernels started at the same moment picked the same port ("Address already in use") and one
# Validate failed. A short, fresh path per Validate (AF_UNIX paths are limited to 107 bytes).
import uuid  # noqa: E402

c.KernelManager.transport = "ipc"
c.KernelManager.ip = "/tmp/nbgrader-validate-" + uuid.uuid4().hex[:16]
