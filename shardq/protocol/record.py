"""`Record`: the equality, hash and repr of a dataclass for plain slotted classes (the
commands, a tube's policy); `Frozen`: a frozen, slotted, keyword-only record whose class
body reads as a frozen dataclass's (annotated fields, defaults given in the body), without
building one (the config, each process role's settings).

What is built at every start of the server is better not a dataclass: importing
`dataclasses` (with `inspect`, `ast`, `dis`, `tokenize`: ≈ 8 ms) and building each
dataclass's methods from source (≈ 0.5 ms a class; the 26 commands: ≈ 12 ms) come before
its first answer (docs/BENCHMARKS.md, "Start-up"). For `Frozen`, a metaclass turns the
annotations into ``__slots__`` and ``__match_args__`` (inherited fields first) and the
body's values into `DEFAULTS`; one `__init__`, `replace` and `Record`'s equality, hash and
repr serve every class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar


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


F = TypeVar("F", bound="Frozen")


def is_class_var(note: object) -> bool:
    """An annotation that names a class attribute, not a field (``ClassVar[...]``; the
    annotations are strings here, `from __future__ import annotations`)."""
    return str(note).startswith(("ClassVar", "typing.ClassVar"))


class FrozenMeta(type):
    """Makes each annotated name of a class body a slot and a field (after its bases'), and
    the value the body gives it, if any, its default."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> FrozenMeta:
        notes = namespace.get("__annotations__", {})
        own = tuple(field for field, note in notes.items() if not is_class_var(note))
        defaults: dict[str, object] = {}
        inherited: tuple[str, ...] = ()
        for base in bases:
            defaults.update(getattr(base, "DEFAULTS", {}))
            inherited += getattr(base, "__match_args__", ())
        for field in own:
            if field in namespace:
                defaults[field] = namespace.pop(field)
        namespace["__slots__"] = own
        namespace["DEFAULTS"] = defaults
        namespace["__match_args__"] = inherited + own
        return super().__new__(mcls, name, bases, namespace)


class Frozen(Record, metaclass=FrozenMeta):
    """A frozen record made by keyword (`replace` makes a changed copy)."""

    #: field -> its default, for the fields that have one (set by `FrozenMeta`)
    DEFAULTS: ClassVar[dict[str, object]] = {}
    #: field -> what makes its default when a record is made without it (a default that
    #: depends on the machine: the config's shard count); set after the class body
    FACTORIES: ClassVar[dict[str, Callable[[], object]]] = {}

    def __init__(self, **values: Any) -> None:
        for name in self.__match_args__:
            if name in values:
                value = values.pop(name)
            elif name in self.DEFAULTS:
                value = self.DEFAULTS[name]
            elif name in self.FACTORIES:
                value = self.FACTORIES[name]()
            else:
                raise TypeError(f"{type(self).__name__}() needs {name}=")
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__}() has no field {next(iter(values))!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def replace(self: F, **changes: Any) -> F:
        """A copy with `changes` (as dataclasses.replace)."""
        values = {name: getattr(self, name) for name in self.__match_args__}
        values.update(changes)
        return type(self)(**values)
