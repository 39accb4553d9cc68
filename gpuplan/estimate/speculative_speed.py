"""The speed of speculative decoding: decode steps as rounds of a verify pass and proposer steps.

A round (``gpuplan.estimate.speculative`` for the proposers and the yield ``E``) on one GPU of a stage:
- the verify pass: the model's step over the decoding sequences with ``k`` more positions each, which ride
  the step as prompt-like tokens (the weights and every sequence's KV are read once; their matmul FLOPs,
  LM head included, and their attention at the sequence's context are added): the roofline of one
  forward over ``k + 1`` tokens per sequence, as vLLM's rejection sampler verifies them [Leviathan et al.
  2023; Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative Sampling"];
- ``k`` steps of the proposer: a deployment of its own (``SpeculativeWorkload.proposer``: the draft model,
  or the EAGLE/MTP head with the LM head it shares), one token per sequence each, its weights and KV read
  each time, with the engine's per-step costs.
The steady state (``gpuplan.estimate.serving_speed``) is solved over rounds: a request decodes in
``output / E`` rounds, each carrying the others' prompt chunks as a step does, at the decode context of the
real output; TPOT is a round over ``E``. A low acceptance rate makes TPOT worse than without speculation,
as it does in engines. Not counted: the proposer's own prefill of each prompt (small beside the model's for
a small draft), the CUDA graphs captured for the verify shapes, and rejected tokens' KV writes.
"""

from __future__ import annotations

from gpuplan.estimate.calibration import Calibration
from gpuplan.estimate.performance import Efficiency, decode_attention_flops, matmul_params
from gpuplan.estimate.serving_speed import Deployment, StepCost
from gpuplan.estimate.speculative import expected_tokens
from gpuplan.records import evolve


class _Rounds(Deployment):
    """A deployment whose decode steps are speculative rounds, at the steady state's decode context."""

    def __init__(self, base: Deployment, proposer: Deployment, context: float) -> None:
        self.__dict__.update(base.__dict__)  # the same rates and per-step costs as the model's own
        self.state_memo = {}  # its steps are rounds: none of the model's own steady states holds here
        spec = base.w.speculation
        assert spec is not None
        arch = base.w.architecture
        self.proposer, self.context, self.drafted = proposer, context, spec.num_tokens
        # A drafted position computes the LM head, which prompt tokens skip: its matmul FLOPs over a prompt
        # token's, so that it rides the step as that many prompt tokens.
        total = matmul_params(arch)
        self.with_head = total / max(1.0, total - arch.vocab * arch.hidden)
        self.verify_attention = decode_attention_flops(arch, context)  # one drafted position, all layers

    def step(
        self, decode: float, prefill: float, context: float, prefill_attention: float, chunk: float = 0.0
    ) -> StepCost:
        """A round: the verify pass of ``decode`` sequences (``k + 1`` positions each) beside ``prefill``
        prompt tokens, then ``k`` proposer steps; ``context`` is the solver's, replaced by the real decode
        context (the solver is given ``output / E`` steps, which would shorten it)."""
        if decode <= 0:
            return super().step(decode, prefill, context, prefill_attention, chunk)
        drafted = self.drafted * decode
        verify = super().step(
            decode,
            prefill + drafted * self.with_head,
            self.context,
            prefill_attention + drafted * self.verify_attention,
            chunk,
        )
        draft = self.proposer.step(decode, 0, self.context, 0.0)
        extra = self.drafted * draft.seconds
        return StepCost(
            verify.seconds + extra,
            verify.memory_bound,
            verify.bytes_read + self.drafted * draft.bytes_read,
            verify.mean_seconds + extra,
        )


def speculative_rounds(
    d: Deployment, context: float, calibration: Calibration, efficiency: Efficiency
) -> tuple[Deployment, float]:
    """(``d`` with speculative rounds for decode steps, the tokens a round yields per sequence ``E``)."""
    spec = d.w.speculation
    assert spec is not None
    # The proposer runs on the model's GPUs (a planner moves a deployment to another GPU kind with its gpu).
    proposer = Deployment(evolve(spec.proposer, gpu=d.w.gpu), calibration, efficiency)
    return _Rounds(d, proposer, context), expected_tokens(spec.acceptance_rate, spec.num_tokens)
