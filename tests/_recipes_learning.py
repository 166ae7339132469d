"""A reward the tiny random model can actually learn, loaded as a recipe plug-in by the training tests."""

from pathlib import Path


def token_share(completion_ids, token_id: int, **kwargs) -> list[float]:
    """Share of completion tokens equal to ``token_id``: a dense signal a LoRA adapter can move in seconds."""
    return [sum(t == token_id for t in ids) / max(len(ids), 1) for ids in completion_ids]


def even_token_share(completion_ids, **kwargs) -> list[float]:
    """Share of completion tokens with an even id: it differs between almost any two sampled completions, so one
    GRPO step has a gradient whichever prompts it draws (``token_share`` of a rare token is often 0 for all)."""
    return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]


EVEN_TOKEN_REWARD = "rewards=[{path: '_recipes_learning:even_token_share'}]"


def learnable_reward_override(model_dir: Path) -> str:
    """A ``rewards=[...]`` override paying for the tiny tokenizer's `` the`` token (the real GSM8K rewards are
    always 0 for a random model, which leaves GRPO no gradient to follow)."""
    from transformers import AutoTokenizer

    token_id = AutoTokenizer.from_pretrained(model_dir).convert_tokens_to_ids("Ġthe")
    return f"rewards=[{{path: '_recipes_learning:token_share', token_id: {token_id}}}]"
