"""The hidden checks of the second assignment, multi-head self-attention (``source/multi_head_attention``)."""
