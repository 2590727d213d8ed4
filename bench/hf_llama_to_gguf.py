"""A Hugging Face Llama or Mixtral directory (config.json, model.safetensors
in fp32) as a GGUF file for llama.cpp, with the `gguf` package's writer: F32,
BF16, Q8_0, Q4_0 or IQ4_NL for every matrix (the head, the embedding table
and a Mixtral's stacked experts included, as `llama-quantize --pure` writes
them), norms and a Mixtral's routers in F32 (llama-quantize never quantizes
a router). A Mixtral is llama.cpp's "llama" architecture with an expert
count: each layer's experts stacked into ffn_gate_exps, ffn_up_exps and
ffn_down_exps [E, rows, cols], as its convert_hf_to_gguf.py writes them. The `gguf` package
cannot quantize IQ4_NL (llama.cpp's 4-bit format with a 16-entry table of
int8 levels, the counterpart of NF4), so iq4_nl() below does: each block's
scale is its largest-magnitude value over −127 and each weight takes the
nearest level, without llama-quantize's search for a better scale (decode
time does not depend on the values). q_proj and k_proj rows
are permuted from HF's rotary layout back to llama.cpp's, as its own
convert_hf_to_gguf.py does, so both read the same model. The vocabulary is
placeholder pieces (SentencePiece-style: <unk>, <s>, </s>, 256 byte tokens,
then "t<i>"): the benchmark feeds token ids.

Usage: hf_llama_to_gguf.py <hf-dir> <out.gguf> {F32,BF16,Q8_0,Q4_0,IQ4_NL}
"""
import json
import struct
import sys

import numpy as np
import gguf


def safetensors_arrays(path):
    """name -> read-only memory-mapped fp32 array of the file's tensors."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} is {info['dtype']}; this converter reads F32 only")
        begin, end = info["data_offsets"]
        arrays[name] = data[begin:end].view(np.float32).reshape(info["shape"])
    return arrays


def rotary_permute(w, heads):
    """HF's q/k rows (halves of each head) back to interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


IQ4_NL_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                         dtype=np.float32)


def iq4_nl(array):
    """[rows, cols] fp32 as IQ4_NL bytes [rows, cols / 32 * 18]: per block of
    32 an fp16 scale, then 16 bytes holding element j in the low nibble of
    byte j and element j + 16 in its high nibble (ggml's block_iq4_nl)."""
    rows, cols = array.shape
    out = np.empty((rows, cols // 32 * 18), dtype=np.uint8)
    midpoints = (IQ4_NL_LEVELS[1:] + IQ4_NL_LEVELS[:-1]) / 2
    step = max(1, (1 << 20) // cols)
    for r in range(0, rows, step):
        blocks = np.asarray(array[r:r + step], dtype=np.float32).reshape(-1, 32)
        top = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[:, None], axis=-1)
        d = (top / IQ4_NL_LEVELS[0]).astype(np.float16)
        inverse = np.where(d == 0, 0, 1 / np.where(d == 0, 1, d.astype(np.float32)))
        index = np.searchsorted(midpoints, blocks * inverse).astype(np.uint8)
        packed = index[:, :16] | (index[:, 16:] << np.uint8(4))
        chunk = np.concatenate([d.view(np.uint8), packed], axis=-1)
        out[r:r + step] = chunk.reshape(-1, cols // 32 * 18)
    return out


def add_matrix(w, target, array, qtype):
    """A weight in the file's type (1-D ones, the norms, in F32)."""
    if array.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
        w.add_tensor(target, np.ascontiguousarray(array))
    elif qtype == gguf.GGMLQuantizationType.IQ4_NL:
        rows = iq4_nl(np.ascontiguousarray(array).reshape(-1, array.shape[-1]))
        w.add_tensor(target, rows.reshape(*array.shape[:-1], -1), raw_dtype=qtype)
    else:
        w.add_tensor(target, gguf.quants.quantize(np.ascontiguousarray(array), qtype), raw_dtype=qtype)


def main():
    hf_dir, out, kind = sys.argv[1:4]
    qtype = {"F32": gguf.GGMLQuantizationType.F32, "Q8_0": gguf.GGMLQuantizationType.Q8_0,
             "Q4_0": gguf.GGMLQuantizationType.Q4_0, "BF16": gguf.GGMLQuantizationType.BF16,
             "IQ4_NL": gguf.GGMLQuantizationType.IQ4_NL}[kind]
    file_type = {"F32": gguf.LlamaFileType.ALL_F32, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                 "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "BF16": gguf.LlamaFileType.MOSTLY_BF16,
                 "IQ4_NL": gguf.LlamaFileType.MOSTLY_IQ4_NL}[kind]
    config = json.load(open(f"{hf_dir}/config.json"))
    tensors = safetensors_arrays(f"{hf_dir}/model.safetensors")
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    hidden, vocab = config["hidden_size"], config["vocab_size"]

    w = gguf.GGUFWriter(out, "llama")
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_rope_freq_base(config.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_vocab_size(vocab)
    w.add_file_type(file_type)
    experts = config.get("num_local_experts", 0)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(config["num_experts_per_tok"])
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    tokens += [f"t{i}".encode() for i in range(len(tokens), vocab)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (vocab - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer_parts = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                   "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                   "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
                   "post_attention_layernorm": "ffn_norm"}
    expert_parts = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}
    stacks = {}  # (layer, GGUF name) -> {expert: array}
    for name, array in tensors.items():
        if ".block_sparse_moe.experts." in name:
            # model.layers.<l>.block_sparse_moe.experts.<e>.w<i>.weight
            fields = name.split(".")
            stacks.setdefault((fields[2], expert_parts[fields[6]]), {})[int(fields[5])] = array
            continue
        if name.startswith("model.layers."):
            _, _, index, rest = name.split(".", 3)
            part = rest.rsplit(".", 1)[0]
            if part == "block_sparse_moe.gate":
                w.add_tensor(f"blk.{index}.ffn_gate_inp.weight", np.ascontiguousarray(array))
                continue
            if part not in layer_parts:
                sys.exit(f"{hf_dir}: unexpected tensor {name}")
            target = f"blk.{index}.{layer_parts[part]}.weight"
            if part == "self_attn.q_proj":
                array = rotary_permute(array, heads)
            elif part == "self_attn.k_proj":
                array = rotary_permute(array, kv_heads)
        elif name in names:
            target = names[name]
        else:
            sys.exit(f"{hf_dir}: unexpected tensor {name}")
        add_matrix(w, target, array, qtype)
    for (index, part), by_expert in stacks.items():
        stacked = np.stack([by_expert[e] for e in range(experts)])
        add_matrix(w, f"blk.{index}.{part}.weight", stacked, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
