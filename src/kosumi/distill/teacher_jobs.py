"""Where a labelling or self-play job's teacher runs: here, in spawned processes, or on Ray.

``TeacherJobs.open(teacher, sizes=..., ...)`` checks the options, records the teacher's
identity (file name, format, SHA-256 of the file, symmetries), opens the teacher once in this
process to check that it plays every board size asked for, and keeps it open only when this
process runs the units itself (``workers=1``, no ``ray``). ``jobs.run(units, job_of, work,
commit)`` then calls ``work(teacher, job_of(unit))`` for every unit and ``commit(unit,
result)`` in unit order, wherever the work runs:

- in this process (``workers=1``);
- in ``workers`` spawned processes, each with its own teacher (at most two units in flight per
  process, so memory stays bounded);
- on Ray actors (``ray``: "local", "auto" or a head's address; ``distill.cluster``).

Because results are committed in unit order, a folder written one way is byte-identical to one
written another way. ``work`` must be a module-level function (it is pickled).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kosumi.distill.shards import sha256_file
from kosumi.errors import KosumiError
from kosumi.runtime.evaluator import CachedEvaluator, Evaluator


def open_teacher(path: str | os.PathLike, symmetries: int = 1, threads: int = 1,
                 backend: str = "auto", device: str | None = None) -> Evaluator:
    """Open a teacher model file (any format ``kosumi.runtime`` reads, on any backend),
    without a cache."""
    from kosumi.runtime.teacher import load_teacher

    return load_teacher(path, symmetries=symmetries, threads=threads, cache=False,
                        backend=backend, device=device)


def teacher_identity(path: str | os.PathLike, symmetries: int = 1) -> dict[str, Any]:
    """The identity recorded with labels: file name, format, SHA-256 of the file, symmetries."""
    from kosumi.models import resolve_model
    from kosumi.runtime.loader import detect_format

    path = resolve_model(path)
    return {"name": path.name, "format": detect_format(path).name,
            "sha256": sha256_file(path), "symmetries": int(symmetries)}


def uncached(evaluator: Evaluator) -> Evaluator:
    """The evaluator under any ``CachedEvaluator`` layers."""
    while isinstance(evaluator, CachedEvaluator):
        evaluator = evaluator.inner
    return evaluator


def backend_of(evaluator: Evaluator) -> str:
    """The name of the backend under an evaluator ("" for a network-free one)."""
    return str(getattr(getattr(uncached(evaluator), "backend", None), "name", ""))


def check_workers(workers: int | None, ray: str | None) -> int | None:
    """``workers`` as a job runs it: None (the cluster's CPUs) only with ``ray``."""
    if workers is None and ray is None:
        return 1
    if workers is not None and workers < 1:
        raise KosumiError(f"--workers must be at least 1, not {workers}")
    return workers


@dataclass
class TeacherJobs:
    """A teacher and where its units run (see the module docstring)."""

    teacher: str | os.PathLike | Evaluator
    identity: dict[str, Any]
    symmetries: int
    threads: int
    backend: str
    device: str | None
    workers: int | None
    ray: str | None
    evaluator: Evaluator | None  # open in this process when it runs the units itself
    owned: bool  # this object opened ``evaluator`` and closes it
    backend_label: str  # what the statistics report as the teacher's backend

    @classmethod
    def open(cls, teacher: str | os.PathLike | Evaluator, *, sizes: Iterable[int], where: str,
             caller: str, symmetries: int = 1, threads: int = 1, backend: str = "auto",
             device: str | None = None, workers: int | None = 1, ray: str | None = None,
             teacher_info: dict[str, Any] | None = None) -> TeacherJobs:
        """Check the options and the teacher (``where`` starts the error for a board size the
        teacher does not play; ``caller`` names the function for a misuse). ``teacher`` is a
        model file (a model set: its net for ``sizes``), or an Evaluator (then ``teacher_info``
        gives its identity, and ``workers`` must be 1 with no ``ray``)."""
        workers = check_workers(workers, ray)
        is_path = not isinstance(teacher, Evaluator)
        sizes = list(sizes)
        if not isinstance(teacher, Evaluator):
            from kosumi.models import resolve_model_for_sizes

            teacher = resolve_model_for_sizes(teacher, sizes)  # a model set: the size's net
            identity = teacher_identity(teacher, symmetries)
            # on Ray the driver only checks the teacher (on its own CPU); the actors run it
            evaluator = open_teacher(teacher, symmetries, threads,
                                     backend="auto" if ray else backend,
                                     device=None if ray else device)
        else:
            if workers != 1 or ray is not None:
                raise ValueError(f"{caller}: an Evaluator object needs workers=1, no ray")
            evaluator = teacher
            identity = dict(teacher_info or {"name": evaluator.name, "format": "evaluator",
                                             "sha256": None, "symmetries": int(symmetries)})
        jobs = cls(teacher, identity, int(symmetries), threads, backend, device, workers, ray,
                   evaluator, is_path,
                   f"Ray actors, --backend {backend}" if ray else backend_of(evaluator))
        try:
            for size in sizes:
                if not evaluator.supports_size(size):
                    raise KosumiError(f"{where}: the teacher {identity.get('name')} does not "
                                      f"play {size}x{size}")
        except BaseException:
            jobs.close()
            raise
        if not jobs.in_process:
            jobs.close()  # the workers open their own
        return jobs

    @property
    def in_process(self) -> bool:
        """True when this process runs the units (on ``self.evaluator``)."""
        return self.workers == 1 and self.ray is None

    def run(self, units: Sequence[Any], job_of: Callable[[Any], Any],
            work: Callable[[Evaluator, Any], Any], commit: Callable[[Any, Any], None], *,
            local: Callable[[Evaluator, Any], Any] | None = None,
            on_workers: Callable[[int, int], None] | None = None) -> None:
        """``commit(unit, work(teacher, job_of(unit)))`` for every unit, in unit order.
        ``local`` replaces ``work`` in this process (e.g. to report progress per batch);
        ``on_workers(alive, total)`` follows the Ray actors."""
        if not units:
            return
        if self.ray is not None:
            assert not isinstance(self.teacher, Evaluator)  # open() allows Ray for files only
            run_teacher_units(
                self.ray, units, job_of, work, commit, teacher=self.teacher,
                symmetries=self.symmetries, threads=self.threads, backend=self.backend,
                device=self.device, workers=self.workers,
                teacher_sha256=self.identity.get("sha256"), on_workers=on_workers)
        elif self.in_process:
            assert self.evaluator is not None
            for u in units:
                commit(u, (local or work)(self.evaluator, job_of(u)))
        else:
            self._run_pool(units, job_of, work, commit)

    def _run_pool(self, units: Sequence[Any], job_of: Callable[[Any], Any],
                  work: Callable[[Evaluator, Any], Any],
                  commit: Callable[[Any, Any], None]) -> None:
        import multiprocessing as mp
        from collections import deque

        assert self.workers is not None
        args = (str(self.teacher), self.symmetries, self.threads, self.backend, self.device)
        ctx = mp.get_context("spawn")
        with ctx.Pool(self.workers, initializer=_pool_init, initargs=args) as pool:
            pending: deque[tuple[Any, Any]] = deque()
            queue = list(units)
            while queue or pending:
                while queue and len(pending) < 2 * self.workers:
                    u = queue.pop(0)
                    pending.append((u, pool.apply_async(_pool_work, (work, job_of(u)))))
                u, result = pending.popleft()
                commit(u, result.get())

    def close(self) -> None:
        """Close the teacher if this object opened it (idempotent)."""
        if self.owned and self.evaluator is not None:
            self.evaluator.close()
        self.evaluator = None

    def __enter__(self) -> TeacherJobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- spawned workers
_POOL: dict[str, Evaluator] = {}


def _pool_init(teacher_path: str, symmetries: int, threads: int, backend: str,
               device: str | None) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the pool
    _POOL["teacher"] = open_teacher(teacher_path, symmetries, threads, backend, device)


def _pool_work(work: Callable[[Evaluator, Any], Any], job: Any) -> Any:
    return work(_POOL["teacher"], job)


__all__ = ["TeacherJobs", "backend_of", "check_workers", "open_teacher", "teacher_identity",
           "uncached"]


def _actor_device(device: str | None) -> tuple[str | None, float]:
    """(the device an actor opens its teacher on, the GPUs it asks Ray for): a CUDA device is
    the actor's own GPU, which Ray shows it as ``cuda:0``."""
    if device is not None and device.startswith("cuda"):
        return "cuda", 1.0
    return device, 0.0


def run_teacher_units(address: str, units: Sequence[Any], payload_of: Callable[[Any], Any],
                      work: Callable[[Any, Any], Any], commit: Callable[[Any, Any], None], *,
                      teacher: str | os.PathLike[str], symmetries: int, threads: int, backend: str,
                      device: str | None, workers: int | None, teacher_sha256: str | None,
                      on_workers: Callable[[int, int], None] | None = None) -> None:
    """``distill.cluster.run_in_order`` with a teacher as each actor's state: the model file
    (``default`` and ``tiny`` resolved) opened with the one-door options, its SHA-256 checked
    on every worker, a CUDA device one GPU per actor."""
    from kosumi.distill.cluster import run_in_order
    from kosumi.models import resolve_model

    file = str(resolve_model(teacher))
    on, gpus = _actor_device(device)
    run_in_order(address, units, payload_of, open_teacher,
                 (file, symmetries, threads, backend, on), work, commit, workers=workers,
                 threads=threads, gpus=gpus, teacher_file=file, teacher_sha256=teacher_sha256,
                 on_workers=on_workers)
