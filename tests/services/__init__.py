"""Real servers started by test fixtures: S3 endpoints (moto, SeaweedFS), an OCI registry.

Each starts on 127.0.0.1 on free ports, in a folder of its own, and is stopped by PID at the
end of the test session. A server that cannot be found or started skips its tests on a
developer machine and fails them in CI (`CI=true`), where the test setup installs it.
"""
