"""A randomly initialised Llama written as a Hugging Face directory
(config.json, model.safetensors in fp32), by transformers' own
LlamaForCausalLM: TinyLlama-1.1B's shape unless told otherwise. Decode
speed does not depend on the weights' values. With --experts E, a Mixtral
(MixtralForCausalLM): each layer's MLP becomes E experts of that shape, of
which each token takes --experts-per-token.

Usage: random_llama_hf.py <out-dir> [--hidden 2048] [--layers 22] [--heads 32]
       [--kv-heads 4] [--intermediate 5632] [--vocab 32000]
       [--experts E [--experts-per-token 2]]
"""
import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=22)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--experts", type=int, default=0)
    p.add_argument("--experts-per-token", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    shape = dict(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                 num_key_value_heads=a.kv_heads, intermediate_size=a.intermediate,
                 vocab_size=a.vocab, max_position_embeddings=2048, rms_norm_eps=1e-5,
                 tie_word_embeddings=False, torch_dtype="float32")
    if a.experts:
        config = MixtralConfig(num_local_experts=a.experts,
                               num_experts_per_tok=a.experts_per_token, **shape)
        model = MixtralForCausalLM(config)
    else:
        model = LlamaForCausalLM(LlamaConfig(**shape))
    model.save_pretrained(a.out, safe_serialization=True, max_shard_size="100GB")


if __name__ == "__main__":
    main()
