"""Catalogues of student answers that prove the checks of the further parts.

A part answer is the instructor's notebook with a few edits ``(grade_id, old,
new)`` typed into its answer cells. ``BUGGY`` answers carry one misconception
each: ``target`` is the check that exists for it and ``fails`` the exact set of
checks of that notebook that fail. ``CORRECT`` answers are right in another
idiom and must pass every check of their notebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartAnswer:
    name: str
    notebook: str  # notebook id, e.g. "02_by_hand"
    edits: tuple
    target: str | None = None
    fails: frozenset = field(default_factory=frozenset)


def bug(name: str, notebook: str, target: str, also: set, *edits) -> PartAnswer:
    return PartAnswer(name, notebook, tuple(edits), target, frozenset(also | {target}))


def ok(name: str, notebook: str, *edits) -> PartAnswer:
    return PartAnswer(name, notebook, tuple(edits))


BH, HB, SC, EX = "02_by_hand", "03_head_and_bias", "04_shapes_and_cost", "05_experiments"
HEAD_SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_size)"
HEAD_MASK = 'scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))'
BARS = "lines.append(f\"token {s}: {w:.3f}  {'#' * int(w * 30)}\".rstrip())"
UNMASKED = "return torch.softmax(self.W_q(x) @ self.W_k(x).transpose(-2, -1) / self.scale, dim=-1)"
COUNT = "return sum(p.numel() for p in module.parameters())"

BUGGY: list[PartAnswer] = [
    # ---------------------------------------------------------------- 02 by hand
    bug("dot_counted_from_one", BH, "by_hand_dot", set(),
        ("dot_answer", "inputs[1] @ inputs[2]", "inputs[2] @ inputs[3]")),
    bug("dot_without_the_sum", BH, "by_hand_dot", set(),
        ("dot_answer", "inputs[1] @ inputs[2]", "inputs[1] * inputs[2]")),
    bug("scores_pair_dimensions", BH, "by_hand_scores", {"by_hand_weights", "by_hand_context"},
        ("scores_answer", "inputs @ inputs.T", "inputs.T @ inputs")),
    bug("scores_scaled_by_sqrt_d", BH, "by_hand_scores", {"by_hand_weights", "by_hand_context"},
        ("scores_answer", "inputs @ inputs.T", "inputs @ inputs.T / math.sqrt(inputs.shape[1])")),
    bug("softmax_over_columns", BH, "by_hand_weights", {"by_hand_context"},
        ("weights_answer", "dim=-1", "dim=0")),
    bug("rows_divided_by_their_sum", BH, "by_hand_weights", {"by_hand_context"},
        ("weights_answer", "torch.softmax(attn_scores, dim=-1)", "attn_scores / attn_scores.sum(dim=-1, keepdim=True)")),
    bug("context_from_transposed_weights", BH, "by_hand_context", set(),
        ("context_answer", "attn_weights @ inputs", "attn_weights.T @ inputs")),
    bug("context_from_scores", BH, "by_hand_context", set(),
        ("context_answer", "attn_weights @ inputs", "attn_scores @ inputs")),
    bug("three_tokens_unscaled", BH, "three_tokens", set(),
        ("three_answer", "Q3 @ K3.T / math.sqrt(d_k)", "Q3 @ K3.T")),
    bug("three_tokens_scaled_by_d_k", BH, "three_tokens", set(),
        ("three_answer", "Q3 @ K3.T / math.sqrt(d_k)", "Q3 @ K3.T / d_k")),
    bug("three_tokens_mix_keys", BH, "three_tokens", set(),
        ("three_answer", "out3 = weights3 @ V3", "out3 = weights3 @ K3")),
    # ---------------------------------------------------------------- 03 head and bias
    bug("head_scaled_by_sqrt_c", HB, "head_scale", set(),
        ("head_class", HEAD_SCALE, "scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])")),
    bug("head_unscaled", HB, "head_scale", set(),
        ("head_class", HEAD_SCALE, "scores = q @ k.transpose(-2, -1)")),
    bug("head_scaled_by_head_size", HB, "head_scale", set(),
        ("head_class", HEAD_SCALE, "scores = q @ k.transpose(-2, -1) / self.head_size")),
    bug("head_never_masks", HB, "head_mask", set(),
        ("head_class", "        if self.causal:\n", "        if False:\n")),
    bug("head_mask_inverted", HB, "head_mask", {"head_values"},
        ("head_class", HEAD_MASK, HEAD_MASK.replace("self.causal_mask(", "~self.causal_mask("))),
    bug("head_mixes_keys", HB, "head_values", set(),
        ("head_class", "return self.attention_weights(x) @ self.value(x)", "return self.attention_weights(x) @ self.key(x)")),
    bug("head_mixes_queries", HB, "head_values", set(),
        ("head_class", "return self.attention_weights(x) @ self.value(x)", "return self.attention_weights(x) @ self.query(x)")),
    bug("head_returns_weights", HB, "head_shapes", {"head_values"},
        ("head_class", "return self.attention_weights(x) @ self.value(x)", "return self.attention_weights(x)")),
    bug("head_returns_embedding_size", HB, "head_shapes", {"head_values"},
        ("head_class", "return self.attention_weights(x) @ self.value(x)", "return self.attention_weights(x) @ x")),
    bug("bars_rounded", HB, "weight_bars", set(), ("bars_fn", "int(w * 30)", "round(w * 30)")),
    bug("bars_skip_masked", HB, "weight_bars", set(),
        ("bars_fn", "        lines.append(", "        if w == 0:\n            continue\n        lines.append(")),
    bug("unmasked_layer_masks", HB, "unmasked_sees_future", {"unmasked_bias"},
        ("bias_class", UNMASKED,
         "scores = self.W_q(x) @ self.W_k(x).transpose(-2, -1) / self.scale\n"
         "        T = x.shape[-2]\n"
         "        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
         "        return torch.softmax(scores.masked_fill(blocked, float('-inf')), dim=-1)")),
    bug("projection_bias_dropped", HB, "unmasked_bias", set(),
        ("bias_class", UNMASKED,
         "return torch.softmax((x @ self.W_q.weight.T) @ (x @ self.W_k.weight.T).transpose(-2, -1) / self.scale, dim=-1)")),
    bug("value_bias_dropped", HB, "unmasked_bias", set(),
        ("bias_class", "return self.attention_weights(x) @ self.W_v(x)", "return self.attention_weights(x) @ (x @ self.W_v.weight.T)")),
    bug("trace_without_bias", HB, "two_plus_three", set(),
        ("trace_answer", "Q = trace_x @ W_q.T + b_q", "Q = trace_x @ W_q.T"),
        ("trace_answer", "K = trace_x @ W_k.T + b_k", "K = trace_x @ W_k.T")),
    bug("trace_unscaled", HB, "two_plus_three", set(),
        ("trace_answer", "Q @ K.T / math.sqrt(trace_x.shape[-1])", "Q @ K.T")),
    # ---------------------------------------------------------------- 04 shapes and cost
    bug("scores_d_k_by_d_k", SC, "shapes_n100", set(),
        ("shapes_answer", '"scores": tuple(scores.shape)', '"scores": (64, 64)')),
    bug("output_n_by_n", SC, "shapes_n100", set(),
        ("shapes_answer", '"output": tuple(output.shape)', '"output": (100, 100)')),
    bug("one_projection_only", SC, "qkv_params_gpt3", set(), ("count_answer", "3 * D * D", "D * D")),
    bug("output_projection_counted", SC, "qkv_params_gpt3", set(), ("count_answer", "3 * D * D", "4 * D * D")),
    bug("biases_counted", SC, "qkv_params_gpt3", set(), ("count_answer", "3 * D * D", "3 * (D * D + D)")),
    # ---------------------------------------------------------------- 05 experiments
    bug("vocab_unsorted", EX, "char_tokenizer", set(), ("tokenizer", "return sorted(set(text))", "return list(set(text))")),
    bug("ids_from_one", EX, "char_tokenizer", {"strip_mask_collapse"},
        ("tokenizer", "{ch: i for i, ch in enumerate(vocab)}", "{ch: i + 1 for i, ch in enumerate(vocab)}")),
    bug("targets_not_shifted", EX, "strip_mask_collapse", set(),
        ("training", "data[s + 1:s + block_size + 1]", "data[s:s + block_size]")),
    bug("causal_flag_ignored", EX, "strip_mask_collapse", set(),
        ("self_attention_class", "        if self.causal:\n", "        if True:\n")),
    bug("optimizer_never_steps", EX, "strip_mask_collapse", set(),
        ("training", "        optimizer.step()\n", "")),
    bug("count_weights_only", EX, "param_count", set(),
        ("count_fn", COUNT, 'return sum(p.numel() for name, p in module.named_parameters() if name.endswith("weight"))')),
    bug("count_tensors", EX, "param_count", set(), ("count_fn", COUNT, "return len(list(module.parameters()))")),
    bug("count_trainable_only", EX, "param_count", set(),
        ("count_fn", COUNT, "return sum(p.numel() for p in module.parameters() if p.requires_grad)")),
]

CORRECT: list[PartAnswer] = [
    # ---------------------------------------------------------------- 02 by hand
    ok("loops_and_floats", BH,
       ("dot_answer", "journey_starts = inputs[1] @ inputs[2]",
        "journey_starts = sum(a * b for a, b in zip(inputs[1].tolist(), inputs[2].tolist()))"),
       ("scores_answer", "attn_scores = inputs @ inputs.T",
        "attn_scores = torch.empty(6, 6)\nfor i in range(6):\n    for j in range(6):\n"
        "        attn_scores[i, j] = torch.dot(inputs[i], inputs[j])"),
       ("weights_answer", "attn_weights = torch.softmax(attn_scores, dim=-1)",
        "attn_weights = attn_scores.exp() / attn_scores.exp().sum(dim=1, keepdim=True)"),
       ("context_answer", "context_vectors = attn_weights @ inputs",
        "context_vectors = torch.stack([sum(attn_weights[i, j] * inputs[j] for j in range(6)) for i in range(6)])"),
       ("three_answer", "scores3 = Q3 @ K3.T / math.sqrt(d_k)", "scores3 = torch.einsum('id,jd->ij', Q3, K3) * d_k ** -0.5")),
    ok("numpy_and_einsum", BH,
       ("dot_answer", "journey_starts = inputs[1] @ inputs[2]", "journey_starts = float(inputs.numpy()[1].dot(inputs.numpy()[2]))"),
       ("scores_answer", "attn_scores = inputs @ inputs.T", "attn_scores = inputs.numpy() @ inputs.numpy().T"),
       ("weights_answer", "attn_weights = torch.softmax(attn_scores, dim=-1)",
        "attn_weights = torch.nn.functional.softmax(torch.as_tensor(attn_scores), dim=1)"),
       ("context_answer", "context_vectors = attn_weights @ inputs",
        "context_vectors = torch.einsum('ij,jd->id', attn_weights, inputs)"),
       ("three_answer", "weights3 = torch.softmax(scores3, dim=-1)", "weights3 = scores3.softmax(1)")),
    ok("typed_in_by_hand_to_four_decimals", BH,
       ("dot_answer", "journey_starts = inputs[1] @ inputs[2]",
        "journey_starts = 0.55 * 0.57 + 0.87 * 0.85 + 0.66 * 0.64  # = 1.4754"),
       ("three_answer", "out3 = weights3 @ V3",
        "out3 = [[0.6683, 0.6588], [0.5792, 0.7247], [0.6362, 0.6842]]  # worked out on paper")),
    # ---------------------------------------------------------------- 03 head and bias
    ok("head_einsum_where_and_format", HB,
       ("head_class", "q, k = self.query(x), self.key(x)\n        " + HEAD_SCALE,
        "scores = torch.einsum('btd,bsd->bts', self.query(x), self.key(x)) * self.head_size ** -0.5"),
       ("head_class", HEAD_MASK,
        'scores = torch.where(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril(), scores, float("-inf"))'),
       ("bars_fn", BARS, "lines.append(('  token {}: {:.3f}  '.format(s, w) + '#' * math.floor(w * 30)))"),
       ("bias_class", UNMASKED,
        "q = F.linear(x, self.W_q.weight, self.W_q.bias)\n"
        "        k = F.linear(x, self.W_k.weight, self.W_k.bias)\n"
        "        return (q @ k.mT / math.sqrt(x.shape[-1])).softmax(-1)")),
    ok("head_sdpa_forward_and_modules_trace", HB,
       ("head_class", "return self.attention_weights(x) @ self.value(x)",
        "return F.scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), is_causal=self.causal)"),
       ("head_class", HEAD_MASK, 'scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), -1e9)'),
       ("bars_fn", BARS, 'lines.append("token %d: %.3f  %s" % (s, w, "#" * int(w * 30)))'),
       ("trace_answer", "Q = trace_x @ W_q.T + b_q", "Q = torch.addmm(b_q, trace_x, W_q.T)"),
       ("trace_answer", "trace_weights = torch.softmax(trace_scores, dim=-1)",
        "trace_weights = trace_scores.softmax(dim=1)")),
    # ---------------------------------------------------------------- 04 shapes and cost
    ok("shapes_typed_as_lists_and_float_count", SC,
       ("shapes_answer", '"scores": tuple(scores.shape)', '"scores": [100, 100]'),
       ("shapes_answer", '"Q": tuple(Q.shape)', '"Q": Q.shape'),
       ("count_answer", "qkv_weight_count = 3 * D * D", "qkv_weight_count = 3 * 12288.0 ** 2")),
    # ---------------------------------------------------------------- 05 experiments
    ok("index_arithmetic_batches_and_numel_map", EX,
       ("tokenizer", "index = {ch: i for i, ch in enumerate(vocab)}\n    return [index[ch] for ch in text]",
        "return torch.tensor([vocab.index(ch) for ch in text])"),
       ("training", "x = torch.stack([data[s:s + block_size] for s in starts.tolist()])\n"
                    "    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])",
        "offsets = starts[:, None] + torch.arange(block_size)\n    x, y = data[offsets], data[offsets + 1]"),
       ("training", "loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))",
        "loss = F.cross_entropy(logits.transpose(1, 2), y)"),
       ("training", "optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=True)"),
       ("count_fn", COUNT, "return int(sum(map(torch.numel, module.parameters())))")),
    ok("core_layer_in_another_idiom", EX,
       ("self_attention_class", 'scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))',
        'scores = scores + torch.zeros_like(scores).masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))')),
]
