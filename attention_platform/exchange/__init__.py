"""nbgrader's pluggable exchange, per student: the student's all-or-nothing submit and views, the
grader's release, collect and feedback, and the folder layout the hub creates."""
