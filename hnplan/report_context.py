"""A report's sequence lengths against its model's context window, checked before any notebook runs."""

from __future__ import annotations

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import CatalogError, ScenarioError
from hnplan.report_params import _literal, notebook_parameters


def check_context(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """``seq_len``, and ``input_tokens + output_tokens``, at most the model's ``max_seq`` (each value given, or
    the notebook's default), as ``hnplan infer`` refuses ``--input-tokens + --output-tokens`` past it: the
    inference_capacity report planned a 2,000,000-token prompt on Llama 3.1 70B (131,072 tokens) and served it
    at a 937 s TTFT.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter(s), the model and its ``max_seq``.
    """
    declared = notebook_parameters(notebook)
    if "model" not in declared or not ({"seq_len", "input_tokens"} & set(declared)):
        return

    def value(key):
        return params[key] if key in params else _literal(declared[key]["default"])

    model = value("model")
    if not isinstance(model, str):
        return
    try:
        m = (catalog or load_catalog()).model(model)
    except CatalogError:  # check_ids names an unknown model
        return
    checks = []
    if "seq_len" in declared:
        checks.append(("'seq_len'", value("seq_len")))
    if "input_tokens" in declared and "output_tokens" in declared:
        checks.append(
            ("'input_tokens' + 'output_tokens'", (value("input_tokens") or 0) + (value("output_tokens") or 0))
        )
    for name, tokens in checks:
        if isinstance(tokens, (int, float)) and tokens > m.max_seq:
            raise ScenarioError(
                f"{where}: notebook {notebook!r}, parameter {name}: {tokens:,.0f} tokens exceed {m.id}'s maximum "
                f"sequence length {m.max_seq:,} (field max_seq)"
            )
