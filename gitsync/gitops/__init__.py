"""One pass of the GitOps loop (``sync``): fetch, load, apply the MyApps and their
Deployments through the operator's reconcile, the guarded prune (planned by
``engine.changeset``, carried out here), the namespaces a pass needs (``namespaces``), a
failed pass in one line (``failures``), the MyApps of files that no longer load
(``unloaded``), the commit each new revision must descend
from (``lineage``), and the pass's record in a ConfigMap and Events
(``sync_state``).

May import reconcile, kube, source, engine, model and errors; never daemon or cli.
"""
