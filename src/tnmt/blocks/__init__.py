"""The Transformer's building blocks, one concept of the paper per module.

Shape legend used in every comment of this package:

    B   batch size                 S   source length        T   target length
    H   attention heads            Dh  head dimension       D   d_model (= H * Dh)
    F   feed-forward inner size    V   vocabulary size      Tq/Tk  query/key length

Mask convention (see masks.py): boolean, True = "may attend", broadcastable to (B, H, Tq, Tk).
"""
