"""The student's own Jupyter server: the course's Lab (its server side and extensions), Validate's
client of the validate service, feedback on submit's reading side, the server's body limits."""
