"""A student's attempts, read by every side: the instructor's terms (policy), every attempt graded on
submit (ledger), and what a student may see of them (status)."""
