"""nbgrader settings of the course's formgrader service (JUPYTER_CONFIG_PATH).

The course directory's own nbgrader_config.py is loaded as well (it lies in the
server's working directory); this file adds only what the hub deployment changes.
"""

from attention_platform.settings import settings_or_exit

c = get_config()  # noqa: F821
SETTINGS = settings_or_exit("grader's nbgrader_config.py")  # a wrong setting stops the formgrader, named

# The whole exchange: the grader sees every student's inbound and feedback folder.
c.Exchange.root = str(SETTINGS.nbgrader_exchange_root)
# Per-student exchange layout (nbgrader #1225, #1885): see attention_platform/exchange/exchange.py.
c.ExchangeFactory.release_assignment = "attention_platform.exchange.exchange.PerStudentReleaseAssignment"
c.ExchangeFactory.collect = "attention_platform.exchange.exchange.PerStudentCollect"
c.ExchangeFactory.release_feedback = "attention_platform.exchange.exchange.PerStudentReleaseFeedback"
c.ExchangeFactory.list = "attention_platform.exchange.exchange.PerStudentList"
# In containers every file belongs to jovyan; identity is the student's folder instead.
c.ExchangeCollect.check_owner = SETTINGS.nbgrader_check_owner
# What collect copies from one submission and what one student may keep in the exchange (bytes per
# file and submission, entries, depth, kept submissions): c.ExchangeLimits.<name>, see
# attention_platform/exchange/submit.py. How far a submission's claimed time may lie before the
# kernel's record of it: c.PerStudentCollect.claim_tolerance (seconds).
