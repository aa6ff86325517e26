"""Deadlines: each assignment's late policy, each student's extensions, and where a student stands."""
