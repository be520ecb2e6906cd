"""Tiny Gemma 3 vision-language models built offline from configs, saved like a real checkpoint.

Everything is local: the tokenizer is a byte-level BPE trained here on a few strings, the image
processor is Gemma 3's (it falls back to its PIL backend without torchvision), and the model is a
randomly initialised ``Gemma3ForConditionalGeneration`` with two text layers and one vision layer.

``programmed_reply``: the model's output head is then set so that greedy decoding emits exactly
this reply. Attention and MLP outputs are zeroed, so the last position's hidden state is its own
token embedding; the chain's tokens get orthogonal embeddings and the head maps each one to the
next token of the reply, then to end-of-sequence. The vision tower and projector still run on the
image; they only cannot change the answer. Without it the weights stay random and the model
babbles, which is what a garbled reply looks like.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                  "<end_of_image>", "<image_soft_token>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<start_of_image>{% else %}{{ c['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
GENERATION_PROMPT = "<start_of_turn>model\n"
HIDDEN = 32


def byte_level_tokenizer(corpus: list[str], special_tokens: list[str], vocab_size: int = 400, **options):
    """A byte-level BPE tokenizer trained here on ``corpus`` (bos, eos, pad and unk among ``special_tokens``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus * 3, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>", **options)


def build_tiny_gemma3(directory: str | Path, programmed_reply: str | None = None, seed: int = 0) -> Path:
    import torch
    from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor, Gemma3TextConfig,
                              SiglipVisionConfig)
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    directory = Path(directory)
    corpus = ["Count how many objects rest on the plate. Subtask: put the carrot on the plate.",
              '{"count": 0} {"count": 1} {"count": 2} {"goals": []}', "user model"]
    if programmed_reply:
        corpus.append(programmed_reply)
    tokenizer = byte_level_tokenizer(corpus, SPECIAL_TOKENS, extra_special_tokens={
        "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"})
    processor = Gemma3Processor(image_processor=Gemma3ImageProcessorPil(size={"height": 32, "width": 32}),
                                tokenizer=tokenizer, chat_template=CHAT_TEMPLATE, image_seq_length=4)
    text_config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
        sliding_window=64, tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    vision_config = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, image_size=32, patch_size=8)
    config = Gemma3Config(text_config=text_config, vision_config=vision_config, mm_tokens_per_image=4,
                          boi_token_index=tokenizer.boi_token_id,
                          eoi_token_index=tokenizer.convert_tokens_to_ids("<end_of_image>"),
                          image_token_index=tokenizer.image_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).eval()
    if programmed_reply:
        _program(model, tokenizer, programmed_reply)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def _program(model, tokenizer, reply: str) -> None:
    import torch

    start = tokenizer.encode(GENERATION_PROMPT, add_special_tokens=False)[-1]
    chain = [start] + tokenizer.encode(reply, add_special_tokens=False)
    if len(set(chain)) != len(chain) or len(chain) > HIDDEN:
        raise ValueError(f"the reply must tokenize to at most {HIDDEN - 1} distinct tokens: {chain}")
    language_model = model.model.language_model
    with torch.no_grad():
        for layer in language_model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embeddings = model.get_input_embeddings().weight
        model.lm_head.weight.zero_()
        for position, token in enumerate(chain):
            embeddings[token] = torch.zeros(HIDDEN)
            embeddings[token][position] = 1.0
            following = chain[position + 1] if position + 1 < len(chain) else tokenizer.eos_token_id
            model.lm_head.weight[following][position] = 10.0
