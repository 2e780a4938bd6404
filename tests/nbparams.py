"""Small parameters for every notebook: the notebook tests, the report tests and the browser check
use them, so every notebook runs in a few seconds."""

SMALL_PARAMS = {
    "design_comparison": dict(model="llama3.1-8b", systems=["gb200-nvl72", "hgx-h100-ib-ndr"], gpus=144,
                              tokens=1e11, seq_len=4096, global_batch_tokens=4096 * 288, dtype="bf16"),
}
SMALL_PARAMS["validation"] = dict(areas=["communication", "memory"])
SMALL_PARAMS["claims_audit"] = dict(model="megatron-145.6b", gpus=576, seq_len=2048, global_batch_seqs=576)
