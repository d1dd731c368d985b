"""`Record`: the equality, hash and repr of a dataclass for plain slotted classes (the
commands, a tube's policy).

What is built at every start of the server is better not a dataclass: importing
`dataclasses` (with `inspect`, `ast`, `dis`, `tokenize`: ≈ 8 ms) and building each
dataclass's methods from source (≈ 0.5 ms a class; the 26 commands: ≈ 12 ms) come before
its first answer (docs/BENCHMARKS.md, "Start-up").
"""

from __future__ import annotations

from typing import ClassVar


class Record:
    """What a slotted, hashable dataclass's generated methods gave: equality and a hash over
    the fields (``__match_args__``; only between objects of one class) and a repr that
    names them. A subclass lists its fields in ``__slots__`` and ``__match_args__`` and
    writes its ``__init__``."""

    __slots__ = ()
    #: the fields, in order (as a dataclass has it: `match` takes them positionally)
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        named = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{self.__class__.__qualname__}({named})"
