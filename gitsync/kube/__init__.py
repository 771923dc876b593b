"""I/O with the Kubernetes API server: the JSON client and API paths (``client``),
where the server is and how to reach it (``kubeconfig``), list+watch caches
(``informer``), Lease leader election (``leader``), Events (``events``), server-side
apply of MyApps, Deployments and MyApp status (``apply``), and waiting out 429s
(``throttle``).

May import engine, model and errors; never source, nor anything above.
"""
