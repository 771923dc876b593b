"""The MyApp operator: informer events feed one de-duplicating work queue
(``workqueue``); workers hold one lock per key (``keylock``) and run the level-based,
idempotent reconcile of ``controller``, which brings each object to its desired state
through ``converge``.

May import kube, source, engine, model and errors; never gitops, daemon or cli.
"""
