"""Cython's pure-Python-mode decorators as no-ops, for the pure build.

A module the compiled build types (shardq/compiled.py) names the C types of its hot
functions' locals with ``@cython.locals(...)``, which Cython reads when it compiles the
module; the types of the classes they name are in the ``.pxd`` beside each module. Run as
Python, the module takes these no-ops instead of importing Cython (≈ 35 ms at start-up,
and not installed without the ``compile`` extra):

    if TYPE_CHECKING or __file__.endswith(".py"):
        from shardq.nocython import cython
    else:  # compiled: Cython reads the decorators (nothing is imported at run time)
        import cython
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class NoCython:
    """The part of Cython's `cython` module the typed modules use."""

    compiled = False  #: a branch under ``if not cython.compiled`` is the pure build's own
    #: C types named in ``locals``: plain ints, uncompiled
    long = longlong = ulonglong = Py_ssize_t = int
    p_char = bytes  #: a C pointer to bytes (`cast` names it): only compiled branches use it
    NULL = None  #: C's null pointer, as compiled branches pass it

    @staticmethod
    def cast(_type: object, value: Any) -> Any:
        """A C cast, reached only in branches the compiled build alone runs."""
        return value

    @staticmethod
    def declare(_type: object) -> Any:
        """A C variable, declared only in branches the compiled build alone runs."""
        return None

    @staticmethod
    def address(value: Any) -> Any:
        """A C pointer to a variable, taken only in branches the compiled build alone runs."""
        return value

    @staticmethod
    def cdivision(_on: bool) -> Callable[[F], F]:
        """C's division (no zero or sign checks) in a function: nothing, uncompiled."""
        return _unchanged

    @staticmethod
    def boundscheck(_on: bool) -> Callable[[F], F]:
        """Index checks in a function (off: the caller keeps indices in range): nothing,
        uncompiled."""
        return _unchanged

    @staticmethod
    def wraparound(_on: bool) -> Callable[[F], F]:
        """Negative indices from the end (off: none is used): nothing, uncompiled."""
        return _unchanged

    @staticmethod
    def locals(**_types: object) -> Callable[[F], F]:
        """The types of a function's locals: nothing, uncompiled."""
        return _unchanged


def _unchanged(function: F) -> F:
    return function


cython = NoCython()
