"""The LMS's services (LTI 1.3 Advantage): service tokens, grades (AGS), the roster (NRPS) and the outbox
of scores; run by the grader's passback worker (``attention-course lms-sync``), never by a hub request."""
