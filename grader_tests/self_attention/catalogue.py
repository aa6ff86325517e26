"""What the self-attention assignment grades, defined once: every hidden check and every written answer.

Everything a student or a teacher reads about a graded item comes from here:

* the check cells of ``source/self_attention/*.ipynb`` (grade id ``check_<id>``, points, the
  comment line that stays in the feedback: ``# Hidden check (2 points): <title>``) and the
  written-answer cells' points, rewritten by ``python -m attention_platform.course.graded_cells``;
* the grading overview of each notebook (the points it is worth, the table of what is graded)
  and the assignment's table of parts in ``self_attention.ipynb``, generated the same way;
* ``✓ Passed: <title>`` in every check cell, the misconception labels of the class report and
  the exports, the demo's totals and the end-to-end tests' expected scores.

This module is pure data and is never sent into a sandbox.
"""

from __future__ import annotations

from ..catalogue import HiddenCheck, Part, WrittenAnswer


def _check(notebook: str):
    return lambda id, title, points, misconception, public=False: HiddenCheck(id, notebook, title, points,
                                                                              misconception, public)


def _written(notebook: str):
    return lambda grade_id, question, points: WrittenAnswer(grade_id, notebook, question, points)


_core = _check("self_attention")
SELF_ATTENTION = Part("self_attention", 1, "the `SelfAttention` layer", (
    _core("shapes", "Shapes are right for any B, T (even 1) and D: forward gives (B, T, D), attention_weights "
                    "(B, T, T).", 1, "wrong shapes / transposed dims", public=True),
    _core("score_pairing", "Row i of the scores is query i against every key: q_i·k_j, not k_i·q_j nor a viewed k.", 1,
          "transposed scores (k·qᵀ, or view for transpose)"),
    _core("sqrt_d_scale", "The scores are q·k divided by √D.", 2, "forgot √D (or misplaced it)"),
    _core("softmax_dim", "Each query's weights sum to 1 over the keys (softmax over dim=-1).", 2,
          "softmax over the wrong dim", public=True),
    _core("mask_polarity", "With causal=True a token sees itself and earlier tokens, never later ones.", 2,
          "mask inverted (or diagonal blocked)"),
    _core("no_future_leak", "With causal=True, changing a later token never changes an earlier output.", 1,
          "future leaks into the past"),
    _core("mask_before_softmax", "The mask is applied before the softmax, so every row of weights sums to 1.", 2,
          "masked after the softmax"),
    _core("causal_flag", "With causal=False nothing is masked: a token also sees the tokens after it.", 1,
          "causal flag ignored"),
    _core("value_and_out_proj", "The output is out_proj(weights @ v_proj(x)).", 2,
          "wrong value path / output projection"),
    _core("same_computation", "The forward pass uses exactly the weights that attention_weights returns.", 1,
          "forward ≠ attention_weights"),
    _core("gradients", "Backpropagation gives the gradients of what forward computes: nothing is cut off.", 1,
          "cut the autograd graph (detach, NumPy, no_grad)"),
    _core("input_unchanged", "Calling the layer leaves its input x unchanged.", 1, "modified the input in place"),
    _core("float64", "With float64 inputs and weights the layer computes in float64, to float64 precision.", 1,
          "hard-coded dtype (computes in float32)"),
    _core("large_scores", "Scores in the thousands still give exact weights: no overflow, nothing leaks "
                          "through the mask.", 2, "numerically unsafe softmax or mask"),
    _core("layer_reused", "One layer can be called at a short T, then a longer T, then again after .double().", 1,
          "state sized by the first call"),
    _core("long_sequences", "The layer works for any sequence length, such as T = 100 and T = 257.", 1,
          "hard-coded maximum length"),
))

_hand = _check("02_by_hand")
BY_HAND = Part("02_by_hand", 2, "attention by hand, no trainable weights", (
    _hand("by_hand_dot", "The 'journey'·'starts' dot product is right, with rows counted from 0.", 1,
          "counting positions from 1"),
    _hand("by_hand_scores", "The 6 × 6 score matrix is right to 4 decimals.", 2, "scores pair tokens, not dimensions"),
    _hand("by_hand_weights", "The attention weights are right to 4 decimals: each row is a softmax.", 2,
          "softmax over the wrong dim / normalising without softmax"),
    _hand("by_hand_context", "The six context vectors are right to 4 decimals.", 1, "mixing with the wrong matrix"),
    _hand("three_tokens", "Every step of the three-token example with projections and the √d_k scale is right.", 2,
          "a step of scaled dot-product attention"),
))

_head = _check("03_head_and_bias")
HEAD_AND_BIAS = Part("03_head_and_bias", 3, "a head with its own size; no mask, biased projections", (
    _head("head_shapes", "A head maps (B, T, C) to (B, T, head_size), and its weights are (B, T, T).", 1,
          "head output size"),
    _head("head_scale", "A head divides its scores by √head_size, not by √C.", 2, "scale by √C instead of √head_size"),
    _head("head_mask", "With causal=True a head sees itself and the past, never the future.", 1, "head causal mask"),
    _head("head_values", "A head returns attention_weights(x) @ value(x).", 1, "head value path"),
    _head("weight_bars", "The weight_bars printout has one line per position, in the given format.", 1, "per-token printout"),
    _head("unmasked_sees_future", "SingleHeadAttention has no mask: every token sees the tokens after it.", 1,
          "masking when not asked"),
    _head("unmasked_bias", "SingleHeadAttention keeps the projections' biases and divides by √embed_dim.", 1,
          "projection bias dropped"),
    _head("two_plus_three", "The 'two plus three' trace gives the right weights and outputs.", 1,
          "tracing attention by hand"),
))

_shapes = _check("04_shapes_and_cost")
_shapes_ta = _written("04_shapes_and_cost")
SHAPES_AND_COST = Part("04_shapes_and_cost", 4, "shapes and the cost of attention", (
    _shapes("shapes_n100", "The shapes of Q, K, V, the scores and the output are right for n = 100, d_k = 64.", 2,
            "attention shapes"),
    _shapes("qkv_params_gpt3", "The Q/K/V weight count of one layer at width 12,288 is right.", 1,
            "parameter count of projections"),
    _shapes_ta("meaning_answer", "what `attention_weights[5, 10] = 0.3` means", 1),
    _shapes_ta("cost_answer", "the cost of attention in n, and why it hurts long sequences", 2),
))

_exp = _check("05_experiments")
_exp_ta = _written("05_experiments")
EXPERIMENTS = Part("05_experiments", 5, "heatmaps, the strip-mask experiment, parameters, timing", (
    _exp("char_tokenizer", "The character tokenizer has a sorted vocabulary, and decode(encode(text)) gives the "
                           "text back.", 1, "tokenizer"),
    _exp_ta("heatmap_answer", "attention heatmaps for two sentences", 1),
    _exp("strip_mask_collapse", "Without the mask the model cheats: its loss collapses far below the masked one.", 2,
         "why the causal mask matters"),
    _exp("param_count", "The count_parameters function counts every number in a module's parameters.", 1, "parameter counting"),
    _exp_ta("timing_answer", "timing attention as T grows", 1),
))

_explain_ta = _written("06_explain")
EXPLAIN = Part("06_explain", 6, "why √D, permutation equivariance", (
    _explain_ta("sqrt_answer", "why divide the scores by √D", 2),
    _explain_ta("perm_answer", "what permutation-equivariant means, and why self-attention is", 2),
))

PARTS: tuple[Part, ...] = (SELF_ATTENTION, BY_HAND, HEAD_AND_BIAS, SHAPES_AND_COST, EXPERIMENTS, EXPLAIN)
PART_BY_NOTEBOOK: dict[str, Part] = {part.notebook: part for part in PARTS}
HIDDEN_CHECKS: tuple[HiddenCheck, ...] = tuple(check for part in PARTS for check in part.checks)
WRITTEN_ANSWERS: tuple[WrittenAnswer, ...] = tuple(answer for part in PARTS for answer in part.written)
ASSIGNMENT_AUTO_POINTS = sum(part.auto_points for part in PARTS)
ASSIGNMENT_TA_POINTS = sum(part.ta_points for part in PARTS)
ASSIGNMENT_POINTS = ASSIGNMENT_AUTO_POINTS + ASSIGNMENT_TA_POINTS

assert len({c.id for c in HIDDEN_CHECKS}) == len(HIDDEN_CHECKS), "check ids must be unique"
assert [p.number for p in PARTS] == list(range(1, len(PARTS) + 1))
