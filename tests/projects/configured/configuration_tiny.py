class TinyConfig:
    attribute_map = {"hidden_size": "d_model"}

    def __init__(self, vocab_size=100, d_model=64, d_ff=256, max_positions=32, **kwargs):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.d_ff = d_ff
        self.max_positions = max_positions
