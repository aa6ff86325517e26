"""What the multi-head attention assignment grades: every hidden check and written answer, one
``Part`` per notebook in the order students work through them (types in ``grader_tests.catalogue``).
Pure data, never sent into a sandbox."""

from __future__ import annotations

from grader_tests.catalogue import HiddenCheck, Part, WrittenAnswer

LAYER_NOTEBOOK = "multi_head_attention"
QUESTIONS_NOTEBOOK = "02_heads_explained"


def _check(id: str, title: str, points: int, misconception: str) -> HiddenCheck:
    return HiddenCheck(id, LAYER_NOTEBOOK, title, points, misconception)


def _written(grade_id: str, question: str, points: int) -> WrittenAnswer:
    return WrittenAnswer(grade_id, QUESTIONS_NOTEBOOK, question, points)


LAYER = Part(LAYER_NOTEBOOK, 1, "the `MultiHeadSelfAttention` layer", (
    _check("mh_shapes", "Shapes are right for any B, T, D and any number of heads H dividing D: split_heads gives "
                        "(B, H, T, D/H), merge_heads (B, T, D), attention_weights (B, H, T, T), forward (B, T, D).", 1,
           "wrong shapes with heads"),
    _check("mh_split_order", "split_heads cuts each token's vector into H consecutive pieces and then moves the head "
                             "axis forward: a view as (B, T, H, D/H), then a transpose, not a bare reshape.", 2,
           "split by a bare reshape (heads mix tokens)"),
    _check("mh_merge_order", "merge_heads undoes split_heads: the head axis goes back behind the tokens before the "
                             "pieces are joined.", 2, "merged by a bare reshape"),
    _check("mh_head_scale", "Each head divides its scores by √(D/H), the square root of its own dimension, not by √D.",
           2, "scale by √D instead of √d_head"),
    _check("mh_softmax_dim", "In every head, each query's weights sum to 1 over the keys (softmax over dim=-1), not "
                             "over the heads or the queries.", 1, "softmax over the heads or the queries"),
    _check("mh_mask_every_head", "With causal=True every head sees itself and earlier tokens, never later ones: the "
                                 "mask reaches every head.", 2, "mask not broadcast over the heads"),
    _check("mh_causal_flag", "With causal=False no head is masked: a token also sees the tokens after it.", 1,
           "causal flag ignored"),
    _check("mh_heads_independent", "Head h attends with its own slice of q and k (entries h·D/H up to (h+1)·D/H), "
                                   "not with all of them or with another head's.", 2, "heads share or mix their slices"),
    _check("mh_values_per_head", "forward mixes each head's slice of the values with that head's weights, exactly "
                                 "the weights attention_weights returns.", 1, "values not split per head"),
    _check("mh_one_out_proj", "out_proj is applied once, to the merged heads: not per head, not skipped, not twice.",
           2, "output projection per head, skipped or repeated"),
    _check("mh_one_head", "With one head (H = 1) the layer is the single-head attention of the first assignment.", 1,
           "breaks with one head (squeeze, special cases)"),
))

QUESTIONS = Part(QUESTIONS_NOTEBOOK, 2, "why √(D/H), and what heads cost", (
    _written("head_scale_answer", "why each head divides by √(D/H) and not by √D", 2),
    _written("head_cost_answer", "the parameters and the score computations of H heads against one head", 2),
))

PARTS: tuple[Part, ...] = (LAYER, QUESTIONS)
