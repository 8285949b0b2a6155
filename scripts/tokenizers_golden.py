#!/usr/bin/env python3
"""Golden data for the pure-Elixir `tokenizers` library (tokenizers/).

Trains small tokenizers of every family with Hugging Face's `tokenizers`
package (the oracle), saves their tokenizer.json, and records what the oracle
returns for a deterministic corpus: ids, type ids, attention mask, special
tokens mask, offsets (as UTF-8 byte offsets, which is what the Rust library
returns to Elixir; Python converts them to character offsets, so they are
converted back here) and the decoding of the ids, with and without special
tokens, plus pairs, truncation and padding cases.

Output (gzipped JSON, committed): tokenizers/test/golden/
  corpus.json.gz              the strings
  <family>.tokenizer.json.gz  the trained tokenizer
  <family>.golden.json.gz     the oracle's answers
If tokenizers/test/golden/minilm/tokenizer.json exists (the real
all-MiniLM-L6-v2 tokenizer), goldens are written for it too.

Rerun (needs the PyPI package, not needed by the tests):
  python3 -m pip install --user tokenizers
  python3 scripts/tokenizers_golden.py
The corpus comes from a fixed seed; training is not bit-for-bit repeatable
(the trainers break frequency ties in hash order), so a rerun gives different
but equally valid tokenizers and goldens: commit them together.
"""

import gzip
import json
import os
import random
import sys

import tokenizers
from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tokenizers", "test", "golden")

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# ---------------------------------------------------------------- corpus

WORDS = (
    "the of and to in is you that it he was for on are as with his they I at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her would "
    "make like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part "
    "tokenization transformer embedding attention gradient unbelievable internationalization "
    "don't won't it's I'm they're we've you'll he'd CamelCase snake_case HTTPServer iPhone"
).split()
ACCENTED = "café naïve résumé façade über straße Ångström señor crème brûlée déjà-vu São Paulo Zürich mañana coöperate Øresund łódź Dvořák".split()
CJK = "我们 你好 世界 中文 分词 日本語 東京 ひらがな カタカナ 한국어 서울 漢字 学习 机器 人工智能".split()
EMOJI = ["😀", "🎉", "👍🏽", "❤️", "👨‍👩‍👧", "🇫🇷", "🚀", "✨", "🤖", "☕"]
OTHER = ["Привет", "мир", "Ελλάδα", "שלום", "مرحبا", "नमस्ते", "ไทย", "ﬁne", "Ⅻ", "①", "ｆｕｌｌ", "x²", "½", "™", "…", "—", "«quoted»", "“smart”", "‘single’"]
PUNCT = list(".,;:!?()[]{}<>\"'`~@#$%^&*-_=+|\\/")
CODE = [
    "def f(x):\n    return x + 1",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT * FROM users WHERE id = 42;",
    "const x = {a: 1, b: [2, 3]};",
    "if x == None:\n\tprint('none')",
    "<div class=\"main\">Hello</div>",
    "$ grep -rn 'TODO' src/ | wc -l",
    "λx. x → y ≠ z ≤ w",
]
URLS = [
    "https://example.com/path/to/page?query=1&b=two#frag",
    "http://www.test.org",
    "mailto:someone@example.org",
    "ftp://files.example.net/pub/file-1.2.3.tar.gz",
    "user@example.com",
]
# added and special tokens of the families below, so that their extraction is exercised
ADDED = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<s>", "</s>", "<mask>", "<unk>", "<pad>", "<|endoftext|>",
         "<|startoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<tool>", " world", "Paulo", "<0x41>"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", " \t ", "\r\n", "\u00a0", "\u3000", "\u2003"]


def make_corpus(rng):
    out = ["", " ", "  ", "\n", "\t", "a", "A", "Hello world!", "Hello, world!", "hello world"]
    pools = [WORDS] * 6 + [ACCENTED, CJK, EMOJI, OTHER, PUNCT, ADDED]
    while len(out) < 2000:
        kind = rng.random()
        if kind < 0.05:
            out.append(rng.choice(CODE))
        elif kind < 0.08:
            out.append(rng.choice(URLS) + " " + rng.choice(WORDS))
        elif kind < 0.11:
            # very long words and runs
            unit = rng.choice(["a", "ab", "xyz", "é", "中", "😀", "0", "-", "supercalifragilistic"])
            out.append(unit * rng.randint(5, 120))
        elif kind < 0.16:
            out.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 12))) for _ in range(rng.randint(1, 5)))
                       + rng.choice(["", " 3.14159", " -2.5e10", " 1,000,000", " 2024-01-01"]))
        else:
            n = rng.randint(1, 25)
            toks = []
            for _ in range(n):
                pool = rng.choice(pools)
                w = rng.choice(pool)
                r = rng.random()
                if r < 0.1:
                    w = w.upper()
                elif r < 0.2:
                    w = w.capitalize()
                toks.append(w)
                r = rng.random()
                if r < 0.75:
                    toks.append(" ")
                elif r < 0.85:
                    toks.append(rng.choice(SPACES))
                elif r < 0.95:
                    toks.append(rng.choice(PUNCT) + " ")
            s = "".join(toks)
            r = rng.random()
            if r < 0.1:
                s = " " + s
            elif r < 0.15:
                s = s.strip()
            out.append(s)
    return out


# -------------------------------------------------------------- training


def byte_tokens():
    return ["<0x%02X>" % b for b in range(256)]


def with_byte_fallback_vocab(tok):
    """The BPE trainer does not add SentencePiece's <0xNN> tokens: append them."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for t in byte_tokens():
        if t not in vocab:
            vocab[t] = len(vocab)
    data["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(data))


def train_bert(corpus):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=specials))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def train_gpt2(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    # RoBERTa's <mask> eats the space before it
    tok.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False)])
    return tok


def train_llama3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A:0 <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    tok.add_special_tokens(["<|eot_id|>"])
    tok.add_tokens([tokenizers.AddedToken("<tool>", normalized=False), tokenizers.AddedToken(" world", normalized=True),
                    tokenizers.AddedToken("Paulo", single_word=True)])
    return tok


def train_sp_bpe(corpus):
    """SentencePiece-style BPE: Metaspace pre-tokenizer, byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120)
    tok.train_from_iterator(corpus, trainer)
    tok = with_byte_fallback_vocab(tok)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(), decoders.Metaspace(replacement="▁", prepend_scheme="always")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def train_llama2(corpus):
    """Llama 2 / Mistral layout: Prepend + Replace normalizer, no pre-tokenizer, byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                                  max_token_length=12)
    # train on words so that merges stay inside words (as SentencePiece's do)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    tok.train_from_iterator(corpus, trainer)
    tok.pre_tokenizer = None
    tok = with_byte_fallback_vocab(tok)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def train_unigram(corpus):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=2500, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      shrinking_factor=0.75, max_piece_length=12)
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B:1 </s>:1",
                                                       special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return tok


def train_clip_like(corpus):
    """Word-suffix BPE (</w>) with the remaining normalizers and pre-tokenizers."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase(), normalizers.Strip(),
                                           normalizers.NFD(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Split(Regex(r"[a-z]+|[^a-z]+"), behavior="isolated"),
    ])
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>", "<|startoftext|>", "<|endoftext|>"],
                                  end_of_word_suffix="</w>", limit_alphabet=200)
    tok.train_from_iterator(corpus, trainer)
    s, e = tok.token_to_id("<|startoftext|>"), tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", pair="<|startoftext|> $A <|endoftext|> $B:1 <|endoftext|>:1",
        special_tokens=[("<|startoftext|>", s), ("<|endoftext|>", e)])
    return tok


def train_split_behaviours(corpus):
    """WordPiece with the remaining Split behaviours and pre-tokenizers."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.Sequence([normalizers.BertNormalizer(lowercase=False, strip_accents=True, handle_chinese_chars=False)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(".", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[,;:]"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"_+"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="isolated", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Punctuation(behavior="merged_with_previous"),
    ])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=2500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    c, s = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $0 [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", c), ("[SEP]", s)])
    return tok


FAMILIES = {
    "bert": train_bert,
    "gpt2": train_gpt2,
    "llama3": train_llama3,
    "sp_bpe": train_sp_bpe,
    "llama2": train_llama2,
    "unigram": train_unigram,
    "clip_like": train_clip_like,
    "split_behaviours": train_split_behaviours,
}

# ----------------------------------------------------------------- goldens


def byte_offsets(text, offsets):
    """Python's character offsets back to the UTF-8 byte offsets Rust returns."""
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[a], pos[b]] for a, b in offsets]


def record(tok, enc, text, like=None):
    """One encoding, compactly: masks as digit strings (type_ids omitted when all 0,
    attention_mask when all 1), offsets flattened and delta-coded, decode omitted
    when equal to that of `like` (the record before it)."""
    if isinstance(text, tuple):
        # pair offsets are relative to their own sequence
        offs = []
        for (a, b), sid in zip(enc.offsets, enc.sequence_ids):
            offs.append(byte_offsets(text[1] if sid == 1 else text[0], [(a, b)])[0])
    else:
        offs = byte_offsets(text, enc.offsets)
    flat, prev, deltas = [x for p in offs for x in p], 0, []
    for x in flat:
        deltas.append(x - prev)
        prev = x
    r = {"ids": enc.ids, "special_tokens_mask": "".join(map(str, enc.special_tokens_mask)), "offsets": deltas}
    if any(enc.type_ids):
        r["type_ids"] = "".join(map(str, enc.type_ids))
    if not all(enc.attention_mask):
        r["attention_mask"] = "".join(map(str, enc.attention_mask))
    decoded = tok.decode(enc.ids)
    if like is None or like.get("decode", like.get("_decode")) != decoded:
        r["decode"] = decoded
    r["_decode"] = decoded
    return r


def strip_private(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def goldens(tok, corpus, pairs, n_trunc=100):
    out = {"tokenizers_version": tokenizers.__version__, "cases": [], "pairs": [], "truncation": [], "padding": []}
    for s in corpus:
        plain = record(tok, tok.encode(s, add_special_tokens=False), s)
        special = record(tok, tok.encode(s, add_special_tokens=True), s, plain)
        out["cases"].append([strip_private(plain), strip_private(special)])
    for a, b in pairs:
        out["pairs"].append(strip_private(record(tok, tok.encode(a, b, add_special_tokens=True), (a, b))))
    for max_len, direction in [(9, "right"), (7, "left")]:
        tok.enable_truncation(max_length=max_len, direction=direction)
        for i in range(n_trunc):
            rec = record(tok, tok.encode(corpus[i]), corpus[i])
            out["truncation"].append({"max_length": max_len, "direction": direction, "input": i, **strip_private(rec)})
        for i, (a, b) in enumerate(pairs[:n_trunc]):
            rec = record(tok, tok.encode(a, b), (a, b))
            out["truncation"].append({"max_length": max_len, "direction": direction, "pair": i, **strip_private(rec)})
        tok.no_truncation()
    for i in range(50):
        for direction in ["right", "left"]:
            enc = tok.encode(corpus[i])
            enc.pad(24, direction=direction, pad_id=0, pad_type_id=0, pad_token="[PAD]")
            rec = record(tok, enc, corpus[i])
            out["padding"].append({"length": 24, "direction": direction, "input": i, **strip_private(rec)})
    return out


def write_gz(path, obj):
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as f:
        # mtime=0: the same data gives the same bytes
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9) as gz:
            gz.write(raw)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20251201)
    corpus = make_corpus(rng)
    pairs = [(corpus[i], corpus[(i * 7 + 3) % len(corpus)]) for i in range(10, 310)]
    write_gz(os.path.join(OUT, "corpus.json.gz"), {"strings": corpus, "pairs": pairs})
    only = set(sys.argv[1:])
    for name, train in FAMILIES.items():
        if only and name not in only:
            continue
        tok = train(corpus)
        write_gz(os.path.join(OUT, f"{name}.tokenizer.json.gz"), json.loads(tok.to_str()))
        write_gz(os.path.join(OUT, f"{name}.golden.json.gz"), goldens(tok, corpus, pairs if name == "bert" else pairs[:60]))
        print(name, "vocab", tok.get_vocab_size(), file=sys.stderr)
    minilm = os.path.join(OUT, "minilm", "tokenizer.json")
    if os.path.exists(minilm) and (not only or "minilm" in only):
        tok = Tokenizer.from_file(minilm)
        tok.no_truncation()
        tok.no_padding()
        write_gz(os.path.join(OUT, "minilm.golden.json.gz"), goldens(tok, corpus, pairs))
        print("minilm", "vocab", tok.get_vocab_size(), file=sys.stderr)


if __name__ == "__main__":
    main()
