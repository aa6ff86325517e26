"""The JupyterHub side: native launcher, exchange plug-ins, submit, formgrader service, login."""
