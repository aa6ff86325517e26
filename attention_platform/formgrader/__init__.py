"""The formgrader service: its gate (who may ask what), the course's pages and templates in front of
nbgrader's, and feedback on submit's page for TAs and instructors."""
