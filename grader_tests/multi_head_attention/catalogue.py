"""What the multi-head attention assignment grades: every hidden check and written answer, one
``Part`` per notebook in the order students work through them (types in ``grader_tests.catalogue``).
Pure data, never sent into a sandbox."""

from __future__ import annotations

from grader_tests.catalogue import HiddenCheck, Part, WrittenAnswer

LAYER_NOTEBOOK = "multi_head_attention"
QUESTIONS_NOTEBOOK = "02_heads_explained"


def _check(id: str, title: str, points: int, misconception: str, public: bool = False) -> HiddenCheck:
    return HiddenCheck(id, LAYER_NOTEBOOK, title, points, misconception, public)


def _written(grade_id: str, question: str, points: int) -> WrittenAnswer:
    return WrittenAnswer(grade_id, QUESTIONS_NOTEBOOK, question, points)


LAYER = Part(LAYER_NOTEBOOK, 1, "the `MultiHeadSelfAttention` layer", (
    _check("mh_shapes", "Shapes are right for any B, T, D and H dividing D: heads (B, H, T, D/H), weights (B, H, T, T).",
           1, "wrong shapes with heads", public=True),
    _check("mh_split_order", "Splitting cuts each token's vector into H consecutive pieces, then moves the head axis "
                             "forward.", 2, "split by a bare reshape (heads mix tokens)"),
    _check("mh_merge_order", "Merging undoes the split: the head axis goes back behind the tokens before the join.", 2,
           "merged by a bare reshape"),
    _check("mh_head_scale", "Each head divides its scores by √(D/H), the square root of its own size, not by √D.", 2,
           "scale by √D instead of √d_head"),
    _check("mh_softmax_dim", "In every head, each query's weights sum to 1 over the keys (softmax over dim=-1).", 1,
           "softmax over the heads or the queries", public=True),
    _check("mh_mask_every_head", "With causal=True every head sees itself and earlier tokens, never later ones.", 2,
           "mask not broadcast over the heads"),
    _check("mh_causal_flag", "With causal=False no head is masked: a token also sees the tokens after it.", 1,
           "causal flag ignored"),
    _check("mh_heads_independent", "Each head attends with its own slice of q and k, not all of them or another "
                                   "head's.", 2, "heads share or mix their slices"),
    _check("mh_values_per_head", "Each head mixes its own slice of the values with the weights attention_weights "
                                 "returns.", 1, "values not split per head"),
    _check("mh_one_out_proj", "The output projection is applied once, after the merge: not per head, skipped or "
                              "repeated.", 2, "output projection per head, skipped or repeated"),
    _check("mh_one_head", "With one head (H = 1) the layer is the single-head attention of the first assignment.", 1,
           "breaks with one head (squeeze, special cases)"),
))

QUESTIONS = Part(QUESTIONS_NOTEBOOK, 2, "why √(D/H), and what heads cost", (
    _written("head_scale_answer", "why each head divides by √(D/H) and not by √D", 2),
    _written("head_cost_answer", "the parameters and the score computations of H heads against one head", 2),
))

PARTS: tuple[Part, ...] = (LAYER, QUESTIONS)
