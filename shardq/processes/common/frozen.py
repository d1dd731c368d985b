"""`Frozen`: a frozen, slotted, keyword-only record whose class body reads as a frozen
dataclass's (annotated fields, defaults given in the body), without building one.

The settings of the roles (`settings.py`) are made in the supervisor before its first
fork, so their classes are built at every start: as dataclasses (frozen, keyword-only,
inherited) they cost ≈ 15 ms of CPU (their methods are generated as source and compiled),
and `dataclasses` imports `inspect`, `ast`, `dis` and `tokenize` (docs/BENCHMARKS.md,
"Start-up"). Here a metaclass turns the annotations into ``__slots__`` and
``__match_args__`` (inherited fields first) and the body's values into `DEFAULTS`; one
`__init__`, `replace` and `Record`'s equality, hash and repr serve every class.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from shardq.protocol.record import Record

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

    def __init__(self, **values: Any) -> None:
        for name in self.__match_args__:
            if name in values:
                value = values.pop(name)
            elif name in self.DEFAULTS:
                value = self.DEFAULTS[name]
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
