"""I/O with Git: a checkout of exactly one commit (``checkout``), repository URLs
and their redaction (``giturl``), the remote and branch of a local checkout
(``localcheckout``), the private cache directory (``cache``), loading and
validating the manifests of a checkout (``manifests``, with the private ``_files`` and
``_yaml``), and ``git blame`` at the revision a MyApp was applied from (``gitblame``).

May import engine, model and errors; never kube, nor anything above.
"""
