"""transformers' key/value caches (`transformers.cache_utils`) as a table, not as code.

`DynamicCache` and the other cache classes keep their layers in lists filled at run time,
so reading their code tells nothing. What the caches that concatenate promise is small:
`cache.update(key_states, value_states, layer_idx, cache_kwargs)` returns the keys and
values to attend to, shaped as the inputs except along the sequence axis (-2), which holds
the past too (`torch.cat` along it, which fails unless every other size agrees); their
dtype may be the past's. A static cache (`StaticCache` and its kin) returns its own
buffers, written by an assignment that broadcasts in some releases and on some devices, so
what its `update` returns stays unknown, as does that of a cache of a class not known.
`get_seq_length()` is an int nobody can know. `EncoderDecoderCache(self_cache,
cross_cache)` keeps the two caches, read back as `.self_attention_cache` and
`.cross_attention_cache`. A cache that paths of different classes met at (`CachesV`)
answers what all of them answer, and `isinstance` splits it again in its two branches.

A cache class is recognised where it is imported from transformers' `cache_utils`
(`from transformers.cache_utils import DynamicCache`, `from ...cache_utils import
DynamicCache` inside transformers) or from the package's top level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mimir.host.values import UNKNOWN, CachesV, CacheV, IntV, MethodV, TensorV, TupleV, join_all

MODULE = "transformers.cache_utils"
# every class whose instances are caches; the first group derives from `Cache` alone in
# every release, so an instance of one is an instance of no other class here
# (`QuantizedCache` derived from `DynamicCache` in some)
DIRECT = frozenset({"DynamicCache", "StaticCache", "EncoderDecoderCache"})
CLASSES = DIRECT | {
    "Cache",
    "QuantizedCache",
    "OffloadedCache",
    "OffloadedStaticCache",
    "SlidingWindowCache",
    "HybridCache",
    "HybridChunkedCache",
    "OffloadedHybridCache",
    "QuantoQuantizedCache",
    "HQQQuantizedCache",
}
# the caches whose `update` concatenates the past and the new states along axis -2
_CONCATENATING = frozenset(
    {
        "DynamicCache",
        "OffloadedCache",
        "QuantizedCache",
        "QuantoQuantizedCache",
        "HQQQuantizedCache",
    }
)
_METHODS = frozenset({"update", "get_seq_length"})
_BUILDERS = ("from_legacy_cache",)  # `DynamicCache.from_legacy_cache(past)`: one of its kind


def imported(module: str | None, level: int, name: str, path: Path | None) -> str | None:
    """The table's name for `from module import name` (`path`: the file it resolves to),
    None when it is no cache class of transformers."""
    if name not in CLASSES:
        return None
    if level == 0 and module in (MODULE, "transformers"):
        return f"{MODULE}.{name}"
    if path is not None and path.parts[-2:] == ("transformers", "cache_utils.py"):
        return f"{MODULE}.{name}"
    return None


def call(name: str, args: list) -> Any:
    """`DynamicCache(...)`, `DynamicCache.from_legacy_cache(...)`: a cache of that class.
    `EncoderDecoderCache(self_cache, cross_cache)` keeps the two caches it is given;
    with none it makes two `DynamicCache`s."""
    parts = name.removeprefix(MODULE + ".").split(".")
    if parts[0] not in CLASSES or parts[0] == "Cache" or len(parts) > 2:
        return UNKNOWN
    if len(parts) == 2 and parts[1] not in _BUILDERS:
        return UNKNOWN
    if parts == ["EncoderDecoderCache"]:
        if not args:
            return CacheV(parts[0], (CacheV("DynamicCache"), CacheV("DynamicCache")))
        if len(args) == 2:
            caches = tuple(a if isinstance(a, (CacheV, CachesV)) else UNKNOWN for a in args)
            return CacheV(parts[0], caches)
    return CacheV(parts[0])


# an `EncoderDecoderCache`'s attributes that are the caches it holds
_PARTS = {"self_attention_cache": 0, "cross_attention_cache": 1}


def attribute(cache: CacheV | CachesV, attr: str) -> Any:
    """`cache.update` is a method the table knows, as are the caches an
    `EncoderDecoderCache` holds; any other attribute is unknown. Of a cache of one of
    several classes: what every one of them says."""
    if isinstance(cache, CachesV):
        found = [attribute(c, attr) for c in cache.options]
        if all(isinstance(f, MethodV) for f in found):
            return MethodV(cache, attr)
        return join_all(found)
    if attr in _METHODS:
        return MethodV(cache, attr)
    if cache.kind == "EncoderDecoderCache" and attr in _PARTS and cache.parts:
        return cache.parts[_PARTS[attr]]
    return UNKNOWN


def method(cache: CacheV | CachesV, name: str, args: list, kwargs: dict) -> Any:
    if isinstance(cache, CachesV):
        return join_all([method(c, name, args, kwargs) for c in cache.options])
    if name == "get_seq_length":
        return IntV(None)
    if name != "update" or cache.kind not in _CONCATENATING:
        return UNKNOWN
    keys = args[0] if args else kwargs.get("key_states", UNKNOWN)
    values = args[1] if len(args) > 1 else kwargs.get("value_states", UNKNOWN)
    return TupleV((_with_past(keys), _with_past(values)))


def _with_past(t: Any) -> Any:
    """A tensor with the past added along axis -2: that size unknown, the others kept."""
    if not isinstance(t, TensorV) or t.shape is None or len(t.shape) < 2:
        return TensorV(None, None, t.lib) if isinstance(t, TensorV) else UNKNOWN
    return TensorV((*t.shape[:-2], None, t.shape[-1]), None, t.lib)


def is_instance(cache: CacheV | CachesV, name: str) -> bool | None:
    """`isinstance(cache, cls)` for a class of the table (None: another class, or a
    cache of several classes they answer differently for)."""
    if isinstance(cache, CachesV):
        answers = {is_instance(c, name) for c in cache.options}
        return answers.pop() if len(answers) == 1 else None
    if not name.startswith(MODULE + "."):
        return None
    cls = name.removeprefix(MODULE + ".")
    if cls in (cache.kind, "Cache"):
        return True
    if cls in CLASSES and cache.kind in DIRECT:
        return False
    return None
