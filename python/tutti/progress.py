"""Progress of long calls, reported to a Python callable (``TuttiProgressCallback``).

Every workload function takes ``progress=``: a callable that receives one :class:`Progress`
per step (the FMM's phases, SCF and fit iterations, the sweep's sites). It runs on the
library's reporting thread, with the GIL held, between the steps it reports; keep it quick.

An exception the callable raises cannot stop the computation (the library has no way to be
interrupted there): later reports are dropped, and the exception is raised, as itself, when
the call returns, in place of its result.
"""

from __future__ import annotations

import ctypes
from typing import Callable, NamedTuple, Optional

__all__ = ["Progress"]


class Progress(NamedTuple):
    """One report: ``done`` of ``total`` steps of ``stage`` of ``task``.

    ``task`` is ``"fmm"``, ``"scf"``, ``"fit"`` or ``"sweep"``; ``stage`` the step just
    finished (``"far field"``, ``"iteration"``) or the sweep's pass; ``total`` is 0 when
    unknown (for iterations it is the iteration limit); ``value`` the figure the stage tracks
    (the SCF energy in hartree, the fit's cost), or ``None``.
    """

    task: str
    stage: str
    done: int
    total: int
    value: Optional[float]


class _CProgress(ctypes.Structure):
    _fields_ = [
        ("task", ctypes.c_char_p),
        ("stage", ctypes.c_char_p),
        ("done", ctypes.c_uint64),
        ("total", ctypes.c_uint64),
        ("value", ctypes.c_double),
        ("has_value", ctypes.c_int),
    ]


_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_CProgress))


class _CProgressCallback(ctypes.Structure):
    _fields_ = [("report", _PROGRESS_FN), ("user_data", ctypes.c_void_p)]


class _ProgressHook:
    """A callable's C face for one call: put :attr:`c` in the options, keep the hook alive
    until the call returns, then call :meth:`raise_pending`."""

    def __init__(self, progress: Callable[[Progress], object] | None, function: str):
        self.raised: list[BaseException] = []
        if progress is None:
            self.c = _CProgressCallback()
            self._fn = None
            return
        if not callable(progress):
            from ._lib import Status, TuttiError

            raise TuttiError(
                Status.ERROR_INVALID_ARGUMENT,
                f"{function}: `progress` must be callable, got {type(progress).__name__}",
            )

        def trampoline(_user, report):
            if self.raised:
                return
            try:
                p = report.contents
                progress(
                    Progress(
                        task=p.task.decode("utf-8", errors="replace"),
                        stage=p.stage.decode("utf-8", errors="replace"),
                        done=int(p.done),
                        total=int(p.total),
                        value=float(p.value) if p.has_value else None,
                    )
                )
            except BaseException as error:  # noqa: BLE001 - raised when the call returns
                self.raised.append(error)

        self._fn = _PROGRESS_FN(trampoline)  # alive as long as the hook
        self.c = _CProgressCallback(self._fn, None)

    def raise_pending(self) -> None:
        """Raises the first exception of the callable, if it raised."""
        if self.raised:
            raise self.raised[0]
