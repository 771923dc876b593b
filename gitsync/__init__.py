"""gitsync: keeps MyApp resources on Kubernetes exactly as Git says."""

__version__ = "0.2.0"
