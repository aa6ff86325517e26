"""Catalogues of student answers that prove the hidden checks.

``BUGGY``: answers with one misconception each; ``target`` is the check that
exists for it and ``fails`` the exact set of checks that fail (so a check that
starts blaming the wrong idea shows up). ``CORRECT``: right answers in other
idioms; every check must pass them.

An answer defines ``forward`` and ``attention_weights`` (and any helpers) at
column 0, as they would sit inside the released class; the notebook's import
cell (math, torch, nn, F) is in scope.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..proofs import Proof, edits
from . import answers_parts

# The assignment these answers prove, its main notebook (file name) and every notebook, in order:
# for tests that type an answer into this assignment (the platform asks the registry).
ASSIGNMENT = "self_attention"
NOTEBOOK = "self_attention.ipynb"
NOTEBOOKS = (NOTEBOOK, "02_by_hand.ipynb", "03_head_and_bias.ipynb", "04_shapes_and_cost.ipynb",
             "05_experiments.ipynb", "06_explain.ipynb")
PART_NOTEBOOKS = NOTEBOOKS[1:]
# The course directory this package sits in (grader_tests/ lies at its top).
COURSE_ROOT = Path(__file__).resolve().parents[2]


def release_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    """A notebook of this assignment as students receive it."""
    return nbformat.read(course_root / "release" / ASSIGNMENT / notebook, as_version=4)


def source_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    """A notebook of this assignment as the instructor wrote it (solutions in)."""
    return nbformat.read(course_root / "source" / ASSIGNMENT / notebook, as_version=4)

# The released class cell and the methods a student writes in it.
CLASS_CELL_ID = "self_attention_class"
ANSWERED_METHODS = ("forward", "attention_weights")


def class_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == CLASS_CELL_ID:
            return cell
    raise LookupError(f"no cell with grade_id {CLASS_CELL_ID!r}")


def with_methods(class_source: str, answer: str) -> str:
    """Replace ``forward`` and ``attention_weights`` of the class in ``class_source``
    by the definitions in ``answer`` (column-0 defs, helpers allowed). A method of the
    class that ``answer`` defines again (``__init__``, say, to register a buffer) is
    replaced too, as a student would edit it."""
    tree = ast.parse(class_source)
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    redefined = {n.name for n in ast.parse(textwrap.dedent(answer)).body if isinstance(n, ast.FunctionDef)}
    present = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    if not set(ANSWERED_METHODS) <= present:
        raise ValueError("the class cell must define forward and attention_weights")
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in set(ANSWERED_METHODS) | redefined]
    lines = class_source.splitlines()
    first = min(m.lineno - 1 - len(m.decorator_list) for m in methods)
    drop = set()
    for method in methods:
        drop.update(range(method.lineno - 1 - len(method.decorator_list), method.end_lineno))
    indented = textwrap.indent(textwrap.dedent(answer).strip("\n"), "    ").splitlines()
    kept = [line for i, line in enumerate(lines) if i not in drop]
    insert_at = first - sum(1 for i in drop if i < first)
    out = kept[:insert_at] + indented + kept[insert_at:]
    return "\n".join(out).rstrip() + "\n"


def with_answer(nb: nbformat.NotebookNode, answer: str | None) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose class cell carries ``answer`` (None: left as released)."""
    copy = nbformat.from_dict(nb)
    if answer is not None:
        cell = class_cell(copy)
        cell.source = with_methods(cell.source, answer)
    return copy


def class_namespace(nb: nbformat.NotebookNode) -> dict:
    """Execute the notebook's import and class cells; return the resulting globals."""
    namespace: dict = {"__name__": "__student__"}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ("imports", CLASS_CELL_ID):
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)
    return namespace


@dataclass(frozen=True)
class Answer:
    name: str
    code: str
    target: str | None = None  # buggy answers: the check meant to catch it
    fails: frozenset = field(default_factory=frozenset)


def bug(name: str, target: str, fails: set, code: str) -> Answer:
    return Answer(name, code, target, frozenset(fails | {target}))


def ok(name: str, code: str) -> Answer:
    return Answer(name, code)


def _weights_with(scores_line: str, mask_line: str = 'scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))',
                  softmax_line: str = "weights = scores.softmax(dim=-1)", after: str = "") -> str:
    """A reference-shaped answer with one line swapped out."""
    return f'''
def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    {scores_line}
    if self.causal:
        {mask_line}
    {softmax_line}
    {after or "pass"}
    return weights
'''


SCALED = "scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])"
FORWARD = "def forward(self, x):\n    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))\n"

BUGGY: list[Answer] = [
    bug("no_scale", "sqrt_d_scale", set(), _weights_with("scores = q @ k.transpose(-2, -1)")),
    bug("scale_by_d", "sqrt_d_scale", set(), _weights_with("scores = q @ k.transpose(-2, -1) / x.shape[-1]")),
    bug("scale_by_sqrt_t", "sqrt_d_scale", set(), _weights_with("scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-2])")),
    bug("scale_multiplied", "sqrt_d_scale", set(), _weights_with("scores = q @ k.transpose(-2, -1) * math.sqrt(x.shape[-1])")),
    bug("scale_after_softmax", "sqrt_d_scale", {'mask_before_softmax', 'softmax_dim', 'value_and_out_proj'},
        _weights_with("scores = q @ k.transpose(-2, -1)", softmax_line="weights = scores.softmax(dim=-1) / math.sqrt(x.shape[-1])")),
    bug("scores_q_q", "sqrt_d_scale", set(), _weights_with("scores = q @ q.transpose(-2, -1) / math.sqrt(x.shape[-1])")),
    bug("scores_from_raw_x", "sqrt_d_scale", set(), _weights_with("scores = x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1])")),
    bug("projection_bias_dropped", "sqrt_d_scale", set(),
        _weights_with("scores = (x @ self.q_proj.weight.mT) @ (x @ self.k_proj.weight.mT).mT / math.sqrt(x.shape[-1])")),
    bug("softmax_over_queries", "softmax_dim", {'no_future_leak'}, _weights_with(SCALED, softmax_line="weights = scores.softmax(dim=-2)")),
    bug("softmax_over_batch", "softmax_dim", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'mask_before_softmax', 'mask_polarity', 'same_computation', 'score_pairing', 'sqrt_d_scale', 'value_and_out_proj'}, _weights_with(SCALED, softmax_line="weights = scores.softmax(dim=0)")),
    bug("no_softmax", "softmax_dim", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'mask_before_softmax', 'score_pairing', 'sqrt_d_scale', 'value_and_out_proj'}, _weights_with(SCALED, softmax_line="weights = scores.masked_fill(scores.isinf(), 0.0)")),
    bug("log_softmax", "softmax_dim", {'causal_flag', 'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'mask_before_softmax', 'mask_polarity', 'same_computation', 'score_pairing', 'sqrt_d_scale', 'value_and_out_proj'}, _weights_with(SCALED, softmax_line="weights = scores.log_softmax(dim=-1)")),
    bug("inverted_mask", "mask_polarity", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'no_future_leak', 'same_computation', 'value_and_out_proj'},
        _weights_with(SCALED, mask_line='scores = scores.masked_fill(~self.causal_mask(x.shape[-2], x.device), float("-inf"))')),
    bug("inverted_mask_large_negative", "mask_polarity", {'no_future_leak'},
        _weights_with(SCALED, mask_line="scores = scores.masked_fill(~self.causal_mask(x.shape[-2], x.device), -1e9)")),
    bug("tril_instead_of_triu", "mask_polarity", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'no_future_leak', 'same_computation', 'value_and_out_proj'},
        _weights_with(SCALED, mask_line='scores = scores.masked_fill(torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).tril(), float("-inf"))')),
    bug("diagonal_blocked", "mask_polarity", {'no_future_leak'},
        _weights_with(SCALED, mask_line='scores = scores.masked_fill(torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).triu(), -1e9)')),
    bug("mask_filled_with_zero", "mask_polarity", {'no_future_leak'},
        _weights_with(SCALED, mask_line="scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), 0.0)")),
    bug("mask_after_softmax", "mask_before_softmax", {'no_future_leak'},
        _weights_with(SCALED, mask_line="pass", after="weights = weights.masked_fill(self.causal_mask(x.shape[-2], x.device), 0.0) if self.causal else weights")),
    bug("causal_flag_ignored_always_masks", "causal_flag", set(),
        _weights_with(SCALED).replace("    if self.causal:\n", "    if True:\n")),
    bug("causal_flag_ignored_never_masks", "mask_polarity", {'no_future_leak'},
        _weights_with(SCALED).replace("    if self.causal:\n", "    if False:\n")),
    bug("out_proj_skipped", "value_and_out_proj", {'same_computation'},
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "return self.attention_weights(x) @ self.v_proj(x)")),
    bug("values_are_keys", "value_and_out_proj", {'same_computation'},
        _weights_with(SCALED).replace("self.v_proj(x))", "self.k_proj(x))")),
    bug("values_are_raw_x", "value_and_out_proj", {'same_computation'},
        _weights_with(SCALED).replace("@ self.v_proj(x))", "@ x)")),
    bug("forward_unscaled_own_path", "same_computation", set(), f'''
def forward(self, x):
    q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
    scores = q @ k.transpose(-2, -1)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return self.out_proj(scores.softmax(dim=-1) @ v)

def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    {SCALED}
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    bug("forward_without_mask", "no_future_leak", {'same_computation'}, f'''
def forward(self, x):
    q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
    return self.out_proj(F.scaled_dot_product_attention(q, k, v))

def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    {SCALED}
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    bug("detached_scores", "gradients", set(),
        _weights_with("scores = (q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])).detach()")),
    bug("numpy_round_trip", "gradients", set(),
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "out = self.out_proj(self.attention_weights(x) @ self.v_proj(x))\n"
                                      "    return torch.from_numpy(out.detach().numpy().copy())")),
    bug("no_grad_in_forward", "gradients", set(),
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "with torch.no_grad():\n"
                                      "        return self.out_proj(self.attention_weights(x) @ self.v_proj(x))")),
    bug("output_written_into_input", "input_unchanged", {'gradients'},
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "return x.copy_(self.out_proj(self.attention_weights(x) @ self.v_proj(x)))")),
    bug("input_overwritten_through_data", "input_unchanged", {'gradients'},
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "out = self.out_proj(self.attention_weights(x) @ self.v_proj(x))\n"
                                      "    x.data.copy_(out.detach())\n    return out")),
    bug("float32_hard_coded", "float64", {'layer_reused'},
        _weights_with(SCALED).replace("    q, k = self.q_proj(x), self.k_proj(x)\n",
                                      "    x = x.float()\n    q, k = self.q_proj(x.to(self.q_proj.weight.dtype)), self.k_proj(x.to(self.k_proj.weight.dtype))\n")
        .replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                 "return self.out_proj(self.attention_weights(x) @ self.v_proj(x)).float()")),
    bug("length_hard_coded", "shapes", {'float64', 'gradients', 'input_unchanged', 'large_scores', 'layer_reused', 'long_sequences', 'same_computation', 'value_and_out_proj'},
        _weights_with(SCALED, mask_line='scores = scores.masked_fill(self.causal_mask(7), float("-inf"))')),
    bug("transposed_wrong_dims", "shapes", {'causal_flag', 'float64', 'gradients', 'input_unchanged', 'large_scores', 'layer_reused', 'long_sequences', 'mask_before_softmax', 'mask_polarity', 'no_future_leak', 'same_computation', 'score_pairing', 'softmax_dim', 'sqrt_d_scale', 'value_and_out_proj'}, _weights_with("scores = q @ k.transpose(0, 1) / math.sqrt(x.shape[-1])")),
]


# Scores that pair the wrong vectors: key i against every query (transposed), or a key that `view`/`reshape`
# cut out of k's memory. The checks their numbers break fail too; score_pairing is the one that names them.
SHAPE = "x.shape[0], x.shape[2], x.shape[1]"  # (B, D, T)
BUGGY += [
    bug("einsum_output_transposed", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'sqrt_d_scale'},
        _weights_with("scores = torch.einsum('btd,bsd->bst', q, k) / math.sqrt(x.shape[-1])")),
    bug("keys_times_queries", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'sqrt_d_scale'},
        _weights_with("scores = k @ q.transpose(-2, -1) / math.sqrt(x.shape[-1])")),
    bug("keys_times_queries_unscaled", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'sqrt_d_scale'},
        _weights_with("scores = k @ q.mT")),
    bug("queries_permuted", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'sqrt_d_scale'},
        _weights_with("scores = k @ q.permute(0, 2, 1) / math.sqrt(x.shape[-1])")),
    bug("scores_permuted_afterwards", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'sqrt_d_scale'},
        _weights_with("scores = (q @ k.permute(0, 2, 1)).permute(0, 2, 1) / math.sqrt(x.shape[-1])")),
    bug("keys_reshaped", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'no_future_leak', 'sqrt_d_scale'},
        _weights_with(f"scores = q @ k.reshape({SHAPE}) / math.sqrt(x.shape[-1])")),
    bug("keys_viewed", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'no_future_leak', 'sqrt_d_scale'},
        _weights_with(f"scores = q @ k.view({SHAPE}) / math.sqrt(x.shape[-1])")),
    bug("keys_viewed_in_bmm", "score_pairing", {'float64', 'gradients', 'large_scores', 'layer_reused', 'long_sequences', 'no_future_leak', 'sqrt_d_scale'}, FORWARD + f'''
def attention_weights(self, x):
    B, T, D = x.shape
    scores = torch.bmm(self.q_proj(x), self.k_proj(x).view(B, D, T)) / math.sqrt(D)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(T, x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
]


# Wrong only with hostile numbers: large scores, a reused layer, long sequences, float64 precision.
MASKED = "self.causal_mask(x.shape[-2], x.device)"
BUGGY += [
    bug("mask_fill_minus_1000", "large_scores", set(),
        _weights_with(SCALED, mask_line=f"scores = scores.masked_fill({MASKED}, -1000.0)")),
    bug("additive_mask_minus_100", "large_scores", set(),
        _weights_with(SCALED, mask_line=f"scores = scores - 100.0 * {MASKED}.to(scores.dtype)")),
    bug("softmax_by_hand_without_max", "large_scores", set(), FORWARD + f'''
def attention_weights(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill({MASKED}, float("-inf"))
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)
'''),
    bug("softmax_minus_global_max", "large_scores", set(), FORWARD + f'''
def attention_weights(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill({MASKED}, float("-inf"))
    e = (scores - scores.max()).exp()
    return e / e.sum(dim=-1, keepdim=True)
'''),
    bug("row_max_taken_before_masking", "large_scores", set(), FORWARD + f'''
def attention_weights(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    stable = scores - scores.max(dim=-1, keepdim=True).values
    if self.causal:
        stable = stable.masked_fill({MASKED}, float("-inf"))
    e = stable.exp()
    return e / e.sum(dim=-1, keepdim=True)
'''),
    bug("mask_after_softmax_renormalised", "large_scores", set(),
        _weights_with(SCALED, mask_line="pass", after=f"weights = weights.masked_fill({MASKED}, 0.0) if self.causal else weights\n"
                      "    weights = weights / weights.sum(dim=-1, keepdim=True)")),
    bug("scores_clamped_against_overflow", "large_scores", set(),
        _weights_with("scores = (q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])).clamp(-50.0, 50.0)")),
    bug("mask_cached_on_first_call", "layer_reused", set(), FORWARD + '''
def attention_weights(self, x):
    if not hasattr(self, "_mask"):
        self._mask = self.causal_mask(x.shape[-2], x.device)
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self._mask, float("-inf"))
    return scores.softmax(dim=-1)
'''),
    bug("buffer_registered_at_first_length", "layer_reused", set(), FORWARD + '''
def attention_weights(self, x):
    T = x.shape[1]
    if getattr(self, "lower", None) is None:
        self.register_buffer("lower", torch.tril(torch.ones(T, T)))
    scores = torch.einsum("bqd,bkd->bqk", self.q_proj(x), self.k_proj(x)) / math.sqrt(x.shape[2])
    if self.causal:
        scores = scores.masked_fill(self.lower[:T, :T] == 0, float("-inf"))
    return F.softmax(scores, dim=-1)
'''),
    bug("additive_mask_cached_and_padded", "layer_reused", set(), FORWARD + '''
def attention_weights(self, x):
    T = x.shape[-2]
    if not hasattr(self, "_bias"):
        self._bias = torch.zeros(T, T).masked_fill(self.causal_mask(T), float("-inf"))
    bias = F.pad(self._bias, (0, T - self._bias.shape[1], 0, T - self._bias.shape[0]))
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores + bias.to(scores.dtype)
    return scores.softmax(dim=-1)
'''),
    bug("dtype_remembered_from_first_call", "layer_reused", set(), '''
def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x)).to(self._dtype)

def attention_weights(self, x):
    self._dtype = getattr(self, "_dtype", x.dtype)
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1).to(self._dtype)
'''),
    bug("scale_tensor_cached_on_first_call", "layer_reused", set(), FORWARD + '''
def attention_weights(self, x):
    if not hasattr(self, "_scale"):
        self._scale = torch.tensor(float(x.shape[-1]), dtype=x.dtype).sqrt()
    scores = self.q_proj(x) @ self.k_proj(x).mT / self._scale
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    bug("mask_buffer_of_64", "long_sequences", set(), '''
def __init__(self, embedding_dim, *, causal=True):
    super().__init__()
    self.embedding_dim = embedding_dim
    self.causal = causal
    self.q_proj = nn.Linear(embedding_dim, embedding_dim)
    self.k_proj = nn.Linear(embedding_dim, embedding_dim)
    self.v_proj = nn.Linear(embedding_dim, embedding_dim)
    self.out_proj = nn.Linear(embedding_dim, embedding_dim)
    self.register_buffer("tril", torch.tril(torch.ones(64, 64)))

def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    B, T, C = x.shape
    wei = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1) * C ** -0.5
    if self.causal:
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
    return F.softmax(wei, dim=-1)
'''),
    bug("mask_buffer_of_256", "long_sequences", set(), '''
def __init__(self, embedding_dim, *, causal=True, block_size=256):
    super().__init__()
    self.embedding_dim = embedding_dim
    self.causal = causal
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        setattr(self, name, nn.Linear(embedding_dim, embedding_dim))
    self.register_buffer("blocked", torch.ones(block_size, block_size, dtype=torch.bool).triu(1), persistent=False)

def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    T = x.size(1)
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(self.embedding_dim)
    if self.causal:
        scores = scores.masked_fill(self.blocked[:T, :T], float("-inf"))
    return scores.softmax(-1)
'''),
    bug("class_constant_mask_of_128", "long_sequences", set(), '''
MAX_LEN = 128
FUTURE = torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).triu(1)

def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    T = x.shape[-2]
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.FUTURE[:T, :T].to(x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    bug("rows_capped_at_128", "long_sequences", set(), FORWARD + '''
def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    T = x.shape[1]
    weights = torch.zeros(x.shape[0], T, T, dtype=x.dtype, device=x.device)
    for t in range(min(T, 128)):
        seen = t + 1 if self.causal else T
        row = (q[:, t:t + 1] @ k[:, :seen].transpose(1, 2)).squeeze(1) / math.sqrt(x.shape[2])
        weights[:, t, :seen] = row.softmax(dim=-1)
    return weights
'''),
    bug("softmax_in_float32", "float64", {'layer_reused'},
        _weights_with(SCALED, softmax_line="weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(x.dtype)")),
    bug("scale_as_float32_tensor", "float64", {'layer_reused'},
        _weights_with("scores = q @ k.transpose(-2, -1) / torch.tensor(x.shape[-1]).sqrt()")),
    bug("scores_in_float32", "float64", {'layer_reused'},
        _weights_with("scores = (q.float() @ k.float().transpose(-2, -1)).to(x.dtype) / math.sqrt(x.shape[-1])")),
    bug("output_rounded_through_float32", "float64", {'layer_reused'},
        _weights_with(SCALED).replace("return self.out_proj(self.attention_weights(x) @ self.v_proj(x))",
                                      "return self.out_proj(self.attention_weights(x) @ self.v_proj(x)).float().type_as(x)")),
]


CORRECT: list[Answer] = [
    ok("reference_style", _weights_with(SCALED)),
    ok("einsum", '''
def forward(self, x):
    weights = self.attention_weights(x)
    return self.out_proj(torch.einsum("bts,bsd->btd", weights, self.v_proj(x)))

def attention_weights(self, x):
    scores = torch.einsum("btd,bsd->bts", self.q_proj(x), self.k_proj(x)) / math.sqrt(self.embedding_dim)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.size(1), x.device), float("-inf"))
    return torch.softmax(scores, dim=-1)
'''),
    ok("mT_and_F_softmax", _weights_with("scores = q @ k.mT / x.shape[-1] ** 0.5", softmax_line="weights = F.softmax(scores, dim=2)")),
    ok("bmm", '''
def forward(self, x):
    return self.out_proj(torch.bmm(self.attention_weights(x), self.v_proj(x)))

def attention_weights(self, x):
    scores = torch.bmm(self.q_proj(x), self.k_proj(x).transpose(1, 2)) * self.embedding_dim ** -0.5
    if self.causal:
        scores.masked_fill_(self.causal_mask(x.shape[1], x.device), -float("inf"))
    return scores.softmax(-1)
'''),
    ok("keys_permuted", _weights_with("scores = q @ k.permute(0, 2, 1) / math.sqrt(x.shape[-1])")),
    ok("keys_transposed_1_2", _weights_with("scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(x.shape[-1])")),
    ok("einsum_keys_first", _weights_with("scores = torch.einsum('bsd,btd->bts', k, q) / math.sqrt(x.shape[-1])")),
    ok("queries_times_keys_transposed_back", _weights_with("scores = (k @ q.mT).mT / math.sqrt(x.shape[-1])")),
    ok("scaled_dot_product_attention", f'''
def forward(self, x):
    q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
    return self.out_proj(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal))

def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    {SCALED}
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("additive_float_mask", _weights_with(
        SCALED,
        mask_line='scores = scores + torch.zeros(x.shape[-2], x.shape[-2], dtype=x.dtype, device=x.device)'
                  '.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))')),
    ok("torch_where", _weights_with(
        SCALED, mask_line='scores = torch.where(self.causal_mask(x.shape[-2], x.device), float("-inf"), scores)')),
    ok("large_negative", _weights_with(SCALED, mask_line="scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), -1e9)")),
    ok("finfo_min", _weights_with(
        SCALED, mask_line="scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), torch.finfo(scores.dtype).min)")),
    ok("tril_keep_mask", _weights_with(
        SCALED, mask_line='scores = scores.masked_fill(~torch.tril(torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool, device=x.device)), float("-inf"))')),
    ok("scale_queries_first", _weights_with("scores = (q / math.sqrt(self.embedding_dim)) @ k.transpose(-2, -1)")),
    ok("manual_exp_normalise", FORWARD + '''
def attention_weights(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    e = scores.exp()
    return e / e.sum(dim=-1, keepdim=True)
'''),
    ok("loop_over_positions", FORWARD + '''
def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    T = x.shape[1]
    rows = []
    for t in range(T):
        visible = t + 1 if self.causal else T
        s = (q[:, t:t + 1] @ k[:, :visible].transpose(1, 2)).squeeze(1) / math.sqrt(x.shape[2])
        w = torch.softmax(s, dim=-1)
        rows.append(F.pad(w, (0, T - visible)))
    return torch.stack(rows, dim=1)
'''),
    ok("F_linear_with_module_weights", '''
def forward(self, x):
    v = F.linear(x, self.v_proj.weight, self.v_proj.bias)
    return F.linear(self.attention_weights(x) @ v, self.out_proj.weight, self.out_proj.bias)

def attention_weights(self, x):
    q = F.linear(x, self.q_proj.weight, self.q_proj.bias)
    k = F.linear(x, self.k_proj.weight, self.k_proj.bias)
    scores = q.matmul(k.transpose(-1, -2)).div(math.sqrt(q.size(-1)))
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(scores.size(-1), scores.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("shared_helper_method", '''
def _scores(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1)
    return scores / torch.tensor(float(x.shape[-1]), dtype=x.dtype).sqrt()

def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    scores = self._scores(x)
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("warns_and_prints_to_stderr", '''
def forward(self, x):
    import sys, warnings
    warnings.warn("forward: this is only a reminder to myself", UserWarning)
    print("debug: forward called", file=sys.stderr)
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    import warnings
    warnings.warn("attention_weights may be slow for long sequences", RuntimeWarning)
    scores = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1) / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("baddbmm_and_view", '''
def forward(self, x):
    B, T, D = x.shape
    out = self.attention_weights(x).reshape(B * 1, T, T) @ self.v_proj(x)
    return self.out_proj(out.view(B, T, D))

def attention_weights(self, x):
    B, T, D = x.shape
    q, k = self.q_proj(x), self.k_proj(x)
    zeros = torch.zeros(B, T, T, dtype=x.dtype, device=x.device)
    if self.causal:
        zeros = zeros.masked_fill(self.causal_mask(T, x.device), float("-inf"))
    scores = torch.baddbmm(zeros, q, k.transpose(1, 2), alpha=1 / math.sqrt(D))
    return scores.softmax(dim=-1)
'''),
    ok("fused_qkv_projection", '''
def _qkv(self, x):
    weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
    bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
    return F.linear(x, weight, bias).chunk(3, dim=-1)

def _weights(self, q, k):
    scores = q @ k.mT * q.shape[-1] ** -0.5
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(q.shape[-2], q.device), float("-inf"))
    return scores.softmax(dim=-1)

def forward(self, x):
    q, k, v = self._qkv(x)
    return self.out_proj(self._weights(q, k) @ v)

def attention_weights(self, x):
    q, k, _ = self._qkv(x)
    return self._weights(q, k)
'''),
    ok("mask_buffer_at_block_size", '''
def __init__(self, embedding_dim, *, causal=True, block_size=1024):
    super().__init__()
    self.embedding_dim = embedding_dim
    self.causal = causal
    self.q_proj = nn.Linear(embedding_dim, embedding_dim)
    self.k_proj = nn.Linear(embedding_dim, embedding_dim)
    self.v_proj = nn.Linear(embedding_dim, embedding_dim)
    self.out_proj = nn.Linear(embedding_dim, embedding_dim)
    self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

def forward(self, x):
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    B, T, C = x.shape
    wei = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1) * C ** -0.5
    if self.causal:
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
    return F.softmax(wei, dim=-1)
'''),
    ok("mask_cached_per_length", FORWARD + '''
def attention_weights(self, x):
    T = x.shape[-2]
    cache = self.__dict__.setdefault("_masks", {})
    if (T, x.device) not in cache:
        cache[T, x.device] = self.causal_mask(T, x.device)
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(cache[T, x.device], float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("mask_fill_minus_1e4", _weights_with(
        SCALED, mask_line="scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), -1e4)")),
    ok("additive_finfo_min", _weights_with(
        SCALED, mask_line="scores = scores + torch.zeros_like(scores).masked_fill("
                          "self.causal_mask(x.shape[-2], x.device), torch.finfo(scores.dtype).min)")),
    ok("sdpa_with_boolean_mask", '''
def forward(self, x):
    q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
    visible = None
    if self.causal:
        visible = ~self.causal_mask(x.shape[-2], x.device)
    return self.out_proj(F.scaled_dot_product_attention(q, k, v, attn_mask=visible))

def attention_weights(self, x):
    q, k = self.q_proj(x), self.k_proj(x)
    scores = torch.baddbmm(torch.zeros(1, dtype=x.dtype, device=x.device).expand(x.shape[0], x.shape[1], x.shape[1]),
                           q, k.transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(x.shape[-1]))
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
    ok("logsumexp_softmax", FORWARD + '''
def attention_weights(self, x):
    scores = self.q_proj(x) @ self.k_proj(x).mT / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return (scores - torch.logsumexp(scores, dim=-1, keepdim=True)).exp()
'''),
    ok("softmax_upcast_to_float64", _weights_with(
        SCALED, softmax_line="weights = scores.double().softmax(dim=-1).to(x.dtype)")),
    ok("prints_shapes_on_stdout", '''
def forward(self, x):
    print("forward", tuple(x.shape), x.dtype)
    return self.out_proj(self.attention_weights(x) @ self.v_proj(x))

def attention_weights(self, x):
    print("attention_weights", tuple(x.shape))
    scores = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1) / math.sqrt(x.shape[-1])
    if self.causal:
        scores = scores.masked_fill(self.causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)
'''),
]


# ----------------------------------------------------------------------------- the proofs of the assignment
# The answers above and the further parts' (answers_parts) as the registry's proofs: each typed into the
# instructor's notebook of its part.
# Cells that only plot or time: no check reads what they define; a proof run may skip them.
PROOF_SKIP_CELLS = frozenset({"heatmaps", "timing", "params_table", "bars_demo", "trace_compare"})


def _typed(answer: Answer):
    return lambda nb: with_answer(nb, answer.code)


WHEATS: list[Proof] = (
    [Proof(a.name, "self_attention", _typed(a)) for a in CORRECT]
    + [Proof(a.name, a.notebook, edits(*a.edits)) for a in answers_parts.CORRECT])
CHAFFS: list[Proof] = (
    [Proof(a.name, "self_attention", _typed(a), a.target, a.fails) for a in BUGGY]
    + [Proof(a.name, a.notebook, edits(*a.edits), a.target, a.fails) for a in answers_parts.BUGGY])
