"""Knob spaces with AutoTVM's enumeration order, so config indices match AutoTVM logs.

A `ConfigSpace` is an ordered list of knobs. As in AutoTVM's `ConfigSpace`, the first
knob varies fastest in the flat index (mixed radix), a split knob enumerates its
factorisations depth-first over ascending factors, and a config is written to a log
as its `entity` list: ``[["tile_ic", "sp", [-1, 16]], ["unroll_kw", "ot", true]]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence


def factors(n: int) -> List[int]:
    """Ascending divisors of n."""
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Knob:
    """One tunable decision; `options` is its ordered list of values."""

    kind = ""

    def __init__(self, name: str, options: Sequence[Any]):
        if not options:
            raise ValueError(f"knob {name!r} has no options")
        self.name = name
        self.options = list(options)

    def __len__(self) -> int:
        return len(self.options)

    def index_of(self, value: Any) -> int:
        """The position of `value` among the options; a value of another JSON type is not
        an option (`true` is not 1, `1` is not `true`, `2.0` is not 2, `null` is nothing)."""
        for i, option in enumerate(self.options):
            if type(option) is type(value) and option == value:
                return i
        raise ValueError(f"knob {self.name!r}: value {value!r} is not in its space")


class SplitKnob(Knob):
    """Split a loop of `extent` into `num_outputs` nested loops (AutoTVM `define_split`).

    Values are lists like ``[-1, 4, 2]``: the outermost factor is implied (-1) and the
    others multiply to a divisor of the extent. Order follows AutoTVM's DFS.
    """

    kind = "sp"

    def __init__(self, name: str, extent: int, num_outputs: int,
                 keep: Optional[Callable[[List[int]], bool]] = None):
        self.extent = extent
        self.num_outputs = num_outputs
        candidates = factors(extent)
        options: List[List[int]] = []

        def dfs(depth: int, stack: List[int]) -> None:
            if depth == num_outputs - 1:
                if extent % math.prod(stack) == 0:
                    value = [-1] + stack[::-1]
                    if keep is None or keep(value):
                        options.append(value)
                return
            for f in candidates:
                if math.prod(stack) * f <= extent:
                    dfs(depth + 1, stack + [f])

        dfs(0, [])
        super().__init__(name, options)

    def index_of(self, value: Any) -> int:
        """The position of a split value: ``[-1, f2, …]``, or with the outer factor spelled
        out (older logs), whose factors must then multiply to the extent."""
        if not isinstance(value, (list, tuple)) or not all(_is_int(f) for f in value):
            raise ValueError(f"knob {self.name!r}: split {value!r} is not a list of integers")
        value = list(value)
        if len(value) != self.num_outputs:
            raise ValueError(f"knob {self.name!r}: split {value} has {len(value)} factors, "
                             f"not {self.num_outputs}")
        if value[0] != -1:  # some logs spell the outer factor out
            if math.prod(value) != self.extent:
                raise ValueError(f"knob {self.name!r}: split factors {value} multiply to "
                                 f"{math.prod(value)}, not the extent {self.extent}")
            value = [-1] + value[1:]
        for i, option in enumerate(self.options):
            if option == value:
                return i
        raise ValueError(f"knob {self.name!r}: value {value!r} is not in its space")

    def sizes(self, value: List[int]) -> List[int]:
        """The value with the implied outer factor filled in."""
        inner = math.prod(value[1:])
        return [self.extent // inner] + list(value[1:])


class OptionKnob(Knob):
    """A choice among fixed values (AutoTVM `define_knob`)."""

    kind = "ot"


@dataclass(frozen=True)
class Config:
    """One point of a space: its flat index and the value of every knob."""

    index: int
    values: Dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


class ConfigSpace:
    def __init__(self, knobs: Sequence[Knob]):
        self.knobs = list(knobs)
        self.by_name = {k.name: k for k in self.knobs}

    def __len__(self) -> int:
        return math.prod(len(k) for k in self.knobs)

    def get(self, index: int) -> Config:
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} outside space of size {len(self)}")
        values, rest = {}, index
        for knob in self.knobs:
            values[knob.name] = knob.options[rest % len(knob)]
            rest //= len(knob)
        return Config(index, values)

    def index_of(self, values: Dict[str, Any]) -> int:
        index, radix = 0, 1
        for knob in self.knobs:
            index += knob.index_of(values[knob.name]) * radix
            radix *= len(knob)
        return index

    def from_entity(self, entity: List[List[Any]], defaults: Optional[Dict[str, Any]] = None) -> Config:
        """Config from a log's entity list; knobs the log lacks take `defaults`."""
        if not isinstance(entity, (list, tuple)):
            raise ValueError(f"config entity {entity!r} is not a list")
        values = dict(defaults or {})
        given = set()
        for item in entity:
            if not isinstance(item, (list, tuple)) or len(item) != 3:
                raise ValueError(f"entity item {item!r} is not [name, kind, value]")
            name, kind, value = item
            if not isinstance(name, str) or name not in self.by_name:
                raise ValueError(f"knob {name!r} is not in this template's space "
                                 f"(knobs: {', '.join(self.by_name)})")
            if name in given:
                raise ValueError(f"knob {name!r} is given twice")
            knob = self.by_name[name]
            if knob.kind and kind != knob.kind:
                raise ValueError(f"knob {name!r} is of kind {knob.kind!r}, the entity says {kind!r}")
            given.add(name)
            values[name] = value
        missing = [k.name for k in self.knobs if k.name not in values]
        if missing:
            raise ValueError(f"entity lacks knobs {missing}")
        # normalise e.g. a spelled-out outer split factor, and check membership
        values = {k.name: k.options[k.index_of(values[k.name])] for k in self.knobs}
        return Config(self.index_of(values), values)

    def to_entity(self, config: Config) -> List[List[Any]]:
        return [[k.name, k.kind, config.values[k.name]] for k in self.knobs]
