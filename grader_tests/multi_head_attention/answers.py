"""Answers that prove the multi-head attention checks, typed into the instructor's notebook.

``WHEATS`` are right in another idiom and pass every check; each of ``CHAFFS`` carries one
misconception: ``target`` is the check that exists for it, ``fails`` the exact set of checks that
fail. All edit the class cell, ``multi_head_class``, of ``multi_head_attention.ipynb``.
"""

from __future__ import annotations

from grader_tests import proofs
from grader_tests.proofs import Proof

from .catalogue import LAYER_NOTEBOOK

CELL = "multi_head_class"
SPLIT = "return x.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)"
MERGE = "return y.transpose(1, 2).reshape(batch, seq_len, self.embedding_dim)"
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)"
MASK = 'scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))'
SOFTMAX = "return scores.softmax(dim=-1)"
WEIGHTS = f'''q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        {SCALE}
        if self.causal:
            {MASK}
        {SOFTMAX}'''
FORWARD = '''heads = self.attention_weights(x) @ self.split_heads(self.v_proj(x))
        return self.out_proj(self.merge_heads(heads))'''


def wheat(name: str, *changes: tuple[str, str]) -> Proof:
    """A right answer: ``(old, new)`` text edits of the class cell."""
    return proofs.wheat(name, LAYER_NOTEBOOK, *((CELL, old, new) for old, new in changes))


def chaff(name: str, target: str, also: set[str], *changes: tuple[str, str]) -> Proof:
    """A wrong answer: ``(old, new)`` text edits of the class cell; ``also`` fails besides ``target``."""
    return proofs.chaff(name, LAYER_NOTEBOOK, target, also, *((CELL, old, new) for old, new in changes))


def _indented(code: str) -> str:
    """A method body written at column 0, indented into the class."""
    return code.strip("\n").replace("\n", "\n        ")


WHEATS: list[Proof] = [
    wheat("einsum",
          (SCALE, 'scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(self.head_dim)'),
          ("heads = self.attention_weights(x) @ self.split_heads(self.v_proj(x))",
           'heads = torch.einsum("bhts,bhsd->bhtd", self.attention_weights(x), self.split_heads(self.v_proj(x)))')),
    wheat("reshape_and_permute",
          (SPLIT, "return x.reshape(batch, seq_len, self.num_heads, -1).permute(0, 2, 1, 3)"),
          (MERGE, "return y.permute(0, 2, 1, 3).reshape(batch, seq_len, -1)")),
    wheat("unflatten_and_flatten",
          (SPLIT, "return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)"),
          (MERGE, "return y.transpose(1, 2).flatten(start_dim=2)")),
    wheat("chunk_and_cat",
          (SPLIT, "return torch.stack(x.chunk(self.num_heads, dim=-1), dim=1)"),
          (MERGE, "return torch.cat(y.unbind(dim=1), dim=-1)")),
    wheat("scaled_dot_product_attention", (FORWARD, _indented('''
q, k, v = (self.split_heads(projection(x)) for projection in (self.q_proj, self.k_proj, self.v_proj))
heads = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
return self.out_proj(self.merge_heads(heads))
'''))),
    wheat("loop_over_heads", (WEIGHTS, _indented('''
q, k, d = self.q_proj(x), self.k_proj(x), self.head_dim
per_head = []
for h in range(self.num_heads):
    part = slice(h * d, (h + 1) * d)
    scores = q[..., part] @ k[..., part].transpose(-2, -1) / math.sqrt(d)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    per_head.append(scores.softmax(dim=-1))
return torch.stack(per_head, dim=1)
''')), (FORWARD, _indented('''
weights, v, d = self.attention_weights(x), self.v_proj(x), self.head_dim
outputs = [weights[:, h] @ v[..., h * d:(h + 1) * d] for h in range(self.num_heads)]
return self.out_proj(torch.cat(outputs, dim=-1))
'''))),
    wheat("queries_scaled_first_mask_with_finfo_min",
          (SCALE, "scores = (q * self.head_dim ** -0.5) @ k.mT"),
          (MASK, "scores = torch.where(self.causal_mask(x.shape[-2], x.device), torch.finfo(scores.dtype).min, scores)")),
]

CHAFFS: list[Proof] = [
    chaff("merge_without_joining_pieces", "mh_shapes", {'mh_merge_order', 'mh_one_head', 'mh_one_out_proj', 'mh_values_per_head'},
          (MERGE, "return y.transpose(1, 2)")),
    chaff("split_by_bare_reshape", "mh_split_order", {'mh_heads_independent', 'mh_values_per_head'},
          (SPLIT, "return x.reshape(batch, self.num_heads, seq_len, self.head_dim)")),
    chaff("split_interleaved", "mh_split_order", {'mh_heads_independent', 'mh_values_per_head'},
          (SPLIT, "return x.view(batch, seq_len, self.head_dim, self.num_heads).permute(0, 3, 1, 2)")),
    chaff("merge_by_bare_reshape", "mh_merge_order", {'mh_values_per_head'},
          (MERGE, "return y.reshape(batch, seq_len, self.embedding_dim)")),
    chaff("scaled_by_sqrt_d_model", "mh_head_scale", set(),
          (SCALE, "scores = q @ k.transpose(-2, -1) / math.sqrt(self.embedding_dim)")),
    chaff("unscaled", "mh_head_scale", {'mh_one_head'},
          (SCALE, "scores = q @ k.transpose(-2, -1)")),
    chaff("scaled_by_head_dim", "mh_head_scale", {'mh_one_head'},
          (SCALE, "scores = q @ k.transpose(-2, -1) / self.head_dim")),
    chaff("softmax_over_heads", "mh_softmax_dim", {'mh_head_scale', 'mh_heads_independent', 'mh_one_head', 'mh_one_out_proj', 'mh_values_per_head'},
          (SOFTMAX, "return scores.softmax(dim=1)")),
    chaff("softmax_over_queries", "mh_softmax_dim", {'mh_one_head'},
          (SOFTMAX, "return scores.softmax(dim=-2)")),
    chaff("mask_on_first_head_only", "mh_mask_every_head", set(),
          (MASK, 'scores[:, 0] = scores[:, 0].masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))')),
    chaff("mask_inverted", "mh_mask_every_head", {'mh_one_head', 'mh_one_out_proj', 'mh_values_per_head'},
          (MASK, MASK.replace("self.causal_mask(", "~self.causal_mask("))),
    chaff("always_masks", "mh_causal_flag", set(),
          ("        if self.causal:\n            " + MASK, "        if True:\n            " + MASK)),
    chaff("every_head_uses_whole_q_and_k", "mh_heads_independent", set(), (WEIGHTS, _indented('''
q, k = self.q_proj(x), self.k_proj(x)
scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
if self.causal:
    scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
return scores.softmax(dim=-1).unsqueeze(1).expand(-1, self.num_heads, -1, -1)
'''))),
    chaff("head_slices_start_at_h", "mh_heads_independent", set(), (WEIGHTS, _indented('''
q, k, d = self.q_proj(x), self.k_proj(x), self.head_dim
per_head = []
for h in range(self.num_heads):
    scores = q[..., h:h + d] @ k[..., h:h + d].transpose(-2, -1) / math.sqrt(d)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    per_head.append(scores.softmax(dim=-1))
return torch.stack(per_head, dim=1)
'''))),
    chaff("values_mixed_with_average_weights", "mh_values_per_head", set(),
          (FORWARD, "return self.out_proj(self.attention_weights(x).mean(dim=1) @ self.v_proj(x))")),
    chaff("forward_recomputes_unscaled_weights", "mh_values_per_head", {'mh_one_head'}, (FORWARD, _indented('''
q, k, v = (self.split_heads(projection(x)) for projection in (self.q_proj, self.k_proj, self.v_proj))
scores = q @ k.transpose(-2, -1)
if self.causal:
    scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
return self.out_proj(self.merge_heads(scores.softmax(dim=-1) @ v))
'''))),
    chaff("out_proj_skipped", "mh_one_out_proj", {'mh_one_head'},
          ("return self.out_proj(self.merge_heads(heads))", "return self.merge_heads(heads)")),
    chaff("out_proj_twice", "mh_one_out_proj", {'mh_one_head'},
          ("return self.out_proj(self.merge_heads(heads))", "return self.out_proj(self.out_proj(self.merge_heads(heads)))")),
    chaff("out_proj_per_head", "mh_one_out_proj", set(), (FORWARD, _indented('''
heads = self.attention_weights(x) @ self.split_heads(self.v_proj(x))
d, weight, bias = self.head_dim, self.out_proj.weight, self.out_proj.bias
outputs = [heads[:, h] @ weight[h * d:(h + 1) * d, h * d:(h + 1) * d].T + bias[h * d:(h + 1) * d]
           for h in range(self.num_heads)]
return torch.cat(outputs, dim=-1)
'''))),
    chaff("out_proj_before_the_merge", "mh_one_out_proj", set(),
          (FORWARD, _indented('''
heads = self.attention_weights(x) @ self.split_heads(self.out_proj(self.v_proj(x)))
return self.merge_heads(heads)
'''))),
    chaff("heads_squeezed", "mh_one_head", {'mh_shapes'},
          ("return self.out_proj(self.merge_heads(heads))", "return self.out_proj(self.merge_heads(heads.squeeze()))")),
]
