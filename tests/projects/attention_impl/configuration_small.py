from transformers.configuration_utils import PretrainedConfig


class SmallConfig(PretrainedConfig):
    """Leaves the attention implementation open, as transformers' configurations do."""

    def __init__(self, hidden_size=64, num_heads=4, **kwargs):
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        super().__init__(**kwargs)
