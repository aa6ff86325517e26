"""The assignment as data: its notebooks, sample answers, and a course directory driven by nbgrader."""
