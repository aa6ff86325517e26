"""A reply's errors reach a judge as reasons of a fixed form (``reasons``): never the sandbox's text.

The texts here are what a notebook sharing the sandbox with the probes can put into a reply; each
must come out as an exception's name, "an exception of its own type", or the probe's own words
rebuilt with checked fields. Honest replies keep the words the probes write.
"""

from __future__ import annotations

import pytest
import torch

from grader_tests import probing, reasons
from grader_tests.self_attention.answers import CORRECT
from grader_tests.registry import CHECKS

SECRET = "response[error_key(key)] = describe_exception(exc)"  # a line of probing.py


@pytest.mark.parametrize("text, expected", [
    ("ValueError: " + SECRET, "ValueError"),
    ("NotImplementedError", "NotImplementedError"),
    (SECRET, reasons.OWN_TYPE),
    (SECRET + ": ValueError", reasons.OWN_TYPE),
    ("Leak" * 100 + ": x", reasons.OWN_TYPE),
    ("RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
     "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"),
    (["ValueError"], reasons.OWN_TYPE),
    (None, reasons.OWN_TYPE),
    (probing.MISSING.format(name="attn_scores"), probing.MISSING.format(name="attn_scores")),
    (probing.MISSING.format(name=SECRET), reasons.OWN_TYPE),
    (probing.NOT_A_TENSOR.format(type="list"), probing.NOT_A_TENSOR.format(type="list")),
    (probing.NOT_A_TENSOR.format(type=SECRET), probing.NOT_A_TENSOR.format(type=reasons.OWN_VALUE_TYPE)),
    (probing.CONSTRUCTOR_RAISED.format(signature="SelfAttention(8, causal=True)", exception="TypeError"),
     "SelfAttention(8, causal=True) raised TypeError"),
    (probing.CONSTRUCTOR_RAISED.format(signature="SelfAttention(8, causal=True)", exception=SECRET),
     "SelfAttention(8, causal=True) raised " + reasons.OWN_TYPE),
    (probing.CONSTRUCTOR_RAISED.format(signature=SECRET, exception="TypeError"), reasons.OWN_TYPE),
    (probing.WRONG_SHAPE.format(param="query.weight"), probing.WRONG_SHAPE.format(param="query.weight")),
    (probing.WRONG_SHAPE.format(param=SECRET), reasons.OWN_TYPE),
])
def test_a_reply_error_becomes_a_reason_of_a_fixed_form(text, expected):
    assert reasons.reason_for(text) == expected


def test_a_screened_reply_keeps_its_results_and_replaces_only_its_errors():
    weights = torch.ones(2, 2)
    reply = {"weights": weights, "forward.error": "ValueError: " + SECRET, "text": SECRET, "layer.error": 3}
    screened = reasons.screened(reply)
    assert screened["weights"] is weights and screened["text"] == SECRET  # a judge decides what a result means
    assert screened["forward.error"] == "ValueError" and screened["layer.error"] == reasons.OWN_TYPE


def test_no_judge_repeats_what_a_forged_reply_says(namespace_for, quiet):
    """Every check judged on replies that put the probe's source into every result, error and string they can:
    the keys of an honest reply (a correct layer's, and the parts' names left undefined) and a few more."""
    namespace = namespace_for(CORRECT[0].code)
    for check in CHECKS.values():
        request = check.build_request(check.default_seed())
        with quiet():
            honest = check.probe(namespace, request)
        keys = {key.removesuffix(probing.ERROR_SUFFIX) for key in honest} | {"layer", "forward", "weights", "text"}
        for forged in ({key: SECRET for key in keys}, {key + probing.ERROR_SUFFIX: SECRET for key in keys}):
            try:
                verdict = check.judge(request, forged)
            except Exception:  # noqa: BLE001 - the grader fails the check with the exception's name only
                continue
            assert not verdict.passed and SECRET not in verdict.message, (check.id, verdict.message)


def test_an_honest_student_still_reads_which_step_raised_and_where_to_see_why():
    check = CHECKS["sqrt_d_scale"]
    request = check.build_request(check.default_seed())
    verdict = check.judge(request, {"weights.error": "IndexError: index 9 is out of bounds for dimension 1 with size 8"})
    assert verdict.message == ("attention_weights(x) raised IndexError (call it in your own notebook to read the "
                               "whole message).")
