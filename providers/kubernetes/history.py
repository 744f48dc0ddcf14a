"""Reading what a TrainingJob's runs left on Kubernetes: attempt logs and accounting.

Mixed into KubernetesJobs (providers/kubernetes/runs.py), whose ledger, Job, Workload and
pod reads it reuses; the request budget of each verb is in that module's docstring.

- `read_log`: the attempt's pod logs through the API while its pods exist (logs.py),
  else the archive trainform wrote to S3 at its next write; an attempt not started yet
  reads as empty and incomplete; one whose pods and archive are both gone is an error.
- `accounting(since)`: every run of this instance's namespaces with a training attempt
  not finished, or finished (else submitted) at or after `since`, with its project (the
  address's), queue (its latest attempt's) and pool (the ResourceFlavor Kueue admitted
  it on, as the pool's spec name).
"""

from __future__ import annotations

from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import AccountedRun, LogChunk, RunStatus
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.jobs import ledger_entries, ledger_name
from trainform.providers.kubernetes.kinds import CONFIG_MAP, JOB
from trainform.providers.kubernetes.logs import archive_location, chunk, pods_text, read_archive
from trainform.providers.kubernetes.naming import Naming, address_of
from trainform.providers.kubernetes.timeline import (
    JOB_NAME_LABEL,
    POD,
    attempt_status,
    later,
    pods_by_job,
)


class RunHistory:
    client: KubeClient
    naming: Naming
    _namespace_of: Any
    _store: Any
    _s3: Any
    _ledgers: Any
    _all_jobs: Any
    _live_reads: Any
    _statuses: Any
    _pool: Any

    # logs ------------------------------------------------------------------------------

    def read_log(
        self, address: str, run_id: str, attempt: int, offset: int = 0, suite: str | None = None
    ) -> LogChunk:
        namespace = self._namespace_of(address)
        what = f"{address} run {run_id} attempt {attempt}" + (f" ({suite})" if suite else "")
        ledger = self.client.get(CONFIG_MAP, ledger_name(address), namespace)
        entries = ledger_entries(ledger) if ledger and self.naming.owns(ledger, address) else []
        kind = "eval" if suite else "train"
        entry = next(
            (
                e
                for e in entries
                if e.get("runId") == run_id
                and int(e.get("attempt", 0)) == attempt
                and e.get("kind", "train") == kind
                and (suite is None or e.get("suite") == suite)
            ),
            None,
        )
        if entry is None:
            raise PermanentProviderError(
                f"cannot read the log of {what}: trainform submitted no such attempt "
                f"(`trainform status {address}` lists its runs and attempts)"
            )
        name = str(entry.get("job"))
        pods = pods_by_job(
            self.client.list(POD, f"{self.naming.selector},{JOB_NAME_LABEL}={name}", namespace)
        ).get(name, [])
        job = self.client.get(JOB, name, namespace)
        status = attempt_status(entry, job, None, pods)
        finished = status.phase.finished
        if pods:
            text = pods_text(self.client, pods, status.nodes, finished)
            return chunk(text, offset, finished, f"pods of Job {namespace}/{name}")
        archive = str(entry.get("logArchive") or "") or archive_location(entry)
        store = self._store()
        if archive and store is not None:
            text_or_none = read_archive(self._s3(), archive)
            if text_or_none is not None:
                return chunk(text_or_none, offset, True, archive)
        if not finished:
            return chunk("", offset, False, f"pods of Job {namespace}/{name} (not started)")
        where = (
            f"and its archive {archive} does not exist"
            if archive and store is not None
            else "and it was not archived (the run's checkpoint prefix is not on s3://)"
        )
        raise PermanentProviderError(
            f"cannot read the log of {what}: the pods of Job {namespace}/{name} are gone {where}"
        )

    # accounting ------------------------------------------------------------------------

    def accounting(self, since: str) -> list[AccountedRun]:
        ledgers = [  # this instance's namespaces only (several may share one cluster)
            ledger
            for ledger in self._ledgers()
            if self.naming.project_of(ledger["metadata"].get("namespace", "")) is not None
        ]
        jobs = self._all_jobs()
        workloads, pods = self._live_reads(ledgers, jobs, None)

        def counted(run: RunStatus) -> bool:
            return any(
                not attempt.phase.finished
                or not later(since, attempt.ended_at or attempt.submitted_at)
                for attempt in run.attempts
            )

        accounted = []
        for ledger in ledgers:
            address = str(address_of(ledger))
            namespace = ledger["metadata"].get("namespace", "")
            entries = ledger_entries(ledger)
            mine = {name: job for (ns, name), job in jobs.items() if ns == namespace}
            spaces = workloads.get(namespace, {})
            for run in self._statuses(
                entries, mine, spaces, pods_by_job(pods.get(namespace, [])), counted
            ):
                latest = run.latest
                pool = next(
                    (
                        str((e.get("final") or {}).get("pool") or "")
                        or self._pool(spaces.get(str(e.get("job"))))
                        for e in reversed(entries)
                        if e.get("runId") == run.run_id and e.get("kind") != "eval"
                    ),
                    "",
                )
                parts = address.split("/")
                project = parts[1] if len(parts) == 3 else self.naming.project_of(namespace)
                accounted.append(
                    AccountedRun(address, project, latest.queue if latest else "", run, pool)
                )
        return accounted
