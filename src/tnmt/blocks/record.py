"""What the blocks tell a recorder while they run: the code reports, nobody spies.

A view of the model's inside (`tnmt inspect`) needs what flows through each sub-layer. Rather than hooks that
wrap modules from outside (and so see only the calls that go through `Module.__call__`, never a decoder step's),
the bodies report it themselves when bound with a recorder (`Transformer.incremental_decoder(record=...)`,
`Transformer.encode_for_decoding(record=...)`): one call per sub-layer, nothing computed again. Unbound, they
report nothing and pay one `is None` check.

A recorder is called as `record(*where, **tensors)`:

    record("encoder", 0, "input", x=...)                    the stack's input: embeddings + positions (N * T, D)
    record("decoder", 2, "cross-attention", stream=..., read=..., update=..., out=...)
                                                            add & norm around a sub-layer, each (N * T, D)
    record("decoder", 2, "hidden units", hidden=...)         the feed-forward network's activations (N * T, F)

Sub-layers: "self-attention" (encoder), "masked self-attention" and "cross-attention" (decoder), "feed-forward".
"""

from typing import Protocol

from torch import Tensor


class Recorder(Protocol):
    def __call__(self, *where: str | int, **tensors: Tensor) -> None: ...
