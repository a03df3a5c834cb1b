"""Where candidates are measured: `local:N` runs N measurements at a time on this
machine; anything else is the address of a Dask distributed scheduler.

`local:N` opens no socket: N threads each wait on one `measure` call, which runs the
candidate in a fresh worker process of its own (stdin/stdout pipes, JSON, a timeout),
so a crashing candidate takes down neither a thread nor the tuner, and no other user
or process on the machine can reach the workers (a Dask `LocalCluster` listened on
127.0.0.1 without authentication, and any local user could run code in its workers).

A scheduler address is for machines of one's own: Dask runs whatever its clients send,
so a cluster must be reachable by its users only. Use `tls://` addresses with Dask's
TLS security (certificates in the Dask configuration, `distributed.comm.tls.*`, with
`distributed.comm.require-encryption: true`); a plain `tcp://` address is a warning.
Workers on other machines need this dlc installed and the tuner's working directory
(the reference outputs) on a shared file system.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from dlc.tuner.measure import Job, Result, measure
from dlc.tuner.runner import Measurer

if TYPE_CHECKING:
    from dask.distributed import Client

CONNECT_SECONDS = 10.0  # how long to try to reach a scheduler address


@contextlib.contextmanager
def measurer_for(cluster: str | None) -> Iterator[Measurer | None]:
    """A measurer on the named cluster for the duration of the block (None: none)."""
    if cluster is None:
        yield None
        return
    if cluster.startswith("local:"):
        count = cluster.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"cluster: expected local:N with N >= 1, got {cluster!r}")
        with ThreadPoolExecutor(max_workers=int(count), thread_name_prefix="dlc-tune") as pool:
            yield _local(pool)
        return
    from dask.distributed import Client

    if not cluster.startswith("tls://"):
        warnings.warn(
            f"cluster {cluster!r} is not a tls:// address: its scheduler and workers run "
            "code for anyone who can connect (see dlc/tuner/cluster.py)",
            stacklevel=3,
        )
    try:
        client = Client(cluster, timeout=CONNECT_SECONDS)
    except (OSError, ValueError, TimeoutError) as err:
        raise ValueError(f"cluster: cannot connect to {cluster!r}: {err}") from None
    with client:
        yield _on(client)


def _local(pool: ThreadPoolExecutor) -> Measurer:
    def run(jobs: list[Job]) -> list[Result]:
        return list(pool.map(measure, jobs))

    return run


def _on(client: Client) -> Measurer:
    def run(jobs: list[Job]) -> list[Result]:
        futures = client.map(measure, jobs, pure=False)
        return list(client.gather(futures))

    return run
