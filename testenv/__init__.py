"""The local Kubernetes control plane used by gitsync's tests, demo and benchmark."""
