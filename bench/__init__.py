"""Benchmarks of gitsync against the local control plane (``make bench``)."""
