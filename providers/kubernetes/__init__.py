"""The kubernetes provider: Kueue (v1beta2) admission and batch/v1 Jobs through the
official client, written with server-side apply. See docs/kubernetes.md."""
