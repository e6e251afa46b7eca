"""The record base of Serve's configs and config-file schemas. Ray defines them as pydantic
models; Tessera has no pydantic dependency, so this base gives the parts Serve relies on:

  - fields declared as class attributes `name = Field(default, check=...)`;
  - `Model(**fields)` checks each given value once (a one-line TypeError for a wrong type, a
    ValueError for a bad value, both naming the field), then the model's cross-field `_check`;
    an unknown field is a TypeError (or ignored where the model is forward compatible, as Ray's
    config-file models are);
  - `dict(exclude_unset=...)` (alias `model_dump`), equality by value, `copy()`, `parse_obj`;
  - assignment checks the new value the same way and leaves the model as it was when it fails.

The `check_*` helpers return checks for common field types, worded like pydantic's messages
("max_replicas: ensure this value is greater than 0").

Threading: a model is a plain value; do not mutate one from two threads. Cost: one check call
per given field.
"""

from __future__ import annotations

import copy
import enum
from typing import Any, Callable, ClassVar, Dict, Iterable, Optional, Set


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

Check = Callable[[str, Any], Any]


class Field:
    """A model field: its default (or a factory for defaults read at construction, such as
    environment variables) and the check that validates and normalizes a given value."""

    __slots__ = ("default", "factory", "check")

    def __init__(self, default: Any = None, *, factory: Optional[Callable[[], Any]] = None,
                 check: Optional[Check] = None) -> None:
        self.default = default
        self.factory = factory
        self.check = check

    def initial(self, model: str, name: str) -> Any:
        if self.factory is not None:
            return self.factory()
        if self.default is REQUIRED:
            raise ValueError(f"{name}: field required ({model})")
        if isinstance(self.default, (list, dict, set)):
            return copy.copy(self.default)  # each model its own
        return self.default


class Model:
    """Base of Serve's validated records (see the module doc)."""

    _fields: ClassVar[Dict[str, Field]] = {}
    _ignore_extra: ClassVar[bool] = False  # True: unknown fields are dropped (forward compatible)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: Dict[str, Field] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "_fields", {}))
        for name, value in list(vars(cls).items()):
            if isinstance(value, Field):
                fields[name] = value
                delattr(cls, name)
        # Fields made from a table (a model whose fields mirror another list of names).
        fields.update(vars(cls).get("_table_fields", {}))
        cls._fields = fields

    def __init__(self, **kwargs: Any) -> None:
        name = type(self).__name__
        unknown = [key for key in kwargs if key not in self._fields]
        if unknown and not self._ignore_extra:
            raise TypeError(f"{name} got an unexpected keyword argument '{unknown[0]}'")
        given = {key: value for key, value in kwargs.items() if key in self._fields}
        object.__setattr__(self, "_fields_set", set(given))
        for field_name, spec in self._fields.items():
            if field_name in given:
                value = given[field_name]
                if spec.check is not None:
                    value = spec.check(field_name, value)
            else:
                value = spec.initial(name, field_name)
            object.__setattr__(self, field_name, value)
        self._check()

    def _check(self) -> None:
        """Cross-field checks and normalization, after every field is set."""

    def __setattr__(self, name: str, value: Any) -> None:
        spec = self._fields.get(name)
        if spec is None:
            raise AttributeError(f"{type(self).__name__} has no field '{name}'")
        if spec.check is not None:
            value = spec.check(name, value)
        old = self.__dict__[name]
        object.__setattr__(self, name, value)
        try:
            self._check()
        except Exception:
            object.__setattr__(self, name, old)
            raise
        self._fields_set.add(name)

    @property
    def fields_set(self) -> Set[str]:
        """The fields given at construction or assigned since (pydantic's __fields_set__)."""
        return set(self._fields_set)

    def dict(self, exclude_unset: bool = False) -> Dict[str, Any]:
        """{field: value}, nested models as dicts; only the given fields with exclude_unset."""
        names: Iterable[str] = self._fields
        if exclude_unset:
            names = [name for name in self._fields if name in self._fields_set]
        return {name: _plain(getattr(self, name), exclude_unset) for name in names}

    model_dump = dict

    def copy(self) -> "Model":
        clone = object.__new__(type(self))
        object.__setattr__(clone, "_fields_set", set(self._fields_set))
        for name in self._fields:
            object.__setattr__(clone, name, copy.deepcopy(getattr(self, name)))
        return clone

    @classmethod
    def parse_obj(cls, obj: Any) -> "Model":
        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, dict):
            raise TypeError(f"{cls.__name__} must be given a dict, got {type(obj).__name__}")
        return cls(**obj)

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other.dict() == self.dict()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"


def _plain(value: Any, exclude_unset: bool) -> Any:
    if isinstance(value, Model):
        return value.dict(exclude_unset=exclude_unset)
    if isinstance(value, list):
        return [_plain(item, exclude_unset) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, exclude_unset) for key, item in value.items()}
    return value


def json_ready(value: Any) -> Any:
    """`value` with models as dicts and enums as their values: what json.dumps takes."""
    value = _plain(value, exclude_unset=False)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [json_ready(item) for item in value]
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# Checks of common field types. Each returns a Check: (field name, value) -> normalized value.


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bound_error(name: str, value: Any, minimum: Optional[float], exclusive: bool,
                 maximum: Optional[float]) -> Optional[str]:
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        relation = "greater than" if exclusive else "greater than or equal to"
        return f"{name}: ensure this value is {relation} {minimum}, got {value!r}"
    if maximum is not None and value > maximum:
        return f"{name}: ensure this value is less than or equal to {maximum}, got {value!r}"
    return None


def check_int(minimum: Optional[int] = None, *, exclusive: bool = False,
              maximum: Optional[int] = None, optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not _is_int(value):
            raise TypeError(f"{name}: value is not a valid integer, got {value!r}")
        error = _bound_error(name, value, minimum, exclusive, maximum)
        if error:
            raise ValueError(error)
        return value

    return check


def check_float(minimum: Optional[float] = None, *, exclusive: bool = False,
                maximum: Optional[float] = None, optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}: value is not a valid float, got {value!r}")
        error = _bound_error(name, value, minimum, exclusive, maximum)
        if error:
            raise ValueError(error)
        return float(value)

    return check


def check_str(optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise TypeError(f"{name}: str type expected, got {value!r}")
        return value

    return check


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: value is not a valid boolean, got {value!r}")
    return value


def check_dict(optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise TypeError(f"{name}: value is not a valid dict, got {value!r}")
        return dict(value)

    return check


def check_str_list(name: str, value: Any) -> list:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name}: value is not a valid list of str, got {value!r}")
    return list(value)


def check_enum(kind: type, optional: bool = False) -> Check:
    """A member of the str enum `kind`, given as the member or its value."""

    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"{name}: value is not one of {[m.value for m in kind]}, got "
                             f"{value!r}") from None

    return check


def check_model(kind: type, optional: bool = False) -> Check:
    """A `kind` model, given as one or as a dict of its fields."""

    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, kind):
            return value
        if isinstance(value, dict):
            return kind(**value)
        raise TypeError(f"{name}: expected a {kind.__name__} or a dict, got "
                        f"{type(value).__name__}")

    return check
