"""``gitsync run``, the long-running process: the operator, the scheduled sync and
leader election together (``daemon``); one HTTP port (``httpserver`` over the pure
``httpproto``) for probes, ``/metrics`` (``metrics``), push webhooks (``webhook``) and the
read-only drift page (``ui`` serving ``page``); drift notifications (``notification``
decides and formats, ``notify`` delivers).

May import gitops, reconcile, kube, source, engine, model and errors; never cli.
"""
