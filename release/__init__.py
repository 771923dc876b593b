"""Release tooling: the OLM bundle generated from deploy/ and crds/ (``make bundle``)."""
