"""Message sizes of the collectives a transformer layer issues (one definition for training and serving).

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, Sec. 2.3 and Fig. 5 (tensor-parallel all-reduces of the ``b s h`` activations).
.. [2] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023,
   Sec. 4.2.2 (with sequence parallelism each all-reduce becomes a reduce-scatter plus an all-gather of
   the same volume).
"""

from __future__ import annotations

from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES


def tp_message_bytes(model: Model, microbatch, seq_len, cp=1):
    """Bytes of one tensor-parallel collective of a layer: the ``b s / cp x h`` 16-bit activations [bytes]
    ([1]_; the same volume with sequence parallelism, [2]_).

    Parameters
    ----------
    model : Model
    microbatch : int or array
        Sequences in the micro-batch (training) or the tokens of one pass with ``seq_len = 1`` (serving).
    seq_len : int or array
        Tokens per sequence.
    cp : int or array
        Context-parallel degree (each rank holds ``s / cp`` tokens).

    Returns
    -------
    float or numpy.ndarray [bytes], the broadcast shape of the inputs.

    >>> from hnplan.catalog import load_catalog
    >>> tp_message_bytes(load_catalog().model("llama3.1-8b"), 1, 4096) / 2**20   # 4096 x 4096 x 2 B, MiB
    32.0
    """
    return microbatch * seq_len / cp * model.hidden * ACT_BYTES
