"""Fetch a model's config.json from the Hugging Face hub (the only network call of the sizing path).

Kept out of the pure core: callers fetch here and hand the result to the planner as a ResolvedModel.
"""

from __future__ import annotations

import httpx

from kvpilot.catalog.architecture import architecture_from_hf_config
from kvpilot.catalog.models import ResolvedModel
from kvpilot.errors import CatalogError, TransientError

HUB_URL = "https://huggingface.co"


def fetch_hub_config(
    model_id: str,
    revision: str | None = None,
    token: str | None = None,
    client: httpx.Client | None = None,
    base_url: str = HUB_URL,
) -> ResolvedModel:
    url = f"{base_url}/{model_id}/resolve/{revision or 'main'}/config.json"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(10.0), follow_redirects=True)
    try:
        response = http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise TransientError(f"could not reach the hub for {model_id}: {exc}", delay=30, cause=exc) from exc
    finally:
        if own:
            http.close()
    if response.status_code in (401, 403):
        raise CatalogError(
            f"the hub refused {model_id}'s config.json ({response.status_code}): the model is gated or private; "
            "give spec.model.tokenSecretRef a token with access",
            path="spec.model.tokenSecretRef",
        )
    if response.status_code == 404:
        raise CatalogError(f"{model_id} has no config.json on the hub (404)", path="spec.model.id")
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientError(f"the hub answered {response.status_code} for {model_id}", delay=60)
    if response.status_code != 200:
        raise CatalogError(f"the hub answered {response.status_code} for {model_id}", path="spec.model.id")
    try:
        config = response.json()
    except ValueError as exc:
        raise CatalogError(f"{model_id}'s config.json on the hub is not JSON", path="spec.model.id") from exc
    quant = (config.get("quantization_config") or {}).get("quant_method", "none")
    return ResolvedModel(
        id=model_id,
        architecture=architecture_from_hf_config(config, source=f"hub:{model_id}/config.json"),
        source=f"hub:{model_id}",
        checkpoint_quantization=quant if quant in ("awq", "gptq", "fp8", "bitsandbytes") else "none",
    )
