"""Writing an assignment: scaffolding a new one (``new-assignment``) and proving its hidden checks
against the answers that prove them (``prove-checks``). The guide is
docs/instructors/writing-an-assignment.md."""
