class TinyConfig:
    attribute_map = {"hidden_size": "d_model"}

    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        d_ff=256,
        max_positions=32,
        feed_forward_proj="gated-relu",
        n_inner=None,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.d_ff = d_ff
        self.max_positions = max_positions
        # attributes computed from the defaults, as T5Config computes its activation
        self.n_inner = n_inner if n_inner is not None else 2 * d_model
        act_info = feed_forward_proj.split("-")
        self.dense_act_fn = act_info[-1]
        self.is_gated_act = act_info[0] == "gated"
        if len(act_info) > 2:
            raise ValueError(feed_forward_proj)
