"""Work units on a Ray cluster: ``kosumi label --ray`` and ``kosumi selfplay --ray``.

The jobs cut their work into the same units as on one machine (a label chunk keyed by its
positions shard's hash; a self-play game keyed by its seed and number). ``run_in_order`` hands
them to Ray actors, each holding one teacher loaded once (with the job's backend, device and
threads), and gives the results back to the driver *in unit order*, which writes them through
the job's own atomic, resumable store: a folder made on a cluster is byte for byte the folder
one process makes, and a driver killed mid-run resumes from the folder as always. Only the
driver reads positions and writes files; workers need the teacher file at the same path
(shared storage, or the same copy on every node), which each checks by its SHA-256.

Faults: an actor whose process dies (kill -9, a lost node) is restarted by Ray, on another node
if need be, and its units in flight are run again there (``max_restarts``,
``max_task_retries``); a unit whose actor is gone for good goes to another actor. Nothing is
written twice: results are committed once, in order, by the driver. A teacher that fails to
load on a worker, a worker with another kosumi version or a teacher file whose hash differs
stops the run with one line naming the worker.

``address``: ``local`` starts a Ray instance for this run (with the CPUs the workers need, or
all of this machine's when no number of workers is given), ``auto``
joins the cluster that ``ray start`` made on this node, anything else is a head's address
(``HOST:PORT`` or ``ray://HOST:PORT``). Ray is the optional ``cluster`` extra.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kosumi.errors import KosumiError

EXTRA = "pip install 'kosumi[cluster]'"
IN_FLIGHT = 2  # units per actor at a time: results stream back, memory stays bounded
RESTARTS = 3  # per actor


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise KosumiError(f"--ray needs Ray, which is not installed: {EXTRA}") from None
    return ray


@contextmanager
def connect(address: str, cpus: int | None = None) -> Iterator[Any]:
    """Ray, initialised for ``address`` (see the module docstring), shut down afterwards;
    ``cpus``: what a ``local`` instance offers (None: every CPU of this machine)."""
    ray = _ray()
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
    if address == "local":
        kwargs["num_cpus"] = cpus
    else:
        if address != "auto":
            _probe(address)
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise KosumiError(f"--ray {address}: cannot reach the Ray cluster ({first})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail fast (Ray itself retries for minutes) when nothing listens at HOST:PORT."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise KosumiError(f"--ray {address}: not an address (local, auto, HOST:PORT or "
                          "ray://HOST:PORT)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise KosumiError(f"--ray {address}: cannot reach the Ray cluster (nothing answers at "
                          f"{hostport}: {e.strerror or e})") from None


class TeacherActor:
    """One actor: a teacher (or any state) made once by ``init(*args)``, then ``work(state,
    unit)`` per unit. ``ready`` makes the state and says who the actor is."""

    def __init__(self, init: Callable[..., Any], args: tuple, check_file: str | None) -> None:
        self._init, self._args, self._check_file = init, args, check_file
        self._state: Any = None

    def _made(self) -> Any:
        if self._state is None:
            self._state = self._init(*self._args)
        return self._state

    def ready(self) -> dict[str, Any]:

        import kosumi

        where = f"{socket.gethostname()}:{os.getpid()}"
        info: dict[str, Any] = {"worker": where, "version": kosumi.__version__}
        try:
            if self._check_file is not None:
                from kosumi.distill.shards import sha256_file

                info["sha256"] = sha256_file(self._check_file)
            self._made()
        except KosumiError as e:
            info["error"] = str(e)
        except OSError as e:
            info["error"] = f"{self._check_file}: cannot read ({e.strerror or e})"
        return info

    def run(self, work: Callable[[Any, Any], Any], unit: Any) -> Any:
        return work(self._made(), unit)


def run_in_order(address: str, units: Sequence[Any], payload_of: Callable[[Any], Any],
                 init: Callable[..., Any], init_args: tuple, work: Callable[[Any, Any], Any],
                 commit: Callable[[Any, Any], None], *, workers: int | None = None,
                 threads: int = 1, gpus: float = 0, teacher_file: str | None = None,
                 teacher_sha256: str | None = None,
                 on_workers: Callable[[int, int], None] | None = None) -> None:
    """Run ``work(state, payload_of(unit))`` for every unit on Ray actors (``state`` =
    ``init(*init_args)``, made once per actor) and call ``commit(unit, result)`` in unit order.
    ``workers``: actors (default: the cluster's CPUs // ``threads``, or its GPUs // ``gpus``);
    each asks Ray for ``threads`` CPUs and ``gpus`` GPUs (Ray then makes its GPU the actor's
    ``cuda:0``); ``on_workers(alive, total)`` hears how many actors answer."""
    import kosumi

    with connect(address, None if workers is None else workers * max(1, threads)) as ray:
        have = ray.cluster_resources()
        if gpus and have.get("GPU", 0) < gpus:
            raise KosumiError(f"--ray {address}: the cluster has no GPU for a CUDA device "
                              f"(its resources: {int(have.get('CPU', 0))} CPUs, 0 GPUs)")
        if workers is None:
            workers = max(1, int(have.get("CPU", 1)) // max(1, threads))
            if gpus:
                workers = max(1, min(workers, int(have.get("GPU", 0) // gpus)))
        actor = ray.remote(num_cpus=threads, num_gpus=gpus, max_restarts=RESTARTS,
                           max_task_retries=RESTARTS)(TeacherActor)
        actors = [actor.remote(init, init_args, teacher_file) for _ in range(workers)]
        infos = _ready(ray, actors)
        for info in infos:
            where = f"worker {info.get('worker')}"
            if info.get("error"):
                raise KosumiError(f"{where}: {info['error']}")
            if info.get("version") != kosumi.__version__:
                raise KosumiError(f"{where}: kosumi {info.get('version')}, but the driver runs "
                                  f"{kosumi.__version__} (install the same kosumi on every "
                                  "node)")
            if teacher_sha256 and info.get("sha256") not in (None, teacher_sha256):
                raise KosumiError(f"{where}: {teacher_file} is another file there (SHA-256 "
                                  f"{str(info.get('sha256'))[:16]}..., the driver's is "
                                  f"{teacher_sha256[:16]}...)")
        alive = list(range(len(actors)))
        if on_workers:
            on_workers(len(alive), len(actors))
        pending: deque = deque()  # (unit, actor index, ref) in unit order
        queue = deque(units)
        turn = 0
        while queue or pending:
            while queue and len(pending) < IN_FLIGHT * len(alive):
                u = queue.popleft()
                k = alive[turn % len(alive)]
                turn += 1
                pending.append((u, k, actors[k].run.remote(work, payload_of(u))))
            u, k, ref = pending.popleft()
            result = _result(ray, ref)
            while result is _LOST:  # the actor is gone for good: another one runs the unit
                if k in alive:
                    alive.remove(k)
                if on_workers:
                    on_workers(len(alive), len(actors))
                if not alive:
                    raise KosumiError(f"--ray {address}: every worker died (each was restarted "
                                      f"{RESTARTS} times); the finished units are saved: run "
                                      "the command again to resume")
                k = alive[turn % len(alive)]
                turn += 1
                result = _result(ray, actors[k].run.remote(work, payload_of(u)))
            commit(u, result)


_LOST = object()


def _ready(ray: Any, actors: list[Any]) -> list[dict[str, Any]]:
    try:
        return ray.get([a.ready.remote() for a in actors])
    except ray.exceptions.RayError as e:
        raise KosumiError(f"--ray: a worker failed to start ({_cause(e)})") from None


def _result(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayActorError:
        return _LOST
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, KosumiError):
            raise KosumiError(str(cause)) from None
        raise KosumiError(f"--ray: a unit failed on a worker ({_cause(e)})") from None


def _cause(e: BaseException) -> str:
    cause = getattr(e, "cause", None) or e
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__
