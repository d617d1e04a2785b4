"""A layer made from its name: a star import, tables of classes, `str.lower()` and `in`."""

from typing import Optional

from .activations import *

_has_hardsigmoid = "hardsigmoid" in dir(torch.nn.functional)

_LAYERS_DEFAULT = dict(
    relu=nn.ReLU,
    sigmoid=Sigmoid,
    hard_sigmoid=nn.Hardsigmoid if _has_hardsigmoid else HardSigmoid,
    identity=nn.Identity,
)
_LAYERS_EXPORTABLE = dict(hard_sigmoid=HardSigmoid)

for table in (_LAYERS_DEFAULT, _LAYERS_EXPORTABLE):
    table.setdefault("hardsigmoid", table.get("hard_sigmoid"))

_EXPORTABLE = False


def is_exportable():
    return _EXPORTABLE


def get_layer(name: Optional[str] = "relu"):
    if name is None:
        return None
    if not isinstance(name, str):
        return name
    name = name.lower()
    if not is_exportable():
        if name in _LAYERS_EXPORTABLE:
            return _LAYERS_EXPORTABLE[name]
    return _LAYERS_DEFAULT[name]


def create_layer(name, **kwargs):
    layer = get_layer(name)
    if layer is None:
        return None
    return layer(**kwargs)
