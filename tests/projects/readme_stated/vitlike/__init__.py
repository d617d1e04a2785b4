from .model import Mixer, ReAttention

__all__ = ["Mixer", "ReAttention"]
