"""Registries by name: a new layer, pooling, loss, metric or model is one decorated class.

In the manner of TVM MetaSchedule's ``FeatureExtractor.create(kind)``: each kind of
piece has a `Registry`, classes add themselves with a decorator, and the CLIs choose
them by the name given on the command line::

    @register_propagation("gcn")
    class GCNLayer(nn.Module): ...

    PROPAGATIONS.get("gcn")   # -> GCNLayer; an unknown name raises UnknownNameError
"""
from __future__ import annotations

import sys
from typing import Callable, Dict, Generic, List, Optional, Sequence, TypeVar

T = TypeVar("T")


class SimulatorError(Exception):
    """An error with a one-line message for the user (bad path, name, checkpoint…).

    The CLIs print it as ``error: <message>`` and exit non-zero, without a traceback.
    """


class UnknownNameError(SimulatorError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: Dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = item
            try:
                item.registered_name = name  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass
            return item
        return add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})") from None

    def names(self) -> List[str]:
        return list(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items


def run_cli(run: Callable[[Optional[Sequence[str]]], object], argv: Optional[Sequence[str]] = None,
            interrupted_hint: str = "") -> int:
    """A CLI's main: user errors are one line on stderr and exit code 2, not a traceback."""
    try:
        run(argv)
    except SimulatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted" + (f"; {interrupted_hint}" if interrupted_hint else ""), file=sys.stderr)
        return 130
    return 0
