"""The hub process: the native launcher, accounts and sign-up, LTI launches, login throttling, the
hub's request limits, the supervised services, the spawner."""
