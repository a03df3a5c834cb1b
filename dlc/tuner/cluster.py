"""Measurement on a Dask distributed cluster: `local:N` starts a `LocalCluster` of N
worker processes (one thread each) here; anything else is a scheduler address to
connect to. Each candidate is one `measure` task, which itself runs the candidate in a
fresh process with a timeout, so a crashing candidate takes down neither a Dask
worker nor the tuner. Workers on other machines need this dlc installed and the
tuner's working directory (the reference outputs) on a shared file system."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dlc.tuner.measure import Job, Result, measure
from dlc.tuner.runner import Measurer

CONNECT_SECONDS = 10.0  # how long to try to reach a scheduler address


@contextlib.contextmanager
def measurer_for(cluster: str | None) -> Iterator[Measurer | None]:
    """A measurer on the named cluster for the duration of the block (None: none)."""
    if cluster is None:
        yield None
        return
    from dask.distributed import Client, LocalCluster

    if cluster.startswith("local:"):
        count = cluster.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"cluster: expected local:N with N >= 1, got {cluster!r}")
        with (
            LocalCluster(
                n_workers=int(count),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as local,
            Client(local) as client,
        ):
            yield _on(client)
        return
    try:
        client = Client(cluster, timeout=CONNECT_SECONDS)
    except (OSError, ValueError, TimeoutError) as err:
        raise ValueError(f"cluster: cannot connect to {cluster!r}: {err}") from None
    with client:
        yield _on(client)


def _on(client: object) -> Measurer:
    def run(jobs: list[Job]) -> list[Result]:
        futures = client.map(measure, jobs, pure=False)  # type: ignore[attr-defined]
        return list(client.gather(futures))  # type: ignore[attr-defined]

    return run
